package topology

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
)

// TimeWindowedSerde encodes the Windowed keys of time windows (tumbling,
// hopping, and sliding windows, whose size is their time difference) as
// Kafka Streams' TimeWindowedSerializer does: the key's bytes followed by
// the 8-byte big-endian start. Decode derives the end as start + size, as
// Kafka Streams' TimeWindowedDeserializer(inner, size) does (the largest
// int64 if that overflows). Windowed aggregations write their output and
// repartition topics with it; use it to read such topics, or topics Kafka
// Streams wrote with WindowedSerdes.timeWindowedSerdeFrom(cls, size).
func TimeWindowedSerde[K any](keys serde.Serde[K], size time.Duration) serde.Serde[Windowed[K]] {
	return timeWindowedSerde[K]{ks: keys, size: size.Milliseconds()}
}

// SessionWindowedSerde encodes the Windowed keys of session windows as
// Kafka Streams' SessionWindowedSerializer does: the key's bytes followed
// by the 8-byte big-endian end, then the start.
func SessionWindowedSerde[K any](keys serde.Serde[K]) serde.Serde[Windowed[K]] {
	return sessionWindowedSerde[K]{ks: keys}
}

type timeWindowedSerde[K any] struct {
	ks   serde.Serde[K]
	size int64 // ms
}

func (s timeWindowedSerde[K]) Encode(dst []byte, w Windowed[K]) ([]byte, error) {
	dst, err := s.ks.Encode(dst, w.Key)
	if err != nil {
		return dst, err
	}
	return binary.BigEndian.AppendUint64(dst, uint64(w.Start)), nil
}

func (s timeWindowedSerde[K]) Decode(b []byte) (Windowed[K], error) {
	var w Windowed[K]
	if len(b) < 8 {
		return w, fmt.Errorf("%w: time-windowed key of %d bytes, need at least the 8-byte start", serde.ErrDecode, len(b))
	}
	n := len(b) - 8
	k, err := s.ks.Decode(b[:n])
	if err != nil {
		return w, err
	}
	start := int64(binary.BigEndian.Uint64(b[n:]))
	end := start + s.size
	if end < start { // Kafka Streams' timeWindowForSize truncates to Long.MAX_VALUE
		end = math.MaxInt64
	}
	return Windowed[K]{Key: k, Start: start, End: end}, nil
}

func (s timeWindowedSerde[K]) encodeBaseKey(dst []byte, w Windowed[K]) ([]byte, error) {
	return s.ks.Encode(dst, w.Key)
}

type sessionWindowedSerde[K any] struct{ ks serde.Serde[K] }

func (s sessionWindowedSerde[K]) Encode(dst []byte, w Windowed[K]) ([]byte, error) {
	dst, err := s.ks.Encode(dst, w.Key)
	if err != nil {
		return dst, err
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(w.End))
	return binary.BigEndian.AppendUint64(dst, uint64(w.Start)), nil
}

func (s sessionWindowedSerde[K]) Decode(b []byte) (Windowed[K], error) {
	var w Windowed[K]
	if len(b) < 16 {
		return w, fmt.Errorf("%w: session-windowed key of %d bytes, need at least the 8-byte end and start", serde.ErrDecode, len(b))
	}
	n := len(b) - 16
	k, err := s.ks.Decode(b[:n])
	if err != nil {
		return w, err
	}
	return Windowed[K]{Key: k, End: int64(binary.BigEndian.Uint64(b[n:])), Start: int64(binary.BigEndian.Uint64(b[n+8:]))}, nil
}

func (s sessionWindowedSerde[K]) encodeBaseKey(dst []byte, w Windowed[K]) ([]byte, error) {
	return s.ks.Encode(dst, w.Key)
}

// baseKeyEncoder is a windowed key serde that encodes the key inside the
// window alone: a sink partitions windowed keys by it, as Kafka Streams'
// WindowedStreamPartitioner does, so a key's windows share its partition.
type baseKeyEncoder[K any] interface {
	encodeBaseKey(dst []byte, k K) ([]byte, error)
}

// windowedKeys is the key serde of a windowed aggregation's table. Stores
// and their changelogs downstream (a Suppress buffer, a table materialized
// from the windowed stream) keep tidemark's layout, WindowedSerde's, so
// existing state restores; topics, the output and repartition topics, use
// topic, Kafka Streams' layout for the window kind (topicKeys).
type windowedKeys[K any] struct {
	windowedSerde[K]
	topic serde.Serde[Windowed[K]]
}

func (s windowedKeys[K]) topicSerde() any { return s.topic }

// topicLayout is a key serde that writes topics in another layout than
// stores (windowedKeys).
type topicLayout interface{ topicSerde() any }

// topicKeys is the serde keys are written to and read from Kafka topics
// with: a windowed aggregation's keys in Kafka Streams' layout, any other
// serde as it is.
func topicKeys[K any](ks serde.Serde[K]) serde.Serde[K] {
	if t, ok := ks.(topicLayout); ok {
		if s, ok := t.topicSerde().(serde.Serde[K]); ok {
			return s
		}
	}
	return ks
}

func timeWindowedKeys[K any](ks serde.Serde[K], sizeMs int64) serde.Serde[Windowed[K]] {
	if ks == nil {
		return nil
	}
	return windowedKeys[K]{windowedSerde: windowedSerde[K]{ks: ks}, topic: timeWindowedSerde[K]{ks: ks, size: sizeMs}}
}

func sessionWindowedKeys[K any](ks serde.Serde[K]) serde.Serde[Windowed[K]] {
	if ks == nil {
		return nil
	}
	return windowedKeys[K]{windowedSerde: windowedSerde[K]{ks: ks}, topic: sessionWindowedSerde[K]{ks: ks}}
}
