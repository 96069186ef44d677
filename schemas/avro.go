package schemas

import (
	"encoding/json"
	"fmt"

	"github.com/tidemark-streams/tidemark/serde"
)

func decodeErr(typ EventType, kind error, detail any) error {
	return fmt.Errorf("%w: %s: %w: %v", serde.ErrDecode, typ, kind, detail)
}

// validDecoded is the last step of every decoder: a record that decodes
// but breaks an event invariant is a decode error too, so consumers only
// ever see valid events, whichever path decoded them.
func validDecoded[T Event](v T) (T, error) {
	if err := v.Validate(); err != nil {
		var zero T
		return zero, fmt.Errorf("%w: %w", serde.ErrDecode, err)
	}
	return v, nil
}

// encode validates v and appends its Avro binary form to dst.
func (s *Spec[T]) encode(dst []byte, v T) ([]byte, error) {
	if err := v.Validate(); err != nil {
		return dst, fmt.Errorf("schemas: encode: %w", err)
	}
	return s.appendBin(dst, v), nil
}

// encodeGoavro is encode through goavro, the reference for appendBin.
func (s *Spec[T]) encodeGoavro(dst []byte, v T) ([]byte, error) {
	out, err := s.codec.BinaryFromNative(dst, s.toNative(v))
	if err != nil {
		return dst, fmt.Errorf("schemas: encode %s: %w", v.Type(), err)
	}
	return out, nil
}

// decodeWith decodes an Avro payload (no header) written with res's schema.
func (s *Spec[T]) decodeWith(res *resolution, b []byte) (T, error) {
	if res != s.self {
		return s.decodeGoavro(res, b)
	}
	v, err := s.fromBin(b)
	if err != nil {
		var zero T
		return zero, decodeErr(zero.Type(), ErrMalformed, err)
	}
	return validDecoded(v)
}

// decodeGoavro decodes with goavro and the resolution's writer codec; for
// the embedded schema it is the reference the direct decoder is fuzzed
// against.
func (s *Spec[T]) decodeGoavro(res *resolution, b []byte) (T, error) {
	var zero T
	typ := zero.Type()
	native, rest, err := res.codec.NativeFromBinary(b)
	if err != nil {
		return zero, decodeErr(typ, ErrMalformed, err)
	}
	if len(rest) > 0 {
		return zero, decodeErr(typ, ErrMalformed, fmt.Sprintf("%d trailing bytes after the record", len(rest)))
	}
	m, ok := native.(map[string]any)
	if !ok {
		return zero, decodeErr(typ, ErrMalformed, fmt.Sprintf("decoded %T, want a record", native))
	}
	for k, v := range res.fill {
		m[k] = v
	}
	v, err := s.fromNative(m)
	if err != nil {
		return zero, decodeErr(typ, ErrIncompatibleSchema, err)
	}
	return validDecoded(v)
}

type avroSerde[T Event] struct {
	spec *Spec[T]
	res  *resolution
}

func (a avroSerde[T]) Encode(dst []byte, v T) ([]byte, error) { return a.spec.encode(dst, v) }
func (a avroSerde[T]) Decode(b []byte) (T, error)             { return a.spec.decodeWith(a.res, b) }

// Avro returns a serde for plain Avro binary (no header) written with the
// embedded schema. Decode rejects trailing bytes and invalid events, which
// catches most records of another type, but plain Avro carries no type:
// use Registry where topics may mix writers.
func (s *Spec[T]) Avro() serde.Serde[T] { return avroSerde[T]{spec: s, res: s.self} }

// AvroFrom returns a serde that decodes plain Avro written with the writer
// schema and resolves it to the embedded (reader) schema: fields the writer
// lacks get the reader's defaults, fields the reader lacks are dropped.
// Encode always writes the embedded schema. It fails if the writer schema is
// another record type or cannot be resolved.
func (s *Spec[T]) AvroFrom(writerSchema string) (serde.Serde[T], error) {
	res, err := s.resolve(writerSchema)
	if err != nil {
		return nil, fmt.Errorf("schemas: resolve writer schema for %s: %w", s.name, err)
	}
	return avroSerde[T]{spec: s, res: res}, nil
}

type jsonSerde[T Event] struct{}

// JSON returns a serde for encoding/json with the structs' tags. Decode
// validates, so a record of another type (which lacks required fields) fails
// with ErrInvalidEvent instead of yielding a half-empty struct.
func (s *Spec[T]) JSON() serde.Serde[T] { return jsonSerde[T]{} }

func (jsonSerde[T]) Encode(dst []byte, v T) ([]byte, error) {
	if err := v.Validate(); err != nil {
		return dst, fmt.Errorf("schemas: encode: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("schemas: encode %s as json: %w", v.Type(), err)
	}
	return append(dst, b...), nil
}

func (jsonSerde[T]) Decode(b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		var zero T
		return zero, decodeErr(zero.Type(), ErrMalformed, err)
	}
	return validDecoded(v)
}
