package topology

import (
	"encoding/binary"
	"fmt"
)

// Timestamped store values are the 8-byte big-endian timestamp of the record
// that last updated the value, then the value's bytes. DSL aggregations keep
// it so that outputs carry the maximum timestamp of their inputs, and so
// that tables joined later know how old each side is, across restarts.

// EncodeTimestamped appends the timestamped encoding of (ts, value) to dst.
func EncodeTimestamped(dst []byte, ts int64, value []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(ts))
	return append(dst, value...)
}

// DecodeTimestamped splits a timestamped store value.
func DecodeTimestamped(b []byte) (ts int64, value []byte, err error) {
	if len(b) < 8 {
		return 0, nil, fmt.Errorf("timestamped value of %d bytes, need at least 8", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), b[8:], nil
}

// appendValueTS encodes v after its timestamp, into dst.
func appendValueTS[V any](dst []byte, enc interface {
	Encode([]byte, V) ([]byte, error)
}, ts int64, v V) ([]byte, error) {
	dst = binary.BigEndian.AppendUint64(dst[:0], uint64(ts))
	return enc.Encode(dst, v)
}
