package schemas

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/tidemark-streams/tidemark/serde"
)

// Registry caches writer schemas fetched from a Confluent Schema Registry by
// id. Schema ids are immutable in a registry, so a fetched schema is cached
// forever; unknown ids are not cached, because the schema may be registered
// later (a producer racing its registration). One Registry can back any
// number of serdes and is safe for concurrent use.
type Registry struct {
	cl *sr.Client

	mu      sync.Mutex
	schemas map[int]sr.Schema
}

// NewRegistry wraps a franz-go registry client.
func NewRegistry(cl *sr.Client) *Registry {
	return &Registry{cl: cl, schemas: map[int]sr.Schema{}}
}

// Client is the franz-go client, for serdes of other types (serde.WithRegistry).
func (r *Registry) Client() *sr.Client { return r.cl }

// SchemaByID returns the schema registered under id. A missing id fails with
// ErrUnknownSchemaID (and serde.ErrDecode); any other failure with
// ErrRegistry.
func (r *Registry) SchemaByID(ctx context.Context, id int) (sr.Schema, error) {
	r.mu.Lock()
	s, ok := r.schemas[id]
	r.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := r.cl.SchemaByID(ctx, id)
	if err != nil {
		if serde.SchemaNotFound(err) {
			return sr.Schema{}, fmt.Errorf("%w: %w: %d", serde.ErrDecode, ErrUnknownSchemaID, id)
		}
		return sr.Schema{}, fmt.Errorf("%w: fetch schema id %d: %w", ErrRegistry, id, err)
	}
	r.mu.Lock()
	r.schemas[id] = s
	r.mu.Unlock()
	return s, nil
}

// register registers text under subject and returns its id; registering an
// identical schema again returns the existing id.
func (r *Registry) register(ctx context.Context, subject, text string) (int, error) {
	s := sr.Schema{Schema: text, Type: sr.TypeAvro}
	id, err := r.cl.RegisterSchema(ctx, subject, s, -1, -1)
	if err != nil {
		return 0, fmt.Errorf("%w: register schema under subject %q: %w", ErrRegistry, subject, err)
	}
	r.mu.Lock()
	r.schemas[id] = s
	r.mu.Unlock()
	return id, nil
}

// DefaultFetchTimeout bounds the registry fetch that Decode makes for a
// schema id it has not seen.
const DefaultFetchTimeout = 10 * time.Second

// RegistrySerde reads and writes the Confluent wire format: magic byte 0, the
// big-endian 4-byte schema id, then the Avro payload. It encodes with the
// embedded schema (registered under a subject when the serde is built) and
// decodes every record with its writer's schema, resolved to the embedded
// one.
type RegistrySerde[T Event] struct {
	spec    *Spec[T]
	reg     *Registry
	id      int
	timeout time.Duration
	header  sr.ConfluentHeader

	mu  sync.RWMutex
	res map[int]resolved
}

// resolved is the outcome of resolving one writer schema id. Failures are
// kept too: ids are immutable, so a wrong-type or incompatible writer stays
// so, and a topic full of them must not recompile the schema per record.
type resolved struct {
	res *resolution
	err error
}

// RegistryOpt configures a RegistrySerde.
type RegistryOpt func(*registryConfig)

type registryConfig struct{ timeout time.Duration }

// WithFetchTimeout sets how long Decode waits for the registry when it meets
// a new schema id (default DefaultFetchTimeout). DecodeContext uses the
// caller's context instead.
func WithFetchTimeout(d time.Duration) RegistryOpt {
	return func(c *registryConfig) { c.timeout = d }
}

// Registry registers the embedded schema under subject (for a topic's values
// the Confluent convention is "<topic>-value") and returns a serde that
// encodes with its id.
func (s *Spec[T]) Registry(ctx context.Context, reg *Registry, subject string, opts ...RegistryOpt) (*RegistrySerde[T], error) {
	cfg := registryConfig{timeout: DefaultFetchTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.timeout <= 0 {
		return nil, fmt.Errorf("schemas: fetch timeout is %v, must be positive", cfg.timeout)
	}
	id, err := reg.register(ctx, subject, s.text)
	if err != nil {
		return nil, fmt.Errorf("schemas: %s serde: %w", s.name, err)
	}
	return &RegistrySerde[T]{
		spec:    s,
		reg:     reg,
		id:      id,
		timeout: cfg.timeout,
		res:     map[int]resolved{id: {res: s.self}},
	}, nil
}

// SchemaID is the id the serde encodes with.
func (r *RegistrySerde[T]) SchemaID() int { return r.id }

func (r *RegistrySerde[T]) Encode(dst []byte, v T) ([]byte, error) {
	if err := v.Validate(); err != nil {
		return dst, fmt.Errorf("schemas: encode: %w", err)
	}
	out, _ := r.header.AppendEncode(dst, r.id, nil) // never fails
	return r.spec.appendBin(out, v), nil
}

// Decode implements serde.Serde. The Serde contract has no context, so a
// registry fetch for an unseen schema id is bounded by the fetch timeout;
// callers that have a context should use DecodeContext.
func (r *RegistrySerde[T]) Decode(b []byte) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	return r.DecodeContext(ctx, b)
}

// DecodeContext decodes one record, fetching its writer schema from the
// registry if this serde has not seen the id yet.
func (r *RegistrySerde[T]) DecodeContext(ctx context.Context, b []byte) (T, error) {
	var zero T
	id, payload, err := serde.SplitWireFormat(b)
	if err != nil {
		return zero, fmt.Errorf("schemas: %s: %w", zero.Type(), err)
	}
	res, err := r.resolution(ctx, id)
	if err != nil {
		return zero, err
	}
	return r.spec.decodeWith(res, payload)
}

func (r *RegistrySerde[T]) resolution(ctx context.Context, id int) (*resolution, error) {
	r.mu.RLock()
	got, ok := r.res[id]
	r.mu.RUnlock()
	if ok {
		return got.res, got.err
	}
	var zero T
	s, err := r.reg.SchemaByID(ctx, id)
	if err != nil {
		// Not cached here: the id may be registered later, and registry
		// outages pass.
		return nil, fmt.Errorf("schemas: decode %s: %w", zero.Type(), err)
	}
	if s.Type != sr.TypeAvro {
		got.err = fmt.Errorf("%w: %w", serde.ErrDecode, &WrongEventTypeError{Want: r.spec.name, Got: fmt.Sprintf("a %v schema (id %d)", s.Type, id)})
	} else if len(s.References) > 0 {
		// Not judged: refused, never skipped or dead-lettered.
		got.err = fmt.Errorf("%w: decode %s: schema id %d: %w (%d references)", ErrRegistry, zero.Type(), id, serde.ErrSchemaReferences, len(s.References))
	} else if got.res, err = r.spec.resolve(s.Schema); err != nil {
		got.err = fmt.Errorf("%w: schema id %d: %w", serde.ErrDecode, id, err)
	}
	r.mu.Lock()
	r.res[id] = got
	r.mu.Unlock()
	return got.res, got.err
}
