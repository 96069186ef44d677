package serde

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkedin/goavro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"golang.org/x/sync/singleflight"
)

// Errors of the Avro serdes besides ErrDecode.
var (
	// ErrEncode is wrapped by every failure of Avro[T].Encode: the value
	// does not fit the schema (an enum symbol the schema lacks, a number
	// that overflows an Avro int, a nil pointer for a non-optional field),
	// or its schema could not be registered or looked up.
	ErrEncode = errors.New("serde: encode")
	// ErrRegistry is wrapped when a Schema Registry call fails for any
	// reason but an unknown schema id: the registry cannot be reached,
	// times out, answers with a server error, or refuses (authorisation,
	// an incompatible or unregistered schema). The record has not been
	// judged, so a decode that fails with it deliberately does not wrap
	// ErrDecode, and sources and the processor fail the task with it
	// rather than skip or dead-letter the record.
	ErrRegistry = errors.New("serde: schema registry call failed")
	// ErrUnknownSchemaID: a record names a schema id the registry does
	// not have. Decode wraps it with ErrDecode.
	ErrUnknownSchemaID = errors.New("unknown schema id")
	// ErrWireFormat: a record is shorter than the Confluent header or does
	// not start with magic byte 0. Decode wraps it with ErrDecode.
	ErrWireFormat = errors.New("bad schema registry wire format")
	// ErrIncompatibleSchema: a record's writer schema cannot be resolved
	// to the reader schema (a reader field without default that the
	// writer lacks, a field whose type changed, another record type).
	// Decode wraps it with ErrDecode.
	ErrIncompatibleSchema = errors.New("incompatible writer schema")
	// ErrSchemaReferences: a record's writer schema names types from other
	// subjects (Confluent schema references), which the serde does not
	// resolve. The record was not judged, so Decode wraps it with
	// ErrRegistry, not ErrDecode: it is never skipped or dead-lettered,
	// and RegistryUnavailable says no retry helps.
	ErrSchemaReferences = errors.New("writer schema has schema references, which are not supported")
	// ErrSchemaNotRegistered: WithAutoRegister(false) and the subject has
	// no version with the serde's schema. Encode wraps it with ErrEncode.
	ErrSchemaNotRegistered = errors.New("schema not registered under subject")
)

// DefaultRegistryTimeout bounds each Schema Registry call an Avro serde
// makes (registering or looking up its schema, fetching a writer schema).
// The Serde interface has no context, and a stream task must not hang on a
// registry that does not answer.
const DefaultRegistryTimeout = 10 * time.Second

// AvroOption configures Avro.
type AvroOption func(*avroConfig)

type avroConfig struct {
	useRegistry  bool
	registry     *sr.Client
	subject      string
	autoRegister bool
	timeout      time.Duration
}

// WithRegistry makes the serde read and write the Confluent wire format:
// magic byte 0, the 4-byte big-endian schema id, then the Avro payload
// (for the primitive schema "bytes", the bytes alone, without Avro's length
// prefix, as Confluent's serializers write and read them). Encode registers the schema under subject (by Confluent convention
// "<topic>-value" or "<topic>-key") on first use, or looks its id up with
// WithAutoRegister(false), and caches the id once that succeeds. Decode
// looks each record's writer schema up by id and resolves it to the serde's
// schema (the reader schema), so records written before or after a
// compatible schema change decode: fields added with defaults, removed
// fields, promoted numbers. Writer schemas are cached forever (registry ids
// are immutable); ids the registry does not know are not cached, because a
// producer may register them in a moment.
func WithRegistry(cl *sr.Client, subject string) AvroOption {
	return func(c *avroConfig) { c.useRegistry, c.registry, c.subject = true, cl, subject }
}

// WithAutoRegister sets whether Encode registers the schema under the
// subject (true, the default) or only looks it up (false), for deployments
// where schemas are registered by a pipeline and clients may not. A lookup
// of a schema the subject does not hold fails with ErrSchemaNotRegistered.
func WithAutoRegister(on bool) AvroOption {
	return func(c *avroConfig) { c.autoRegister = on }
}

// WithRegistryTimeout bounds each registry call (default
// DefaultRegistryTimeout).
func WithRegistryTimeout(d time.Duration) AvroOption {
	return func(c *avroConfig) { c.timeout = d }
}

// Avro returns a serde for T encoded with the Avro schema (JSON text). T
// maps to the schema by `avro:"field_name"` struct tags (falling back to
// `json` tags, then the lower-cased field name); nested records (structs),
// arrays (slices), maps (map[string]V), unions with null (pointer fields),
// enums (string types), fixed ([N]byte), bytes ([]byte) and timestamp-millis
// or -micros (time.Time) are supported. Schema fields without a struct
// field are written with their default (and must have one); struct fields
// without a schema field are ignored. The binding is checked here, so a
// struct that does not fit the schema fails now rather than per record.
//
// Schema fields are matched to struct fields by name only; embedded
// structs are not flattened. Unions other than null plus one type are not
// supported (there is no Go type to bind them to), nor are Avro's decimal,
// uuid and date logical types beyond their underlying type.
//
// Without WithRegistry the serde reads and writes plain Avro binary with
// the schema: it can only read what it wrote, so a topic or store whose
// schema may change should use WithRegistry, which frames every record
// with its writer's schema id and resolves old writers (see WithRegistry).
// Every decoding failure wraps ErrDecode and every encoding failure
// ErrEncode; payloads are checked against the writer schema before they
// are decoded, so a malformed record cannot make the decoder allocate more
// than its size suggests. The serde is safe for concurrent use.
func Avro[T any](schema string, opts ...AvroOption) (Serde[T], error) {
	cfg := avroConfig{autoRegister: true, timeout: DefaultRegistryTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	gt := reflect.TypeFor[T]()
	if cfg.useRegistry && (cfg.registry == nil || cfg.subject == "") {
		return nil, fmt.Errorf("serde: avro %v: WithRegistry needs a client and a subject", gt)
	}
	if cfg.timeout <= 0 {
		return nil, fmt.Errorf("serde: avro %v: registry timeout %v must be positive", gt, cfg.timeout)
	}
	codec, err := goavro.NewCodec(schema)
	if err != nil {
		return nil, fmt.Errorf("serde: avro %v: compile schema: %w", gt, err)
	}
	tree, err := parseAvroSchema(schema)
	if err != nil {
		return nil, fmt.Errorf("serde: avro %v: parse schema: %w", gt, err)
	}
	b := newBinder()
	enc, err := b.encoder(tree, gt, rootPath(gt))
	if err != nil {
		return nil, fmt.Errorf("serde: avro: bind %v to the schema: %w", gt, err)
	}
	dec, err := b.decoder(tree, tree, gt, rootPath(gt))
	if err != nil {
		return nil, fmt.Errorf("serde: avro: bind %v to the schema: %w", gt, err)
	}
	self := &avroWriter{tree: tree, codec: codec, dec: dec}
	s := &avroSerde[T]{cfg: cfg, schema: schema, codec: codec, tree: tree, enc: enc, self: self, binder: b}
	if !cfg.useRegistry {
		return plainAvro[T]{s}, nil
	}
	self.raw = rawBytesSchema(tree)
	s.writers = map[int]*avroWriter{}
	return s, nil
}

// rootPath names the value in binding and value errors, which append the
// field path: "Order.lines[].sku".
func rootPath(gt reflect.Type) string {
	if gt.Name() != "" {
		return gt.Name()
	}
	return gt.String()
}

// avroWriter decodes records written with one writer schema into T.
type avroWriter struct {
	tree  *avroType     // the writer's, to check payloads before goavro reads them
	codec *goavro.Codec // the writer's
	dec   avroDecoder   // resolves the writer's native form into T
	err   error         // the writer schema does not resolve; kept, ids are immutable
	// raw: the writer schema is "bytes", whose value Confluent's serdes
	// frame as the bytes themselves, without Avro's length (rawBytesSchema).
	raw bool
}

type avroSerde[T any] struct {
	cfg    avroConfig
	schema string
	codec  *goavro.Codec
	tree   *avroType
	enc    avroEncoder
	self   *avroWriter

	idMu sync.Mutex   // serialises registering; Encode reads id without it
	id   atomic.Int64 // 0 until registered or looked up; registry ids start at 1

	mu      sync.RWMutex
	binder  *binder // guarded by mu: resolving a writer adds to its memo
	writers map[int]*avroWriter
	fetch   singleflight.Group
}

// plainAvro is the serde without a registry: plain Avro binary.
type plainAvro[T any] struct{ s *avroSerde[T] }

func (p plainAvro[T]) Encode(dst []byte, v T) ([]byte, error) { return p.s.appendAvro(dst, v) }
func (p plainAvro[T]) Decode(b []byte) (T, error)             { return p.s.decodeWith(p.s.self, b) }

func (s *avroSerde[T]) appendAvro(dst []byte, v T) ([]byte, error) {
	n, err := s.enc(reflect.ValueOf(&v).Elem())
	if err != nil {
		return dst, fmt.Errorf("%w: avro %T: %w", ErrEncode, v, err)
	}
	out, err := s.codec.BinaryFromNative(dst, n)
	if err != nil {
		return dst, fmt.Errorf("%w: avro %T: %w", ErrEncode, v, err)
	}
	return out, nil
}

func (s *avroSerde[T]) decodeWith(w *avroWriter, b []byte) (T, error) {
	var v T
	if w.err != nil {
		return v, w.err
	}
	if w.raw {
		if err := w.dec(append([]byte{}, b...), reflect.ValueOf(&v).Elem()); err != nil {
			var zero T
			return zero, fmt.Errorf("%w: avro %T: %w", ErrDecode, v, err)
		}
		return v, nil
	}
	if err := checkAvroBinary(w.tree, b); err != nil {
		return v, fmt.Errorf("%w: avro %T: %w", ErrDecode, v, err)
	}
	n, rest, err := w.codec.NativeFromBinary(b)
	if err != nil {
		return v, fmt.Errorf("%w: avro %T: %w", ErrDecode, v, err)
	}
	if len(rest) > 0 {
		return v, fmt.Errorf("%w: avro %T: %d trailing bytes after the value", ErrDecode, v, len(rest))
	}
	if err := w.dec(n, reflect.ValueOf(&v).Elem()); err != nil {
		var zero T
		return zero, fmt.Errorf("%w: avro %T: %w", ErrDecode, v, err)
	}
	return v, nil
}

// Encode writes the Confluent header with the serde's schema id, then the
// Avro payload. The first Encode registers (or looks up) the schema; until
// that succeeds every Encode tries again.
func (s *avroSerde[T]) Encode(dst []byte, v T) ([]byte, error) {
	id, err := s.schemaID()
	if err != nil {
		return dst, err
	}
	var h sr.ConfluentHeader
	out, err := h.AppendEncode(dst, id, nil)
	if err != nil {
		return dst, fmt.Errorf("%w: avro %T: header: %w", ErrEncode, v, err)
	}
	if s.self.raw {
		out, err = s.appendRaw(out, v)
	} else {
		out, err = s.appendAvro(out, v)
	}
	if err != nil {
		return dst, err
	}
	return out, nil
}

// rawBytesSchema reports whether t is the primitive "bytes" schema, whose
// values Confluent's KafkaAvroSerializer writes after the wire-format header
// as they are, without Avro's length prefix, and its deserializer reads
// back as everything after the header (AbstractKafkaAvroSerializer,
// AbstractKafkaAvroDeserializer): Avro[[]byte] with a registry does the
// same, so either side reads the other's values.
func rawBytesSchema(t *avroType) bool { return t.kind == "bytes" }

// appendRaw appends v, bound to the "bytes" schema, as its bytes alone.
func (s *avroSerde[T]) appendRaw(dst []byte, v T) ([]byte, error) {
	n, err := s.enc(reflect.ValueOf(&v).Elem())
	if err != nil {
		return dst, fmt.Errorf("%w: avro %T: %w", ErrEncode, v, err)
	}
	b, ok := n.([]byte)
	if !ok {
		return dst, fmt.Errorf("%w: avro %T: bytes schema encoded as %T", ErrEncode, v, n)
	}
	return append(dst, b...), nil
}

func (s *avroSerde[T]) schemaID() (int, error) {
	if id := s.id.Load(); id != 0 {
		return int(id), nil
	}
	s.idMu.Lock()
	defer s.idMu.Unlock()
	if id := s.id.Load(); id != 0 {
		return int(id), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.timeout)
	defer cancel()
	schema := sr.Schema{Schema: s.schema, Type: sr.TypeAvro}
	var id int
	var err error
	if s.cfg.autoRegister {
		id, err = s.cfg.registry.RegisterSchema(ctx, s.cfg.subject, schema, -1, -1)
	} else {
		var ss sr.SubjectSchema
		ss, err = s.cfg.registry.LookupSchema(ctx, s.cfg.subject, schema)
		id = ss.ID
		if registryNotFound(err) {
			// The registry's own answer, a refusal: the error keeps
			// its response, so RegistryUnavailable says no retry
			// helps. A bare 404 (a proxy) is an outage, below.
			return 0, fmt.Errorf("%w: %w: %w: subject %q: %w", ErrEncode, ErrRegistry, ErrSchemaNotRegistered, s.cfg.subject, err)
		}
	}
	if err != nil {
		var zero T
		return 0, fmt.Errorf("%w: avro %T: subject %q: %w", ErrEncode, zero, s.cfg.subject, registryErr(err))
	}
	s.mu.Lock()
	s.writers[id] = s.self
	s.mu.Unlock()
	s.id.Store(int64(id))
	return id, nil
}

// SchemaNotFound reports whether a registry call failed because the
// registry has no such schema: a 404 carrying Confluent's error code 40403.
// Any other 404 (a wrong base URL, a proxy in front of a registry being
// redeployed) says nothing about the record, so it is a registry failure,
// not an unknown schema id that would skip or dead-letter good records.
func SchemaNotFound(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound && re.ErrorCode == sr.ErrSchemaNotFound.Code
}

// registryNotFound reports whether err is the registry's own "not found"
// answer: a 404 carrying one of its 404xx error codes (40401 subject,
// 40402 version, 40403 schema not found), not a 404 from something else.
func registryNotFound(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound && re.ErrorCode/100 == http.StatusNotFound
}

// RegistryUnavailable reports whether err is a registry call that failed
// for want of an answer, which a retry may get: the registry unreachable or
// timed out, a 5xx, 408 or 429, or a 404 that is not the registry's own
// not-found (a proxy in front of a registry being redeployed). A refusal
// (401, 403, 409, 422: credentials, an incompatible schema; the registry's
// own 404, ErrSchemaNotRegistered) is not: retrying it changes nothing.
func RegistryUnavailable(err error) bool {
	if !errors.Is(err, ErrRegistry) || errors.Is(err, ErrSchemaReferences) {
		return false
	}
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		return true
	}
	switch re.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true
	case http.StatusNotFound:
		return !registryNotFound(err)
	}
	return re.StatusCode >= 500
}

// registryErr wraps a failed registry call in ErrRegistry, saying whether
// the registry refused (4xx: an invalid or incompatible schema, no
// authorisation) or could not answer (network, timeout, 5xx, and the 4xx
// that RegistryUnavailable retries: 408, 429, a bare 404).
func registryErr(err error) error {
	wrapped := fmt.Errorf("%w: %w", ErrRegistry, err)
	var re *sr.ResponseError
	if errors.As(err, &re) && re.StatusCode >= 400 && re.StatusCode < 500 && !RegistryUnavailable(wrapped) {
		return fmt.Errorf("%w: refused: %w", ErrRegistry, err)
	}
	return wrapped
}

// Decode reads the Confluent header, fetches the writer schema by id unless
// it is cached, and decodes the payload resolved to the reader schema.
func (s *avroSerde[T]) Decode(b []byte) (T, error) {
	var zero T
	id, payload, err := SplitWireFormat(b)
	if err != nil {
		return zero, fmt.Errorf("avro %T: %w", zero, err)
	}
	w, err := s.writer(id)
	if err != nil {
		return zero, err
	}
	return s.decodeWith(w, payload)
}

// SplitWireFormat splits a record in the Confluent wire format (magic byte
// 0, the 4-byte big-endian schema id, the payload) into the schema id and
// the payload. A record that is shorter than the header or starts with
// another byte fails with ErrWireFormat and ErrDecode. It is the framing
// every registry serde shares (Avro[T] here, the marketplace events'
// schemas.RegistrySerde).
func SplitWireFormat(b []byte) (id int, payload []byte, err error) {
	if len(b) < 5 {
		return 0, nil, fmt.Errorf("%w: %w: %d bytes, the header alone is 5", ErrDecode, ErrWireFormat, len(b))
	}
	if b[0] != 0 {
		return 0, nil, fmt.Errorf("%w: %w: magic byte is %#x, want 0x0", ErrDecode, ErrWireFormat, b[0])
	}
	var h sr.ConfluentHeader
	id, payload, err = h.DecodeID(b)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w: %w", ErrDecode, ErrWireFormat, err)
	}
	return id, payload, nil
}

func (s *avroSerde[T]) writer(id int) (*avroWriter, error) {
	s.mu.RLock()
	w, ok := s.writers[id]
	s.mu.RUnlock()
	if ok {
		return w, nil
	}
	// One fetch per id however many tasks meet it at once.
	v, err, _ := s.fetch.Do(fmt.Sprint(id), func() (any, error) {
		var zero T
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.timeout)
		defer cancel()
		schema, err := s.cfg.registry.SchemaByID(ctx, id)
		if err != nil {
			// Not cached: the id may be registered later, and
			// outages pass.
			if SchemaNotFound(err) {
				return nil, fmt.Errorf("%w: avro %T: %w: %d", ErrDecode, zero, ErrUnknownSchemaID, id)
			}
			return nil, fmt.Errorf("serde: avro %T: fetch schema id %d: %w", zero, id, registryErr(err))
		}
		w := s.resolve(id, schema)
		s.mu.Lock()
		s.writers[id] = w
		s.mu.Unlock()
		return w, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*avroWriter), nil
}

// resolve compiles a writer schema and resolves it to the reader schema.
// Failures are kept in the returned writer: ids are immutable, so a record
// written with an incompatible schema stays undecodable, and a topic full
// of them must not recompile the schema per record.
func (s *avroSerde[T]) resolve(id int, schema sr.Schema) *avroWriter {
	var zero T
	fail := func(format string, args ...any) *avroWriter {
		return &avroWriter{err: fmt.Errorf("%w: avro %T: %w: schema id %d: %s", ErrDecode, zero, ErrIncompatibleSchema, id, fmt.Sprintf(format, args...))}
	}
	if schema.Type != sr.TypeAvro {
		return fail("a %v schema, not Avro", schema.Type)
	}
	if len(schema.References) > 0 {
		return &avroWriter{err: fmt.Errorf("%w: avro %T: schema id %d: %w (%d references)", ErrRegistry, zero, id, ErrSchemaReferences, len(schema.References))}
	}
	codec, err := goavro.NewCodec(schema.Schema)
	if err != nil {
		return fail("compile: %v", err)
	}
	if codec.CanonicalSchema() == s.codec.CanonicalSchema() {
		return s.self
	}
	tree, err := parseAvroSchema(schema.Schema)
	if err != nil {
		return fail("parse: %v", err)
	}
	if tree.kind == "record" && s.tree.kind == "record" && shortName(tree.name) != shortName(s.tree.name) {
		return fail("written as record %s, read as %s", tree.name, s.tree.name)
	}
	s.mu.Lock()
	dec, err := s.binder.decoder(tree, s.tree, reflect.TypeFor[T](), rootPath(reflect.TypeFor[T]()))
	s.mu.Unlock()
	if err != nil {
		return fail("%v", err)
	}
	return &avroWriter{tree: tree, codec: codec, dec: dec, raw: rawBytesSchema(tree)}
}
