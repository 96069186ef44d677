package frontier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Binary encodings for the compacted frontier topic. Every value starts
// with a format version so it can evolve; integers are zig-zag varints
// (signed) or uvarints (counts, ids), so an empty mark is three bytes and a
// typical one about a dozen.
//
//	Mark:       version=1 | varint offset | varint watermark_ms
//	Frontier:   version=1 | uvarint len(sink) | sink | uvarint n | n × (varint offset | varint watermark_ms)
//	Record v2:  version=2 | uvarint len(sink) | sink
//	            | uvarint n | n × varint offset
//	            | uvarint f | f × (uvarint sub_topology | uvarint tasks)
//	            | uvarint m | m × (uvarint sub_topology | uvarint partition | varint watermark_ms | flags)
//
// flags is one byte: bit 0 idle; the other bits must be zero. The topic's
// values were Frontier (version 1) until the per-task watermarks of
// version 2; Record.UnmarshalBinary reads both.
const (
	markVersion     = 1
	frontierVersion = 1
	recordVersion   = 2
	// maxSink bounds the sink name so a corrupt length cannot allocate
	// much; Kafka topic names are at most 249 bytes.
	maxSink = 249
	// maxFeedTasks bounds a feed's task count (a sub-topology's partition
	// count), so a corrupt value cannot make a reader enumerate billions
	// of tasks.
	maxFeedTasks = 1 << 20
	flagIdle     = 1
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

// AppendBinary appends r's encoding to b: version 2, or version 1 (a
// Frontier) for a record decoded from version 1 (Legacy set).
func (r Record) AppendBinary(b []byte) ([]byte, error) {
	if len(r.Sink) > maxSink {
		return nil, fmt.Errorf("frontier record %q: sink name longer than %d bytes", r.Sink, maxSink)
	}
	if r.Legacy != nil {
		if len(r.Legacy) != len(r.Offsets) {
			return nil, fmt.Errorf("frontier record %q: %d legacy watermarks for %d offsets", r.Sink, len(r.Legacy), len(r.Offsets))
		}
		f := Frontier{Sink: r.Sink, Marks: make([]Mark, len(r.Offsets))}
		for i := range f.Marks {
			f.Marks[i] = Mark{Offset: r.Offsets[i], WatermarkMs: r.Legacy[i]}
		}
		return f.AppendBinary(b)
	}
	b = append(b, recordVersion)
	b = binary.AppendUvarint(b, uint64(len(r.Sink)))
	b = append(b, r.Sink...)
	b = binary.AppendUvarint(b, uint64(len(r.Offsets)))
	for _, off := range r.Offsets {
		b = binary.AppendVarint(b, off)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Feeds)))
	for _, f := range r.Feeds {
		if f.SubTopology < 0 || f.Tasks <= 0 || f.Tasks > maxFeedTasks {
			return nil, fmt.Errorf("frontier record %q: feed %+v out of range", r.Sink, f)
		}
		b = binary.AppendUvarint(b, uint64(f.SubTopology))
		b = binary.AppendUvarint(b, uint64(f.Tasks))
	}
	b = binary.AppendUvarint(b, uint64(len(r.Tasks)))
	for _, m := range r.Tasks {
		if m.SubTopology < 0 || m.Partition < 0 {
			return nil, fmt.Errorf("frontier record %q: task %s out of range", r.Sink, m.TaskRef)
		}
		b = binary.AppendUvarint(b, uint64(m.SubTopology))
		b = binary.AppendUvarint(b, uint64(m.Partition))
		b = binary.AppendVarint(b, m.WatermarkMs)
		var flags byte
		if m.Idle {
			flags |= flagIdle
		}
		b = append(b, flags)
	}
	return b, nil
}

// MarshalBinary encodes r for the topic value.
func (r Record) MarshalBinary() ([]byte, error) {
	return r.AppendBinary(make([]byte, 0, 16+len(r.Sink)+4*len(r.Offsets)+4*len(r.Feeds)+12*len(r.Tasks)))
}

// UnmarshalBinary decodes a version-2 value, or a version-1 Frontier (into
// Offsets and Legacy). Like Frontier's it never allocates more than the
// input could describe.
func (r *Record) UnmarshalBinary(b []byte) error {
	if len(b) > 0 && b[0] == frontierVersion {
		var f Frontier
		if err := f.UnmarshalBinary(b); err != nil {
			return err
		}
		out := Record{Sink: f.Sink, Offsets: make([]int64, len(f.Marks)), Legacy: make([]int64, len(f.Marks))}
		for i, m := range f.Marks {
			out.Offsets[i], out.Legacy[i] = m.Offset, m.WatermarkMs
		}
		*r = out
		return nil
	}
	if len(b) == 0 || b[0] != recordVersion {
		return fmt.Errorf("%w: record: bad version", ErrCorrupt)
	}
	d := decoder{b: b[1:]}
	sl := d.uvarint("sink length", maxSink)
	sink := string(d.bytes(sl))
	out := Record{Sink: sink}
	// Each offset takes at least one byte, each feed two, each mark four.
	n := d.count("offsets", 1)
	if n > 0 {
		out.Offsets = make([]int64, n)
		for i := range out.Offsets {
			out.Offsets[i] = d.varint("offset")
		}
	}
	n = d.count("feeds", 2)
	if n > 0 {
		out.Feeds = make([]Feed, n)
		for i := range out.Feeds {
			sub := d.uvarint("feed sub-topology", math.MaxInt32)
			tasks := d.uvarint("feed tasks", maxFeedTasks)
			if d.err == nil && tasks == 0 {
				d.err = errors.New("feed without tasks")
			}
			out.Feeds[i] = Feed{SubTopology: int32(sub), Tasks: int32(tasks)}
		}
	}
	n = d.count("marks", 4)
	if n > 0 {
		out.Tasks = make([]TaskMark, n)
		for i := range out.Tasks {
			sub := d.uvarint("mark sub-topology", math.MaxInt32)
			p := d.uvarint("mark partition", math.MaxInt32)
			wm := d.varint("mark watermark")
			flags := d.byte("mark flags")
			if d.err == nil && flags&^flagIdle != 0 {
				d.err = fmt.Errorf("mark flags %#x", flags)
			}
			out.Tasks[i] = TaskMark{TaskRef: TaskRef{SubTopology: int32(sub), Partition: int32(p)}, WatermarkMs: wm, Idle: flags&flagIdle != 0}
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("%w: record %q: %v", ErrCorrupt, sink, d.err)
	}
	*r = out
	return nil
}

// decoder reads the varints of a value, keeping the first error: the
// caller checks once at the end (reads after an error return zeros).
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint(what string, limit uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > limit {
		d.err = errors.New(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errors.New(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte(what string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = errors.New(what)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) bytes(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if uint64(len(d.b)) < n {
		d.err = errors.New("short value")
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

// count reads an element count, bounded by what the rest of the value
// could hold at minSize bytes an element.
func (d *decoder) count(what string, minSize int) uint64 {
	return d.uvarint(what+" count", uint64(len(d.b))/uint64(minSize))
}
