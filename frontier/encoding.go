package frontier

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Binary encodings for the compacted frontier topic. Both start with a
// format version so the value can evolve; integers are zig-zag varints,
// so an empty mark is three bytes and a typical one about a dozen.
//
//	Mark:     version=1 | varint offset | varint watermark_ms
//	Frontier: version=1 | uvarint len(sink) | sink | uvarint n | n × (varint offset | varint watermark_ms)
const (
	markVersion     = 1
	frontierVersion = 1
	// maxSink bounds the sink name so a corrupt length cannot allocate
	// much; Kafka topic names are at most 249 bytes.
	maxSink = 249
)

// ErrCorrupt is wrapped by every decode error.
var ErrCorrupt = errors.New("frontier: corrupt encoding")

// AppendBinary appends m's encoding to b.
func (m Mark) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, markVersion)
	b = binary.AppendVarint(b, m.Offset)
	return binary.AppendVarint(b, m.WatermarkMs), nil
}

// MarshalBinary encodes m for the topic value.
func (m Mark) MarshalBinary() ([]byte, error) { return m.AppendBinary(make([]byte, 0, 16)) }

// UnmarshalBinary decodes a value written by MarshalBinary.
func (m *Mark) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] != markVersion {
		return fmt.Errorf("%w: mark: bad version", ErrCorrupt)
	}
	rest, mk, err := readMark(b[1:])
	if err != nil {
		return fmt.Errorf("%w: mark: %v", ErrCorrupt, err)
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: mark: %d trailing bytes", ErrCorrupt, len(rest))
	}
	*m = mk
	return nil
}

func readMark(b []byte) ([]byte, Mark, error) {
	off, n := binary.Varint(b)
	if n <= 0 {
		return nil, Mark{}, errors.New("offset")
	}
	b = b[n:]
	wm, n := binary.Varint(b)
	if n <= 0 {
		return nil, Mark{}, errors.New("watermark")
	}
	return b[n:], Mark{Offset: off, WatermarkMs: wm}, nil
}

// AppendBinary appends f's encoding to b.
func (f Frontier) AppendBinary(b []byte) ([]byte, error) {
	if len(f.Sink) > maxSink {
		return nil, fmt.Errorf("frontier %q: sink name longer than %d bytes", f.Sink, maxSink)
	}
	b = append(b, frontierVersion)
	b = binary.AppendUvarint(b, uint64(len(f.Sink)))
	b = append(b, f.Sink...)
	b = binary.AppendUvarint(b, uint64(len(f.Marks)))
	for _, m := range f.Marks {
		b = binary.AppendVarint(b, m.Offset)
		b = binary.AppendVarint(b, m.WatermarkMs)
	}
	return b, nil
}

// MarshalBinary encodes f.
func (f Frontier) MarshalBinary() ([]byte, error) {
	return f.AppendBinary(make([]byte, 0, 8+len(f.Sink)+12*len(f.Marks)))
}

// UnmarshalBinary decodes a value written by MarshalBinary. It never
// allocates more than the input could describe.
func (f *Frontier) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] != frontierVersion {
		return fmt.Errorf("%w: frontier: bad version", ErrCorrupt)
	}
	b = b[1:]
	sl, n := binary.Uvarint(b)
	if n <= 0 || sl > maxSink || uint64(len(b)-n) < sl {
		return fmt.Errorf("%w: frontier: sink length", ErrCorrupt)
	}
	b = b[n:]
	sink := string(b[:sl])
	b = b[sl:]
	cnt, n := binary.Uvarint(b)
	// Each mark takes at least two bytes.
	if n <= 0 || cnt > uint64(len(b)-n)/2 {
		return fmt.Errorf("%w: frontier %q: partition count", ErrCorrupt, sink)
	}
	b = b[n:]
	marks := make([]Mark, cnt)
	for i := range marks {
		var err error
		if b, marks[i], err = readMark(b); err != nil {
			return fmt.Errorf("%w: frontier %q partition %d: %v", ErrCorrupt, sink, i, err)
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: frontier %q: %d trailing bytes", ErrCorrupt, sink, len(b))
	}
	f.Sink, f.Marks = sink, marks
	return nil
}
