package topology

import (
	"github.com/tidemark-streams/tidemark/serde"
)

// To writes the stream to topic with the stream's serdes. A
// WithPartitioner or WithPlacement option chooses partitions; otherwise the runtime's default
// partitioner (murmur2 of the key bytes) does, except for the windowed
// keys of a windowed table (and TimeWindowedSerde or SessionWindowedSerde
// keys), which go to the partition of the key inside the window, as Kafka
// Streams' WindowedStreamPartitioner puts them. A record with a null key is
// written with a null Kafka key, never the encoding of the zero K (the
// default partitioner puts it in partition 0; a partitioner sees the zero
// K).
func (s Stream[K, V]) To(topic string, opts ...SinkOption) {
	cfg := newOpConfig(opts)
	n := s.b.addNode(KindSink, "SINK", []*node{s.n}, cfg, nil)
	n.topics = []string{topic}
	n.impl = s.sinkOp(n, cfg)
}

func (s Stream[K, V]) sinkOp(n *node, cfg *opConfig) *sinkOp[K, V] {
	if s.ks == nil {
		s.b.fail(errorf(n.name, "%w: key serde for topic %q (set it with WithSerdes)", ErrMissingSerde, n.topics[0]))
	}
	if s.vs == nil {
		s.b.fail(errorf(n.name, "%w: value serde for topic %q (set it with WithSerdes)", ErrMissingSerde, n.topics[0]))
	}
	ks := topicKeys(s.ks)
	op := &sinkOp[K, V]{topic: n.topics[0], node: n, ks: ks, vs: s.vs, placement: cfg.placement}
	op.keyNull, _ = ks.(serde.Nuller)
	if b, ok := ks.(baseKeyEncoder[K]); ok && !n.internal {
		op.partitionBy = b.encodeBaseKey
	} else if _, windowed := s.ks.(topicLayout); windowed && n.internal {
		// A repartition of a windowed table's keys: partitioned by
		// tidemark's layout as before (Kafka Streams' repartitions use the
		// default partitioner too), so a query of a store it feeds, which
		// holds that layout, finds a key's partition from its bytes.
		op.partitionBy = s.ks.Encode
	}
	op.valueNull, _ = s.vs.(serde.Nuller)
	op.keyNil, op.valueNil = keyNull[K](), keyNull[V]()
	s.b.checkPlacementOption(n, cfg)
	if cfg.partitioner != nil {
		f, ok := cfg.partitioner.(func(string, K, V, int32) int32)
		if !ok {
			s.b.fail(errorf(n.name, "%w: partitioner %T does not take %T keys and values", ErrInvalidTopology, cfg.partitioner, Record[K, V]{}))
		}
		op.partition = f
		op.routed = cfg.routedPartitioner
	}
	return op
}

type sinkOp[K, V any] struct {
	topic     string
	node      *node // read at instantiation: Build settles keepNullKeys
	ks        serde.Serde[K]
	vs        serde.Serde[V]
	partition func(string, K, V, int32) int32
	routed    bool             // partition is internal routing (opConfig.routedPartitioner)
	placement *TenantPlacement // WithPlacement (placement.go)
	// partitionBy, when set, encodes the bytes that choose a record's
	// partition without a partitioner or placement: for windowed keys
	// (TimeWindowedSerde, SessionWindowedSerde) written to a topic, the key
	// inside the window, as Kafka Streams' WindowedStreamPartitioner does.
	partitionBy func(dst []byte, k K) ([]byte, error)
	// keyNull and valueNull are the serdes' own nulls (serde.Nuller: JSON's
	// null, which a nil pointer, slice or map encodes to). A key or value
	// that encodes to it is written as a null Kafka key or a tombstone: the
	// sources read it back so, and log compaction deletes only a null value.
	keyNull, valueNull serde.Nuller
	// keyNil and valueNil test for a nil key or value (a pointer, slice,
	// map or interface; nil for other types): written as a null Kafka key
	// or a tombstone without calling the serde, as Kafka's serializers
	// (Confluent's Avro serializer among them) map null to null.
	keyNil   func(K) bool
	valueNil func(V) bool
}

func (o *sinkOp[K, V]) instantiate(env *opEnv, _ []any) (any, error) {
	s := &sinkInst[K, V]{op: o, env: env, dropNullKeys: o.node.internal && !o.node.keepNullKeys}
	s.out.Topic = o.topic
	s.out.Node = env.node
	return receiver[K, V](s), nil
}

// sinkInst reuses its key and value buffers and its OutputRecord: TaskEnv.Emit
// must copy what it keeps, which is what keeps the stateless path free of
// per-record allocations here.
type sinkInst[K, V any] struct {
	op   *sinkOp[K, V]
	env  *opEnv
	out  OutputRecord
	kbuf []byte
	vbuf []byte
	bbuf []byte   // sinkOp.partitionBy's bytes
	hbuf []Header // headers with TenantHeader, for a repartition sink
	// dropNullKeys: a repartition sink with no left or outer join
	// downstream, where a null key could not be grouped or joined.
	dropNullKeys bool
}

// process writes r. A null key is written as a null Kafka key and an empty
// encoding as an empty one: the two never meet. A nil key or value is
// null too (sinkOp.keyNil, valueNil).
func (s *sinkInst[K, V]) process(r Record[K, V]) error {
	nullKey := r.NullKey || isNull(s.op.keyNil, r.Key)
	if !nullKey {
		var err error
		if s.kbuf, err = s.op.ks.Encode(s.kbuf[:0], r.Key); err != nil {
			return errorf(s.env.node, "encode key for %q: %w", s.op.topic, err)
		}
		if s.kbuf == nil {
			s.kbuf = []byte{}
		}
		s.out.Key = s.kbuf
		nullKey = s.op.keyNull != nil && s.op.keyNull.IsNull(s.kbuf)
	}
	if nullKey {
		if s.dropNullKeys {
			s.env.Dropped(s.env.node, DropNullKey)
			return nil
		}
		s.out.Key = nil
	}
	s.out.Value = nil
	if !r.Tombstone && !isNull(s.op.valueNil, r.Value) {
		var err error
		if s.vbuf, err = s.op.vs.Encode(s.vbuf[:0], r.Value); err != nil {
			return errorf(s.env.node, "encode value for %q: %w", s.op.topic, err)
		}
		if s.vbuf == nil {
			s.vbuf = []byte{}
		}
		if s.op.valueNull == nil || !s.op.valueNull.IsNull(s.vbuf) {
			s.out.Value = s.vbuf
		}
	}
	s.out.Partition = -1
	if s.op.partition != nil {
		n, err := s.env.PartitionCount(s.op.topic)
		if err != nil {
			return errorf(s.env.node, "partition count of %q: %w", s.op.topic, err)
		}
		p := s.op.partition(s.op.topic, r.Key, r.Value, n)
		if p < 0 || p >= n {
			return errorf(s.env.node, "partitioner chose partition %d of %q, which has %d", p, s.op.topic, n)
		}
		s.out.Partition = p
	} else if s.op.placement != nil {
		n, err := s.env.PartitionCount(s.op.topic)
		if err != nil {
			return errorf(s.env.node, "partition count of %q: %w", s.op.topic, err)
		}
		if s.out.Partition, err = s.op.placement.Partition(tenantOf(s.env.TaskEnv), s.out.Key, n); err != nil {
			return errorf(s.env.node, "place record in %q: %w", s.op.topic, err)
		}
	} else if s.op.partitionBy != nil && s.out.Key != nil {
		n, err := s.env.PartitionCount(s.op.topic)
		if err != nil {
			return errorf(s.env.node, "partition count of %q: %w", s.op.topic, err)
		}
		if s.bbuf, err = s.op.partitionBy(s.bbuf[:0], r.Key); err != nil {
			return errorf(s.env.node, "encode the partitioning key for %q: %w", s.op.topic, err)
		}
		s.out.Partition = DefaultPartition(s.bbuf, n)
	}
	s.out.Timestamp = r.Timestamp
	s.out.Headers = r.Headers
	if s.op.node.internal {
		if t := tenantOf(s.env.TaskEnv); t != "" || hasTenantHeader(r.Headers) {
			s.hbuf = withTenantHeader(s.hbuf, r.Headers, t)
			s.out.Headers = s.hbuf
		}
	}
	return s.env.Emit(&s.out)
}

// Repartition writes the stream through an internal topic
// "<app>-<name>-repartition" and reads it back, so records are partitioned
// by their current key. It ends a sub-topology and starts another. Records
// with a null key cannot be partitioned by it: unless a left or outer join
// is downstream (which emits them unjoined), the repartition drops them,
// counted as DropNullKey, as Kafka Streams does (without counting).
func (s Stream[K, V]) Repartition(opts ...RepartitionOption) Stream[K, V] {
	return s.repartition("REPARTITION", newOpConfig(opts))
}

func (s Stream[K, V]) repartition(op string, cfg *opConfig) Stream[K, V] {
	sink := s.b.addNode(KindSink, op, []*node{s.n}, &opConfig{name: cfg.name}, nil)
	if cfg.name == "" && s.b.strict {
		s.b.fail(errorf(sink.name, "%w: repartition topic has a generated name; name the operator with Named (RequireNamedState)", ErrInvalidTopology))
	}
	base := sink.name
	if cfg.topicBase != "" {
		base = cfg.topicBase
	}
	topic := s.b.app + "-" + base + "-repartition"
	sink.topics = []string{topic}
	sink.internal = true
	sink.impl = s.sinkOp(sink, cfg)
	if err := s.b.claimTopic(topic, sink.name); err != nil {
		s.b.fail(err)
	}
	s.b.repart = append(s.b.repart, InternalTopic{
		Name:       topic,
		Partitions: cfg.partitions,
		Config:     map[string]string{"cleanup.policy": "delete", "retention.ms": "-1"},
	})
	src := newSource(s.b, []string{topic}, s.ks, s.vs, &opConfig{name: sink.name + "-source"}, true)
	src.chain, src.pos = sink.chain, sink.pos+1
	return Stream[K, V]{b: s.b, n: src, ks: s.ks, vs: s.vs}
}
