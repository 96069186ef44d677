package topology

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tidemark-streams/tidemark/serde"
)

// newSource adds a source node reading topics. internal marks a repartition
// topic's source.
func newSource[K, V any](b *Builder, topics []string, keys serde.Serde[K], values serde.Serde[V], cfg *opConfig, internal bool) *node {
	op := &sourceOp[K, V]{ks: topicKeys(keys), vs: values, skipBad: cfg.skipBad, internal: internal}
	explicit := cfg.name != ""
	if !explicit {
		cfg.name = sourceName(topics)
	}
	n := b.addNode(KindSource, "SOURCE", nil, cfg, op)
	n.topics = topics
	n.internal = internal
	if !explicit {
		n.chain = strings.Join(topics, "+")
	}
	if len(topics) == 0 {
		b.fail(errorf(n.name, "%w: source without topics", ErrInvalidTopology))
	}
	if keys == nil && !internal {
		b.fail(errorf(n.name, "%w: key serde of source topics %v", ErrMissingSerde, topics))
	}
	if values == nil && !internal {
		b.fail(errorf(n.name, "%w: value serde of source topics %v", ErrMissingSerde, topics))
	}
	if cfg.extractor != nil {
		f, ok := cfg.extractor.(func(Record[K, V], int64) int64)
		if !ok {
			b.fail(errorf(n.name, "%w: timestamp extractor %T does not take %T", ErrInvalidTopology, cfg.extractor, Record[K, V]{}))
		}
		op.extract = f
	}
	if cfg.tenant != nil {
		f, ok := cfg.tenant.(func(K, V) string)
		if !ok {
			b.fail(errorf(n.name, "%w: tenant function %T does not take %T keys and %T values", ErrInvalidTopology, cfg.tenant, *new(K), *new(V)))
		}
		op.tenant = f
	}
	return n
}

type sourceOp[K, V any] struct {
	ks      serde.Serde[K]
	vs      serde.Serde[V]
	extract func(Record[K, V], int64) int64
	tenant  func(K, V) string // WithTenant
	skipBad bool
	// internal: a repartition topic's source, whose records carry their
	// tenant in TenantHeader.
	internal bool
}

func (o *sourceOp[K, V]) instantiate(env *opEnv, children []any) (any, error) {
	next, err := forwarderOf[K, V](env, children)
	if err != nil {
		return nil, err
	}
	kn, _ := o.ks.(serde.Nuller)
	vn, _ := o.vs.(serde.Nuller)
	return &sourceInst[K, V]{op: o, env: env, next: next, keyNull: kn, valueNull: vn}, nil
}

type sourceInst[K, V any] struct {
	op   *sourceOp[K, V]
	env  *opEnv
	next forwarder[K, V]
	// keyNull and valueNull are the serdes' nulls, if they have one.
	keyNull, valueNull serde.Nuller
}

// Deliver decodes the record. A null key becomes the zero K with NullKey
// set and a null value a tombstone, neither calling the serde; so do a key
// and a value the serde reads as null (serde.Nuller: JSON's null). An
// empty key or value is decoded like any other bytes.
func (s *sourceInst[K, V]) Deliver(in *InputRecord) error {
	r := Record[K, V]{Timestamp: in.Timestamp, Headers: in.Headers,
		NullKey: in.Key == nil || s.keyNull != nil && s.keyNull.IsNull(in.Key)}
	var err error
	if !r.NullKey {
		if r.Key, err = s.op.ks.Decode(in.Key); err != nil {
			return s.undecodable(in, "key", err)
		}
	}
	if in.Value == nil || s.valueNull != nil && s.valueNull.IsNull(in.Value) {
		r.Tombstone = true
	} else if r.Value, err = s.op.vs.Decode(in.Value); err != nil {
		return s.undecodable(in, "value", err)
	}
	if s.op.extract != nil {
		r.Timestamp = s.op.extract(r, s.env.StreamTime())
	}
	if r.Timestamp < 0 {
		s.env.Dropped(s.env.node, DropInvalidTimestamp)
		return nil
	}
	s.env.ObserveTimestamp(r.Timestamp)
	setTenant(s.env.TaskEnv, s.op.sourceTenant(&r))
	if err := s.next.forward(r); err != nil {
		return s.wrap(in, err)
	}
	return nil
}

// undecodable handles a serde's failure to decode the record's key or
// value (what). A serde that could not reach its schema registry
// (serde.ErrRegistry) has not judged the record, which may be fine:
// skipping or dead-lettering it would lose it, so the task fails without
// ErrDeserialize, whatever SkipUndecodable or the deserialization handler
// say, and the record is read again when the task is retried.
func (s *sourceInst[K, V]) undecodable(in *InputRecord, what string, err error) error {
	if errors.Is(err, serde.ErrRegistry) {
		return s.wrap(in, fmt.Errorf("%s not decoded yet: %w", what, err))
	}
	err = fmt.Errorf("%w %s: %w", ErrDeserialize, what, err)
	if s.op.skipBad {
		s.env.Dropped(s.env.node, DropUndecodable)
		return nil
	}
	return s.wrap(in, err)
}

func (s *sourceInst[K, V]) wrap(in *InputRecord, err error) error {
	return fmt.Errorf("source %q %s/%d@%d: %w", s.env.node, in.Topic, in.Partition, in.Offset, err)
}
