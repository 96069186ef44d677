// Package serde turns typed keys and values into the bytes Kafka and the
// state stores hold, and back.
//
// The built-in serdes use the same encodings as Kafka's Java serializers
// (UTF-8 strings, big-endian longs and doubles), so topics written by tidemark
// can be read by Kafka Streams and the Java clients, and the other way round.
package serde

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Serde encodes and decodes values of one type. Implementations must be safe
// for concurrent use: one serde serves every task of a process.
//
// Encode may append to dst and return the extended slice, which lets hot paths
// reuse buffers; passing nil is always correct.
type Serde[T any] interface {
	Encode(dst []byte, v T) ([]byte, error)
	Decode(b []byte) (T, error)
}

// ErrDecode is wrapped by every decoding failure of the built-in serdes, so
// that callers can route undecodable records to a dead-letter topic.
var ErrDecode = errors.New("serde: decode")

// Func adapts a pair of functions to a Serde.
type Func[T any] struct {
	EncodeFunc func(dst []byte, v T) ([]byte, error)
	DecodeFunc func(b []byte) (T, error)
}

func (f Func[T]) Encode(dst []byte, v T) ([]byte, error) { return f.EncodeFunc(dst, v) }
func (f Func[T]) Decode(b []byte) (T, error)             { return f.DecodeFunc(b) }

type stringSerde struct{}

// String encodes strings as UTF-8 bytes, like Kafka's StringSerializer.
func String() Serde[string] { return stringSerde{} }

func (stringSerde) Encode(dst []byte, v string) ([]byte, error) { return append(dst, v...), nil }
func (stringSerde) Decode(b []byte) (string, error)             { return string(b), nil }

type bytesSerde struct{}

// Bytes passes byte slices through unchanged. Decode copies, because callers
// may keep the result after the record buffer is reused; it keeps nil and
// empty apart (an empty Kafka key is not a null one).
func Bytes() Serde[[]byte] { return bytesSerde{} }

func (bytesSerde) Encode(dst []byte, v []byte) ([]byte, error) { return append(dst, v...), nil }
func (bytesSerde) Decode(b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	return append([]byte{}, b...), nil
}

type int64Serde struct{}

// Int64 encodes as 8 big-endian bytes, like Kafka's LongSerializer.
func Int64() Serde[int64] { return int64Serde{} }

func (int64Serde) Encode(dst []byte, v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(dst, uint64(v)), nil
}

func (int64Serde) Decode(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: int64 needs 8 bytes, got %d", ErrDecode, len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

type float64Serde struct{}

// Float64 encodes as 8 big-endian IEEE 754 bytes, like Kafka's DoubleSerializer.
// Every NaN is written as the canonical 0x7ff8000000000000, as Java's
// Double.doubleToLongBits does (Go's math.NaN() has another payload), so a
// NaN key has the same bytes, partition and store row as in Kafka Streams.
func Float64() Serde[float64] { return float64Serde{} }

// canonicalNaN is Double.doubleToLongBits(Double.NaN).
const canonicalNaN = 0x7ff8000000000000

func (float64Serde) Encode(dst []byte, v float64) ([]byte, error) {
	if math.IsNaN(v) {
		return binary.BigEndian.AppendUint64(dst, canonicalNaN), nil
	}
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(v)), nil
}

func (float64Serde) Decode(b []byte) (float64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: float64 needs 8 bytes, got %d", ErrDecode, len(b))
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
}

// Nuller is implemented by serdes whose encoding has a null of its own,
// such as JSON's null. Sources read such a key as a null Kafka key and
// such a value as a tombstone, as Kafka Streams does when a deserializer
// returns null; Decode still returns the zero T for it.
type Nuller interface {
	IsNull(b []byte) bool
}

type jsonSerde[T any] struct{}

// JSON encodes values with encoding/json. The JSON value null is a Nuller's
// null: a source reads it as a tombstone (a null key as a key), never as a
// zero T; Decode returns the zero T for it, as encoding/json does.
func JSON[T any]() Serde[T] { return jsonSerde[T]{} }

func (jsonSerde[T]) IsNull(b []byte) bool { return string(bytes.TrimSpace(b)) == "null" }

func (jsonSerde[T]) Encode(dst []byte, v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("serde: json encode %T: %w", v, err)
	}
	return append(dst, b...), nil
}

func (jsonSerde[T]) Decode(b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("%w: json %T: %v", ErrDecode, v, err)
	}
	return v, nil
}
