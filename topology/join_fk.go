package topology

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/tidemark-streams/tidemark/serde"
)

// JoinOnForeignKey joins each row of t with the row of other whose key is
// the row's foreign key, fk(key, value), as Kafka Streams' KTable foreign-key
// join (KIP-213) does: order lines joined with the product each one names.
//
//	lines.JoinOnForeignKey(products,
//		func(_ string, l Line) (string, bool) { return l.SKU, l.SKU != "" },
//		func(_ string, l Line, p Product) Priced { return Priced{Line: l, Price: p.Price} },
//		topology.Named("priced-lines"))
//
// The result is keyed like t: it has a row for each key of t whose row has
// a foreign key (ok=true) that is a key of other, joiner(key, value,
// otherValue). Changes on either side update it: a changed right row
// updates every left row that refers to it; a deleted right row, a deleted
// left row, a left row whose foreign key changes to a missing right row or
// whose fk returns ok=false, all delete the result row (a tombstone
// downstream, sent only when the row existed, where Kafka Streams may send
// tombstones for rows that never joined). A foreign key fk maps to a nil
// pointer, interface, slice or map counts as no foreign key. A row joined
// for a left change is timestamped with the later of the two rows'
// timestamps, a row re-joined for a right change with that change's
// timestamp, as in Kafka Streams; a delete, and a left join's unjoined
// row, with the timestamp of the change that caused it (where a left
// change deletes an inner join's row, Kafka Streams takes the later of it
// and the right row's timestamp). A tombstone for a
// right key the table does not hold is answered like a delete, so a left
// join writes the unjoined rows subscribed to it again, as Kafka Streams
// does.
//
// t and other need not be co-partitioned, nor have the same partition
// count: t's rows travel to other's partitions and back through two
// internal topics, named after the operator (Named; generated names
// otherwise, refused by RequireNamedState):
//
//	<app>-<name>-subscription-repartition  keyed by foreign key, other's partition count
//	<app>-<name>-response-repartition      keyed by t's key, t's partition count
//
// A response is written to the partition the left row was read from (as
// Kafka Streams' primaryPartition), not the default partition of its key,
// so t's topic may be partitioned by any partitioner.
//
// The runtime creates them with those counts (InternalTopic.SizedByReader).
// A left row subscribes to its foreign key; other's tasks keep the
// subscriptions in the store "<name>-subscription-store", keyed (foreign
// key, key), and answer each subscription, and each change of a subscribed
// right row, with a response carrying the right row. A row whose foreign
// key changes or goes unsubscribes from the old one. Each subscription and
// response carries a 128-bit hash (FNV-1a) of the encoded left value it
// was made for; a response whose hash is not the hash of the left row's
// current value is stale (the row changed or went while it travelled) and
// is dropped, silently, so a result never joins a left value with the
// right row of a foreign key it no longer has. The result settles once both
// topics are drained: then it equals the join of the two tables' current
// rows. Left deletes and rows without a foreign key need no right row:
// their result is decided at once, without a round trip.
//
// The result is materialized in the store "<name>" (logged to
// "<app>-<name>-changelog" like other operator stores), which keeps the
// joined inputs of each row, not the joiner's output: no serde of VR is
// needed, joiner is called on read and for the old value of each update,
// so it must be deterministic, as for the other table joins. StoreName is
// "" since the store does not hold VR values. Updates carry old values, so
// the result can be grouped and aggregated (Table.GroupBy). The cost: the
// left value is stored twice (t's store and the result's), and a change
// of a right row sends one response per left row referring to it.
//
// t needs key and value serdes (the value's encoding is hashed and
// stored; it must be deterministic), other key and value serdes. The
// join's own stores are logged and its internal topics are written in the
// tasks' transactions, so with exactly-once processing a restart (on a
// fresh state directory too) neither loses nor repeats a subscription or
// a response.
func (t Table[K, V]) JoinOnForeignKey[KO, VO, VR any](other Table[KO, VO], fk func(key K, value V) (KO, bool), joiner func(key K, value V, other VO) VR, opts ...Option) Table[K, VR] {
	return joinOnForeignKey(t, other, fk, false, func(k K, v V, o VO, _ bool) VR { return joiner(k, v, o) }, opts)
}

// LeftJoinOnForeignKey is JoinOnForeignKey keeping every row of t: a row
// without a foreign key, or whose foreign key is not a key of other, is
// joiner(key, value, zero, false). Deleting a right row turns the rows
// that refer to it into such rows; only deleting a left row deletes its
// result row.
func (t Table[K, V]) LeftJoinOnForeignKey[KO, VO, VR any](other Table[KO, VO], fk func(key K, value V) (KO, bool), joiner func(key K, value V, other VO, found bool) VR, opts ...Option) Table[K, VR] {
	return joinOnForeignKey(t, other, fk, true, joiner, opts)
}

// fkInstr says what other's task does with a subscription, as Kafka
// Streams' SubscriptionWrapper.Instruction.
type fkInstr byte

const (
	// fkUnsubscribe deletes the subscription and answers nothing: the
	// left row moved to another foreign key, lost it or was deleted
	// (DELETE_KEY_NO_PROPAGATE).
	fkUnsubscribe fkInstr = iota + 1
	// fkSubscribeIfFound stores the subscription and answers only when the
	// right row exists (PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE). No longer
	// sent (see fkSendOp: an answer made for an earlier version of the row
	// with the same value could pass for its answer); still understood,
	// for the subscriptions an older version left in the topic.
	fkSubscribeIfFound
	// fkSubscribe stores the subscription and always answers, with "not
	// found" when the right row is missing, so that a previous result is
	// deleted or turned unjoined (PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE).
	fkSubscribe
)

// fkHash identifies the left value a subscription was made for.
type fkHash [16]byte

func fkHashOf(encoded []byte) fkHash {
	h := fnv.New128a()
	h.Write(encoded)
	var out fkHash
	copy(out[:], h.Sum(nil))
	return out
}

// fkSubscription is a subscription-topic value (keyed by foreign key).
type fkSubscription[K any] struct {
	instr fkInstr
	hash  fkHash
	pk    K
	// partition is the partition of t's task that sent it, where the
	// answers must go back to (as Kafka Streams' primaryPartition): t's
	// topic need not be partitioned by the default partitioner. -1 in the
	// subscriptions of an older version: answers then go to the default
	// partition of pk.
	partition int32
}

// fkResponse is a response-topic value (keyed by t's key).
type fkResponse[VO any] struct {
	hash  fkHash
	found bool
	v     VO
	// partition is where the response goes (fkSubscription.partition); it
	// is not encoded: the response topic's partition is the answer.
	partition int32
}

// fkResponsePartition is the partitioner of the response topic: the
// partition of the left row's task, or the default one of the key when
// the subscription did not say it.
func fkResponsePartition[K, VO any](ks serde.Serde[K]) func(string, K, fkResponse[VO], int32) int32 {
	var buf []byte
	return func(_ string, k K, v fkResponse[VO], n int32) int32 {
		if v.partition >= 0 && v.partition < n {
			return v.partition
		}
		var err error
		if buf, err = ks.Encode(buf[:0], k); err != nil {
			return 0 // the sink encodes the key again and reports the error
		}
		return DefaultPartition(buf, n)
	}
}

// fkVersion starts every encoding of the join's internal topics and
// stores, so that a later layout can tell old records apart.
const fkVersion byte = 1

// fkSubscriptionVersion is the version of subscriptions that carry the
// sender's partition (after the hash, 4 bytes big-endian); version 1
// subscriptions, without it, are still read.
const fkSubscriptionVersion byte = 2

// fkSubscriptionSerde encodes version, instruction, hash, partition, then
// the key.
type fkSubscriptionSerde[K any] struct{ ks serde.Serde[K] }

func (s fkSubscriptionSerde[K]) Encode(dst []byte, v fkSubscription[K]) ([]byte, error) {
	dst = append(append(dst, fkSubscriptionVersion, byte(v.instr)), v.hash[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.partition))
	return s.ks.Encode(dst, v.pk)
}

func (s fkSubscriptionSerde[K]) Decode(b []byte) (fkSubscription[K], error) {
	var v fkSubscription[K]
	head := 2 + len(v.hash)
	if len(b) >= 1 && b[0] == fkSubscriptionVersion {
		head += 4
	}
	if len(b) < head || b[0] != fkVersion && b[0] != fkSubscriptionVersion || b[1] < byte(fkUnsubscribe) || b[1] > byte(fkSubscribe) {
		return v, fmt.Errorf("%w: foreign-key subscription of %d bytes (version %v)", serde.ErrDecode, len(b), b[:min(len(b), 1)])
	}
	v.instr = fkInstr(b[1])
	copy(v.hash[:], b[2:])
	v.partition = -1
	if b[0] == fkSubscriptionVersion {
		v.partition = int32(binary.BigEndian.Uint32(b[2+len(v.hash):]))
	}
	pk, err := s.ks.Decode(b[head:])
	if err != nil {
		return v, fmt.Errorf("foreign-key subscription key: %w", err)
	}
	v.pk = pk
	return v, nil
}

// fkResponseSerde encodes version, found flag, hash, then the right value
// when found.
type fkResponseSerde[VO any] struct{ vs serde.Serde[VO] }

func (s fkResponseSerde[VO]) Encode(dst []byte, v fkResponse[VO]) ([]byte, error) {
	found := byte(0)
	if v.found {
		found = 1
	}
	dst = append(append(dst, fkVersion, found), v.hash[:]...)
	if !v.found {
		return dst, nil
	}
	return s.vs.Encode(dst, v.v)
}

func (s fkResponseSerde[VO]) Decode(b []byte) (fkResponse[VO], error) {
	var v fkResponse[VO]
	if len(b) < 2+len(v.hash) || b[0] != fkVersion || b[1] > 1 {
		return v, fmt.Errorf("%w: foreign-key response of %d bytes (version %v)", serde.ErrDecode, len(b), b[:min(len(b), 1)])
	}
	copy(v.hash[:], b[2:])
	if v.found = b[1] == 1; v.found {
		ov, err := s.vs.Decode(b[2+len(v.hash):])
		if err != nil {
			return v, fmt.Errorf("foreign-key response value: %w", err)
		}
		v.v = ov
	}
	return v, nil
}

// fkJoined is what the result node gets: the inputs of a result row, or
// del for no row.
type fkJoined[V, VO any] struct {
	left  V
	right VO
	found bool
	del   bool
}

// joinOnForeignKey wires the operator across two sub-topologies (t's, A,
// and other's, B):
//
//	A: t ─┬─ SUBSCRIBE ─→ subscription topic ─→ B: SUBSCRIPTION (store) ─┬─ RESPOND ─→ response topic
//	      │                                      other ─ FOREIGN (store) ─┘
//	      └─ UNJOINED ─┐
//	A: response topic ─ RESOLVE ─┴─ result node (store) ─→ downstream
//
// UNJOINED handles, without a round trip, the left changes whose result is
// known at once: a deleted row, a row without a foreign key.
func joinOnForeignKey[K, V, KO, VO, VR any](t Table[K, V], o Table[KO, VO], fk func(K, V) (KO, bool), left bool, joiner func(K, V, VO, bool) VR, opts []Option) Table[K, VR] {
	b := t.b
	cfg := newOpConfig(opts)
	op := "FK-JOIN"
	if left {
		op = "FK-LEFTJOIN"
	}
	null := keyNull[KO]()
	fkOf := func(k K, v V) (KO, bool) {
		ko, ok := fk(k, v)
		return ko, ok && !isNull(null, ko)
	}

	send := b.addNode(KindProcessor, op+"-SUBSCRIBE", []*node{t.n}, sideCfg(cfg, "-subscribe"), nil)
	b.checkSame(send, o.b)
	for _, s := range []struct {
		what    string
		missing bool
	}{
		{"key serde of the left table", t.ks == nil},
		{"value serde of the left table", t.vs == nil},
		{"key serde of the right table", o.ks == nil},
		{"value serde of the right table", o.vs == nil},
	} {
		if s.missing {
			b.fail(errorf(send.name, "%w: %s (set it with WithSerdes)", ErrMissingSerde, s.what))
		}
	}
	send.impl = fkSendOp(fkOf, t.vs, o.ks)
	var subSerde serde.Serde[fkSubscription[K]]
	if t.ks != nil {
		subSerde = fkSubscriptionSerde[K]{ks: t.ks}
	}
	subs := Stream[KO, fkSubscription[K]]{b: b, n: send, ks: o.ks, vs: subSerde}.
		repartition("FK-SUBSCRIPTION", sideCfg(cfg, "-subscription"))
	b.sizeByReader(subs.n.topics0())

	// Other's sub-topology: the subscription store, fed by the subscription
	// topic and read on every change of other.
	subCfg := sideCfg(cfg, "-subscription-store")
	recv := b.addNode(KindProcessor, op+"-SUBSCRIPTION", []*node{subs.n}, subCfg, nil)
	subStore := b.addStore(recv, subCfg, "", kvSpec(), false)
	recv.impl = fkSubscriptionOp[K, KO, VO](subStore, o.ks, t.ks, o.src)
	for _, st := range o.src.storeNames() {
		b.connect(recv, st)
	}
	foreign := b.addNode(KindProcessor, op+"-FOREIGN", []*node{o.n}, sideCfg(cfg, "-foreign"),
		fkForeignOp[K, KO, VO](subStore, o.ks, t.ks))
	b.connect(foreign, subStore)
	b.requireCopartition(recv.name, subs.n, o.n)
	respond := b.addNode(KindProcessor, op+"-RESPOND", []*node{recv, foreign}, sideCfg(cfg, "-respond"),
		opFunc[K, fkResponse[VO], K, fkResponse[VO]](func(_ *opEnv, next forwarder[K, fkResponse[VO]]) (receiver[K, fkResponse[VO]], error) {
			return receiverFunc[K, fkResponse[VO]](next.forward), nil
		}))
	var respSerde serde.Serde[fkResponse[VO]]
	if o.vs != nil {
		respSerde = fkResponseSerde[VO]{vs: o.vs}
	}
	respCfg := sideCfg(cfg, "-response")
	if t.ks != nil {
		respCfg.partitioner = fkResponsePartition[K, VO](t.ks)
		respCfg.routedPartitioner = true
	}
	resp := Stream[K, fkResponse[VO]]{b: b, n: respond, ks: t.ks, vs: respSerde}.
		repartition("FK-RESPONSE", respCfg)
	b.sizeByReader(resp.n.topics0())

	// Back in t's sub-topology: responses checked against t's current rows,
	// and the rows decided without a round trip, into the result store.
	ls := t.src
	resolve := b.addNode(KindProcessor, op+"-RESOLVE", []*node{resp.n}, sideCfg(cfg, "-resolve"),
		fkResolveOp[K, V, VO](ls, t.vs, left))
	for _, st := range ls.storeNames() {
		b.connect(resolve, st)
	}
	b.requireCopartition(resolve.name, resp.n, t.n)
	unjoined := b.addNode(KindProcessor, op+"-UNJOINED", []*node{t.n}, sideCfg(cfg, "-unjoined"),
		fkUnjoinedOp[K, V, VO](func(k K, v V) bool { _, ok := fkOf(k, v); return ok }, left))
	result := b.addNode(KindProcessor, op, []*node{resolve, unjoined}, cfg, nil)
	resStore := b.addStore(result, cfg, "", kvSpec(), false)
	rs := &fkResultStore[K, V, VO]{name: resStore, ks: t.ks, js: fkJoinedSerde[V, VO]{vs: t.vs, os: o.vs}}
	result.impl = fkResultOp(rs, joiner)
	src := &funcGetters[K, VR]{stores: []string{resStore}, mk: func(env *opEnv) (getter[K, VR], error) {
		st, err := rs.open(env)
		if err != nil {
			return nil, err
		}
		return getterFunc[K, VR](func(k K) (v VR, ts int64, found bool, err error) {
			j, ts, found, err := st.get(k)
			if err != nil || !found {
				return v, 0, false, err
			}
			return joiner(k, j.left, j.right, j.found), ts, true, nil
		}), nil
	}}
	return Table[K, VR]{b: b, n: result, ks: t.ks, vs: serdeAs[VR](t.vs), src: src}
}

// sizeByReader marks the internal topic as sized like the other inputs of
// the sub-topology reading it (InternalTopic.SizedByReader).
func (b *Builder) sizeByReader(topic string) {
	for i := range b.repart {
		if b.repart[i].Name == topic {
			b.repart[i].SizedByReader = true
		}
	}
}

// fkSendOp turns t's changes into subscriptions: an unsubscribe from the
// old foreign key when it changed or went, a subscription to the new one.
func fkSendOp[K, V, KO any](fk func(K, V) (KO, bool), vs serde.Serde[V], kos serde.Serde[KO]) opFunc[K, change[V], KO, fkSubscription[K]] {
	return func(env *opEnv, next forwarder[KO, fkSubscription[K]]) (receiver[K, change[V]], error) {
		var vbuf, obuf, nbuf []byte
		part := env.TaskID().Partition
		return receiverFunc[K, change[V]](func(r Record[K, change[V]]) error {
			c := r.Value
			var ofk, nfk KO
			var ook, nok bool
			if c.hasOld {
				ofk, ook = fk(r.Key, c.oldV)
			}
			if c.hasNew {
				nfk, nok = fk(r.Key, c.newV)
			}
			send := func(k KO, s fkSubscription[K]) error {
				return next.forward(Record[KO, fkSubscription[K]]{Key: k, Value: s, Timestamp: r.Timestamp, Headers: r.Headers})
			}
			if ook {
				moved := !nok
				if nok {
					var err error
					if obuf, err = kos.Encode(obuf[:0], ofk); err != nil {
						return errorf(env.node, "encode old foreign key: %w", err)
					}
					if nbuf, err = kos.Encode(nbuf[:0], nfk); err != nil {
						return errorf(env.node, "encode foreign key: %w", err)
					}
					moved = !bytes.Equal(obuf, nbuf)
				}
				if moved {
					if err := send(ofk, fkSubscription[K]{instr: fkUnsubscribe, pk: r.Key, partition: part}); err != nil {
						return err
					}
				}
			}
			if !nok {
				return nil
			}
			var err error
			if vbuf, err = vs.Encode(vbuf[:0], c.newV); err != nil {
				return errorf(env.node, "encode value to hash: %w", err)
			}
			// Every subscription gets an answer, "not found" too, also an
			// inner join's for a row that had no result (where Kafka
			// Streams answers only a found right row): the hash names a
			// value, not a version of the row, so an answer made for an
			// earlier version with the same value may still be travelling.
			// The row set, deleted (its unsubscribe processed, then the
			// right row deleted: no answer for that) and set to the same
			// value again would take that answer, made while the right row
			// existed, for its own, and keep a result for a missing right
			// row. The answer to this subscription comes from the same
			// task, after the earlier one, and decides. For the same
			// reason a row whose foreign key did not change gets an
			// answer: a delete of the right row may be answered with the
			// old value's hash while this change travels, and that answer
			// is stale when it arrives.
			return send(nfk, fkSubscription[K]{instr: fkSubscribe, hash: fkHashOf(vbuf), pk: r.Key, partition: part})
		}), nil
	}
}

// The subscription store maps (foreign key, key) to the subscription's
// timestamp (8 bytes, big-endian), hash and the partition to answer to (4
// bytes, big-endian; absent in the entries of an older version, which are
// answered to the key's default partition). The foreign key is length
// prefixed (uvarint), so the subscriptions of one foreign key are the keys
// starting with fkSubPrefix of it.
func fkSubPrefix(dst, fkb []byte) []byte {
	return append(binary.AppendUvarint(dst[:0], uint64(len(fkb))), fkb...)
}

// fkSubPrefixEnd is the first key after every key with prefix p (nil when
// p is all 0xff: no bound).
func fkSubPrefixEnd(p []byte) []byte {
	e := bytes.Clone(p)
	for i := len(e) - 1; i >= 0; i-- {
		if e[i] < 0xff {
			e[i]++
			return e[:i+1]
		}
	}
	return nil
}

// fkSubscriptionOp stores or deletes each subscription and answers it with
// the right row of its foreign key, timestamped with the later of the two.
func fkSubscriptionOp[K, KO, VO any](name string, kos serde.Serde[KO], ks serde.Serde[K], right getterSource[KO, VO]) opFunc[KO, fkSubscription[K], K, fkResponse[VO]] {
	return func(env *opEnv, next forwarder[K, fkResponse[VO]]) (receiver[KO, fkSubscription[K]], error) {
		kv, err := env.keyValue(name)
		if err != nil {
			return nil, err
		}
		g, err := right.newGetter(env)
		if err != nil {
			return nil, err
		}
		var key, val []byte
		return receiverFunc[KO, fkSubscription[K]](func(r Record[KO, fkSubscription[K]]) error {
			s := r.Value
			fkb, err := kos.Encode(nil, r.Key)
			if err != nil {
				return errorf(env.node, "encode foreign key: %w", err)
			}
			key = fkSubPrefix(key, fkb)
			if key, err = ks.Encode(key, s.pk); err != nil {
				return errorf(env.node, "encode key: %w", err)
			}
			if s.instr == fkUnsubscribe {
				if err := kv.Delete(key); err != nil {
					return errorf(env.node, "delete subscription: %w", err)
				}
				return nil
			}
			val = append(binary.BigEndian.AppendUint64(val[:0], uint64(r.Timestamp)), s.hash[:]...)
			val = binary.BigEndian.AppendUint32(val, uint32(s.partition))
			if err := kv.Put(key, val); err != nil {
				return errorf(env.node, "put subscription: %w", err)
			}
			ov, ots, found, err := g.get(r.Key)
			if err != nil {
				return errorf(env.node, "look up right table: %w", err)
			}
			if !found && s.instr == fkSubscribeIfFound {
				return nil
			}
			ts := r.Timestamp
			if found {
				ts = max(ts, ots)
			}
			return next.forward(Record[K, fkResponse[VO]]{Key: s.pk, Value: fkResponse[VO]{hash: s.hash, found: found, v: ov, partition: s.partition}, Timestamp: ts, Headers: r.Headers})
		}), nil
	}
}

// fkForeignOp answers every subscription of a changed right row with its
// new value (or "not found" after a delete), timestamped with the change,
// as Kafka Streams' ForeignTableJoinProcessorSupplier does. A delete of a
// right row the table did not hold is answered too ("not found" again):
// Kafka Streams answers the Change(null, null) its KTableSource forwards,
// and a left join writes its unjoined rows once more.
func fkForeignOp[K, KO, VO any](name string, kos serde.Serde[KO], ks serde.Serde[K]) opFunc[KO, change[VO], K, fkResponse[VO]] {
	return func(env *opEnv, next forwarder[K, fkResponse[VO]]) (receiver[KO, change[VO]], error) {
		kv, err := env.keyValue(name)
		if err != nil {
			return nil, err
		}
		type sub struct {
			pk        []byte
			hash      fkHash
			partition int32
		}
		var prefix []byte
		var due []sub
		return receiverFunc[KO, change[VO]](func(r Record[KO, change[VO]]) error {
			c := r.Value
			fkb, err := kos.Encode(nil, r.Key)
			if err != nil {
				return errorf(env.node, "encode foreign key: %w", err)
			}
			prefix = fkSubPrefix(prefix, fkb)
			due = due[:0]
			var bad error
			// Bounded at the prefix's end: the store's read-ahead past the
			// last subscription stays within this foreign key's.
			if err := kv.Range(prefix, fkSubPrefixEnd(prefix), func(k, v []byte) bool {
				if !bytes.HasPrefix(k, prefix) {
					return false
				}
				if n := 8 + len(fkHash{}); len(v) != n && len(v) != n+4 {
					bad = fmt.Errorf("corrupt subscription (%d bytes)", len(v))
					return false
				}
				s := sub{pk: append([]byte(nil), k[len(prefix):]...), partition: -1}
				copy(s.hash[:], v[8:])
				if n := 8 + len(fkHash{}); len(v) == n+4 {
					s.partition = int32(binary.BigEndian.Uint32(v[n:]))
				}
				due = append(due, s)
				return true
			}); err != nil {
				return errorf(env.node, "scan subscriptions: %w", err)
			}
			if bad != nil {
				return errorf(env.node, "scan subscriptions: %w", bad)
			}
			for _, s := range due {
				pk, err := ks.Decode(s.pk)
				if err != nil {
					return errorf(env.node, "decode subscribed key: %w", err)
				}
				out := Record[K, fkResponse[VO]]{Key: pk, Timestamp: r.Timestamp, Headers: r.Headers,
					Value: fkResponse[VO]{hash: s.hash, found: c.hasNew, v: c.newV, partition: s.partition}}
				if err := next.forward(out); err != nil {
					return err
				}
			}
			return nil
		}), nil
	}
}

// fkResolveOp drops stale responses (made for a left value the row no
// longer has) and turns the others into result rows.
func fkResolveOp[K, V, VO any](ls getterSource[K, V], vs serde.Serde[V], left bool) opFunc[K, fkResponse[VO], K, fkJoined[V, VO]] {
	return func(env *opEnv, next forwarder[K, fkJoined[V, VO]]) (receiver[K, fkResponse[VO]], error) {
		g, err := ls.newGetter(env)
		if err != nil {
			return nil, err
		}
		var vbuf []byte
		return receiverFunc[K, fkResponse[VO]](func(r Record[K, fkResponse[VO]]) error {
			lv, _, found, err := g.get(r.Key)
			if err != nil {
				return errorf(env.node, "look up left table: %w", err)
			}
			if !found {
				return nil // deleted meanwhile: UNJOINED deleted the result
			}
			if vbuf, err = vs.Encode(vbuf[:0], lv); err != nil {
				return errorf(env.node, "encode value to hash: %w", err)
			}
			if fkHashOf(vbuf) != r.Value.hash {
				return nil // stale: the row changed since it subscribed
			}
			out := Record[K, fkJoined[V, VO]]{Key: r.Key, Timestamp: r.Timestamp, Headers: r.Headers}
			if r.Value.found || left {
				out.Value = fkJoined[V, VO]{left: lv, right: r.Value.v, found: r.Value.found}
			} else {
				out.Value.del = true
			}
			return next.forward(out)
		}), nil
	}
}

// fkUnjoinedOp decides the left changes that need no right row: a delete
// deletes the result, a row without a foreign key has none (inner) or an
// unjoined one (left).
func fkUnjoinedOp[K, V, VO any](hasFK func(K, V) bool, left bool) opFunc[K, change[V], K, fkJoined[V, VO]] {
	return func(env *opEnv, next forwarder[K, fkJoined[V, VO]]) (receiver[K, change[V]], error) {
		return receiverFunc[K, change[V]](func(r Record[K, change[V]]) error {
			c := r.Value
			out := Record[K, fkJoined[V, VO]]{Key: r.Key, Timestamp: r.Timestamp, Headers: r.Headers}
			switch {
			case !c.hasNew:
				out.Value.del = true
			case !hasFK(r.Key, c.newV):
				if left {
					out.Value.left = c.newV
				} else {
					out.Value.del = true
				}
			default:
				return nil // a round trip decides
			}
			return next.forward(out)
		}), nil
	}
}

// fkResultStore is the result store: a timestamped key-value store
// (tsStore) of t's key to the joined row, encoded by fkJoinedSerde.
type fkResultStore[K, V, VO any] struct {
	name string
	ks   serde.Serde[K]
	js   fkJoinedSerde[V, VO]
}

func (s *fkResultStore[K, V, VO]) open(env *opEnv) (*tsStore[K, fkJoined[V, VO]], error) {
	return tsKV[K, fkJoined[V, VO]](env, s.name, s.ks, s.js)
}

// fkJoinedSerde encodes a joined row after its timestamp in the result
// store: a found flag, the left value's length (uvarint) and encoding,
// then the right value's encoding when found.
type fkJoinedSerde[V, VO any] struct {
	vs serde.Serde[V]
	os serde.Serde[VO]
}

func (s fkJoinedSerde[V, VO]) Encode(dst []byte, j fkJoined[V, VO]) ([]byte, error) {
	lb, err := s.vs.Encode(nil, j.left)
	if err != nil {
		return nil, fmt.Errorf("encode left value: %w", err)
	}
	found := byte(0)
	if j.found {
		found = 1
	}
	dst = append(binary.AppendUvarint(append(dst, found), uint64(len(lb))), lb...)
	if j.found {
		if dst, err = s.os.Encode(dst, j.right); err != nil {
			return nil, fmt.Errorf("encode right value: %w", err)
		}
	}
	return dst, nil
}

func (s fkJoinedSerde[V, VO]) Decode(b []byte) (j fkJoined[V, VO], err error) {
	if len(b) < 2 {
		return j, fmt.Errorf("corrupt joined row (%d bytes after the timestamp)", len(b))
	}
	j.found = b[0] == 1
	n, w := binary.Uvarint(b[1:])
	if w <= 0 || uint64(len(b)-1-w) < n {
		return j, fmt.Errorf("corrupt joined row: left value length")
	}
	if j.left, err = s.vs.Decode(b[1+w : 1+w+int(n)]); err != nil {
		return j, fmt.Errorf("decode left value: %w", err)
	}
	if j.found {
		if j.right, err = s.os.Decode(b[1+w+int(n):]); err != nil {
			return j, fmt.Errorf("decode right value: %w", err)
		}
	}
	return j, nil
}

// fkResultOp applies result rows to the result store and forwards them as
// table changes with the old row's value; deleting a row that does not
// exist forwards nothing.
func fkResultOp[K, V, VO, VR any](rs *fkResultStore[K, V, VO], joiner func(K, V, VO, bool) VR) opFunc[K, fkJoined[V, VO], K, change[VR]] {
	return func(env *opEnv, next forwarder[K, change[VR]]) (receiver[K, fkJoined[V, VO]], error) {
		st, err := rs.open(env)
		if err != nil {
			return nil, err
		}
		return receiverFunc[K, fkJoined[V, VO]](func(r Record[K, fkJoined[V, VO]]) error {
			old, _, had, err := st.get(r.Key)
			if err != nil {
				return err
			}
			var c change[VR]
			if had {
				c.oldV, c.hasOld = joiner(r.Key, old.left, old.right, old.found), true
			}
			if r.Value.del {
				if !had {
					return nil
				}
				err = st.del(r.Key)
			} else {
				j := r.Value
				c.newV, c.hasNew = joiner(r.Key, j.left, j.right, j.found), true
				err = st.put(r.Key, r.Timestamp, j)
			}
			if err != nil {
				return err
			}
			return next.forward(Record[K, change[VR]]{Key: r.Key, Value: c, Timestamp: r.Timestamp, Headers: r.Headers})
		}), nil
	}
}
