package topology

import (
	"fmt"
	"slices"
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

// Processor is a user-defined operator (the Processor API). One instance
// exists per task: the supplier given to Stream.Process is called once per
// task (and twice by Process itself, to check that it returns a new
// instance each time), so instances need no locking and may keep
// per-partition state in fields (but durable state belongs in stores).
type Processor[KIn, VIn, KOut, VOut any] interface {
	// Init is called once before the first record; keep ctx to forward,
	// read stores and schedule punctuators.
	Init(ctx ProcessorContext[KOut, VOut]) error
	// Process handles one record. Returning an error fails the task.
	Process(rec Record[KIn, VIn]) error
	// Close releases resources when the task closes.
	Close() error
}

// ProcessorContext is a user processor's view of its task.
type ProcessorContext[K, V any] interface {
	// Forward sends rec to every downstream operator and returns the first
	// error they return.
	Forward(rec Record[K, V]) error
	// Store returns a store connected with WithStores (assert it to
	// store.KeyValue, store.Window or store.Session, or wrap it with the
	// typed wrappers in package store).
	Store(name string) (store.Store, error)
	// Schedule calls fn every interval of stream time or wall-clock time.
	Schedule(interval time.Duration, typ PunctuationType, fn Punctuator) (Cancellable, error)
	// StreamTime is the task's stream time, -1 before the first record.
	StreamTime() int64
	// WallClock is the runtime's current time in ms.
	WallClock() int64
	// TaskID names the task running the processor.
	TaskID() TaskID
	// RecordMeta locates the current input record; ok is false during
	// punctuation.
	RecordMeta() (meta RecordMeta, ok bool)
}

// Process runs a user processor on each record. The result is marked for
// repartitioning, since the processor may change keys. WithStores connects
// stores declared with Builder.AddStore. supplier must return a new
// instance on every call: Process calls it twice and fails Build when it
// returns one instance both times, as Kafka Streams does.
func (s Stream[K, V]) Process[K2, V2 any](supplier func() Processor[K, V, K2, V2], opts ...ProcessOption) Stream[K2, V2] {
	cfg := newOpConfig(opts)
	n := s.b.addNode(KindProcessor, "PROCESSOR", []*node{s.n}, cfg, nil)
	for _, name := range cfg.stores {
		s.b.connect(n, name)
	}
	if supplier == nil {
		s.b.fail(errorf(n.name, "%w: nil processor supplier", ErrInvalidTopology))
	} else if suppliesOneInstance(supplier) {
		s.b.fail(errorf(n.name, "%w: the processor supplier returned the same instance twice: it must return a new one on every call (one per task)", ErrInvalidTopology))
	}
	n.impl = &userOp[K, V, K2, V2]{supplier: supplier, stores: slices.Clone(cfg.stores)}
	return Stream[K2, V2]{b: s.b, n: n, ks: serdeAs[K2](s.ks), vs: serdeAs[V2](s.vs), rekeyed: true}
}

type userOp[KIn, VIn, KOut, VOut any] struct {
	supplier func() Processor[KIn, VIn, KOut, VOut]
	stores   []string
}

func (o *userOp[KIn, VIn, KOut, VOut]) instantiate(env *opEnv, children []any) (any, error) {
	next, err := forwarderOf[KOut, VOut](env, children)
	if err != nil {
		return nil, err
	}
	p := o.supplier()
	if p == nil {
		return nil, errorf(env.node, "%w: processor supplier returned nil", ErrInvalidTopology)
	}
	return &userInst[KIn, VIn, KOut, VOut]{
		p:   p,
		ctx: &procCtx[KOut, VOut]{env: env, next: next, stores: o.stores},
	}, nil
}

type userInst[KIn, VIn, KOut, VOut any] struct {
	p   Processor[KIn, VIn, KOut, VOut]
	ctx *procCtx[KOut, VOut]
}

func (u *userInst[KIn, VIn, KOut, VOut]) init() error  { return u.p.Init(u.ctx) }
func (u *userInst[KIn, VIn, KOut, VOut]) close() error { return u.p.Close() }
func (u *userInst[KIn, VIn, KOut, VOut]) process(r Record[KIn, VIn]) error {
	if err := u.p.Process(r); err != nil {
		return errorf(u.ctx.env.node, "%w", err)
	}
	return nil
}

type procCtx[K, V any] struct {
	env    *opEnv
	next   forwarder[K, V]
	stores []string
}

func (c *procCtx[K, V]) Forward(rec Record[K, V]) error { return c.next.forward(rec) }

func (c *procCtx[K, V]) Store(name string) (store.Store, error) {
	if !slices.Contains(c.stores, name) {
		return nil, fmt.Errorf("operator %q: %w: %q is not connected (use WithStores)", c.env.node, ErrUnknownStore, name)
	}
	return c.env.store(name)
}

func (c *procCtx[K, V]) Schedule(interval time.Duration, typ PunctuationType, fn Punctuator) (Cancellable, error) {
	if interval < time.Millisecond {
		return nil, fmt.Errorf("operator %q: punctuation interval %v is below 1ms", c.env.node, interval)
	}
	return c.env.Schedule(interval, typ, fn)
}

func (c *procCtx[K, V]) StreamTime() int64              { return c.env.StreamTime() }
func (c *procCtx[K, V]) WallClock() int64               { return c.env.WallClock() }
func (c *procCtx[K, V]) TaskID() TaskID                 { return c.env.TaskEnv.TaskID() }
func (c *procCtx[K, V]) RecordMeta() (RecordMeta, bool) { return c.env.Meta() }
