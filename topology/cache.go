package topology

import (
	"fmt"
	"slices"

	"github.com/tidemark-streams/tidemark/serde"
)

// WithRecordCache holds back the updates of a key-value aggregation
// (Count, Reduce, Aggregate of a grouped stream or grouped table) until the
// task commits, and forwards only each key's latest: Kafka Streams' record
// cache. Under exactly-once the outputs of a transaction become visible
// together at its commit, so the updates it drops were never visible to a
// read_committed consumer anyway; what changes is that downstream
// operators and the output topic see one update per key and commit
// instead of one per record. With hot keys that is most of the output, its
// produce cost and the broker's work.
//
//	views.GroupByKey().Count(topology.Named("views"), topology.WithRecordCache(10_000))
//
// keys bounds the keys held per task: a new key beyond it forwards the
// oldest held one early. The store itself is written at once (queries and
// joins see every update); only forwarding waits. A forwarded update
// carries the old value its key had when it was last forwarded and the
// latest new one, so aggregations of grouped tables downstream subtract
// and add correctly, and its record context (timestamp, headers, offset,
// tenant) is that of the record that made it. Held updates are forwarded
// in the order their keys were first updated. An aborted transaction
// drops them with the rest of its work.
//
// The runtime forwards held updates before every commit (Task.Flush); the
// test driver (processor/tidemarktest) after every input, as if each
// committed. It applies to Count, Reduce and Aggregate of grouped streams
// and grouped tables and to a cogroup's Aggregate (not windowed); given to
// any other operator, or with keys < 1, it is a Build error.
func WithRecordCache(keys int) StoreOption {
	return storeOpt{slidingOpt{windowOpt{func(c *opConfig) { c.cacheKeys = keys; c.hasCache = true }}}}
}

// checkCache fails the build when WithRecordCache was given to an operator
// that does not honour it, or with no room.
func (b *Builder) checkCache(n *node, cfg *opConfig) {
	switch {
	case !cfg.hasCache:
	case !cfg.cacheAllowed:
		b.fail(errorf(n.name, "%w: WithRecordCache applies to Count, Reduce and Aggregate of grouped streams and tables only, not to %s", ErrInvalidTopology, n.op))
	case cfg.cacheKeys < 1:
		b.fail(errorf(n.name, "%w: WithRecordCache(%d): a cache holds at least one key", ErrInvalidTopology, cfg.cacheKeys))
	}
}

// RecordContext is what an operator needs to forward a record later as if
// from the record that made it: the input record's location and Kafka
// timestamp, and its tenant. InRecord is false for records made by a
// punctuator.
type RecordContext struct {
	Meta           RecordMeta
	InputTimestamp int64
	Tenant         string
	InRecord       bool
}

// ContextKeeper is an optional extension of TaskEnv for operators that hold
// records back (WithRecordCache). Hold is called once per update held
// back: the environment counts it (the runtime's commit controller must
// know an output is waiting, though nothing reached the Collector yet) and
// returns the current record context. WithRecordContext runs fn with a
// saved context in place and restores the current one after. Without it,
// operators forward at once.
type ContextKeeper interface {
	Hold() RecordContext
	WithRecordContext(c RecordContext, fn func() error) error
}

// flusher is implemented by operator instances that hold records back;
// Instance.Flush forwards what they hold.
type flusher interface{ flush() error }

// Flush forwards every record the instance's operators hold back, upstream
// operators first, so what one forwards into a downstream cache is
// forwarded by it in the same call. The task calls it before each commit.
func (i *Instance) Flush() error {
	for _, f := range i.flushers {
		if err := f.flush(); err != nil {
			return err
		}
	}
	return nil
}

// cachedReceiver is an operator instance whose forwarding goes through a
// record cache.
type cachedReceiver[K, V any] struct {
	receiver[K, V]
	flusher
}

// recordCache holds the latest change of each key until flush, or until
// keys newer ones push it out. It is a receiver: the operator forwards into
// it instead of its children.
type recordCache[K, V any] struct {
	env   *opEnv
	ck    ContextKeeper
	keyOf func(K) ([]byte, error)
	down  forwarder[K, change[V]]
	max   int
	held  map[string]*heldChange[K, V]
	order []string // keys in first-update order; evicted ones leave the head
}

type heldChange[K, V any] struct {
	rec Record[K, change[V]]
	ctx RecordContext
}

// withRecordCache returns the forwarder an operator with cfg should use and
// the flusher to expose, or next itself and nil without a cache (or when
// the environment cannot restore record contexts).
func withRecordCache[K, V any](env *opEnv, cfg *opConfig, keyOf func(K) ([]byte, error), next forwarder[K, change[V]]) (forwarder[K, change[V]], flusher) {
	ck, ok := env.TaskEnv.(ContextKeeper)
	if !cfg.hasCache || !ok {
		return next, nil
	}
	c := &recordCache[K, V]{env: env, ck: ck, keyOf: keyOf, down: next, max: cfg.cacheKeys, held: map[string]*heldChange[K, V]{}}
	return forwarder[K, change[V]]{one: c}, c
}

func (c *recordCache[K, V]) process(rec Record[K, change[V]]) error {
	kb, err := c.keyOf(rec.Key)
	if err != nil {
		return err
	}
	if h, ok := c.held[string(kb)]; ok {
		// The oldest old value stays: it is what downstream last saw.
		rec.Value.oldV, rec.Value.hasOld = h.rec.Value.oldV, h.rec.Value.hasOld
		h.rec, h.ctx = held(rec), c.ck.Hold()
		return nil
	}
	if len(c.held) >= c.max {
		if err := c.evict(); err != nil {
			return err
		}
	}
	key := string(kb)
	c.held[key] = &heldChange[K, V]{rec: held(rec), ctx: c.ck.Hold()}
	c.order = append(c.order, key)
	return nil
}

// held copies what the caller may reuse after process returns.
func held[K, V any](rec Record[K, V]) Record[K, V] {
	if rec.Headers != nil {
		hs := make([]Header, len(rec.Headers))
		for i, h := range rec.Headers {
			hs[i] = Header{Key: h.Key, Value: slices.Clone(h.Value)}
		}
		rec.Headers = hs
	}
	return rec
}

// evict forwards the key held longest.
func (c *recordCache[K, V]) evict() error {
	for len(c.order) > 0 {
		key := c.order[0]
		c.order = c.order[1:]
		if h, ok := c.held[key]; ok {
			delete(c.held, key)
			return c.forward(h)
		}
	}
	return nil
}

func (c *recordCache[K, V]) flush() error {
	order := c.order
	c.order = nil
	for i, key := range order {
		h, ok := c.held[key]
		if !ok {
			continue
		}
		delete(c.held, key)
		if err := c.forward(h); err != nil {
			// The rest stay held: an error fails the task, whose
			// transaction aborts and takes the cache with it.
			c.order = append(c.order, order[i+1:]...)
			return err
		}
	}
	return nil
}

// forward sends a held change on in the context of the record that made
// it. A key created and deleted while held changed nothing downstream saw.
func (c *recordCache[K, V]) forward(h *heldChange[K, V]) error {
	if !h.rec.Value.hasNew && !h.rec.Value.hasOld {
		return nil
	}
	err := c.ck.WithRecordContext(h.ctx, func() error { return c.down.forward(h.rec) })
	if err != nil {
		return fmt.Errorf("operator %q: forward cached update: %w", c.env.node, err)
	}
	return nil
}

// cacheKeyOf encodes keys for a record cache with the operator's key serde.
func cacheKeyOf[K any](ks serde.Serde[K], node string) func(K) ([]byte, error) {
	var buf []byte
	return func(k K) ([]byte, error) {
		b, err := ks.Encode(buf[:0], k)
		if err != nil {
			return nil, fmt.Errorf("operator %q: record cache: encode key: %w", node, err)
		}
		buf = b
		return b, nil
	}
}
