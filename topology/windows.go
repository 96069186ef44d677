package topology

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
)

// TimeWindows are fixed-size windows aligned to the epoch: a window covers
// [start, start+size) with start a multiple of advance. Tumbling windows have
// advance = size; hopping windows overlap. A window accepts records until
// stream time reaches end + grace; later records are dropped and counted.
type TimeWindows struct {
	size, advance, grace int64
}

// TumblingWindows are back-to-back windows of size.
func TumblingWindows(size, grace time.Duration) TimeWindows {
	return TimeWindows{size: size.Milliseconds(), advance: size.Milliseconds(), grace: grace.Milliseconds()}
}

// HoppingWindows are windows of size starting every advance.
func HoppingWindows(size, advance, grace time.Duration) TimeWindows {
	return TimeWindows{size: size.Milliseconds(), advance: advance.Milliseconds(), grace: grace.Milliseconds()}
}

func (w TimeWindows) validate() error {
	if w.size <= 0 || w.advance <= 0 || w.advance > w.size || w.grace < 0 {
		return fmt.Errorf("%w: size %dms, advance %dms, grace %dms (need size > 0, 0 < advance ≤ size, grace ≥ 0)", ErrInvalidWindow, w.size, w.advance, w.grace)
	}
	return nil
}

// starts appends the starts of the windows containing ts, ascending, as
// Kafka Streams' TimeWindows.windowsFor does.
func (w TimeWindows) starts(dst []int64, ts int64) []int64 {
	first := max(0, ts-w.size+w.advance)
	first -= first % w.advance
	for s := first; s <= ts; s += w.advance {
		dst = append(dst, s)
	}
	return dst
}

// SessionWindows group a key's records into sessions separated by gaps of
// inactivity longer than gap. A record within gap of existing sessions
// merges them. A session is closed once no in-grace record could extend
// it: end + gap ≤ stream time − grace, when Kafka Streams' suppression
// emits it and its store stops returning it. A record is late, dropped and
// counted, only if the session it would form is closed by that rule.
type SessionWindows struct {
	gap, grace int64
}

// SessionWindowsWithGap makes session windows with inactivity gap and grace.
func SessionWindowsWithGap(gap, grace time.Duration) SessionWindows {
	return SessionWindows{gap: gap.Milliseconds(), grace: grace.Milliseconds()}
}

func (w SessionWindows) validate() error {
	if w.gap <= 0 || w.grace < 0 {
		return fmt.Errorf("%w: gap %dms, grace %dms (need gap > 0, grace ≥ 0)", ErrInvalidWindow, w.gap, w.grace)
	}
	return nil
}

// SlidingWindows are windows of a fixed size that move with the data: two
// records fall in a common window when their timestamps differ by at most
// timeDifference (Kafka Streams' SlidingWindows). Bounds are inclusive; a
// difference of 0 makes windows [t, t] of the records of equal timestamps.
type SlidingWindows struct {
	diff, grace int64
}

// SlidingWindowsWithDiff makes sliding windows.
func SlidingWindowsWithDiff(timeDifference, grace time.Duration) SlidingWindows {
	return SlidingWindows{diff: timeDifference.Milliseconds(), grace: grace.Milliseconds()}
}

func (w SlidingWindows) validate() error {
	if w.diff < 0 || w.grace < 0 {
		return fmt.Errorf("%w: time difference %dms, grace %dms (need difference ≥ 0, grace ≥ 0)", ErrInvalidWindow, w.diff, w.grace)
	}
	return nil
}

// JoinWindows bound a stream-stream join: a left record at t joins right
// records in [t−before, t+after]. Records are joinable until stream time
// passes their window end plus grace.
type JoinWindows struct {
	before, after, grace int64
}

// JoinWindowsOf joins records at most diff apart, in either direction.
func JoinWindowsOf(diff, grace time.Duration) JoinWindows {
	return JoinWindows{before: diff.Milliseconds(), after: diff.Milliseconds(), grace: grace.Milliseconds()}
}

// Before sets how far before a left record right records may be.
func (w JoinWindows) Before(d time.Duration) JoinWindows { w.before = d.Milliseconds(); return w }

// After sets how far after a left record right records may be.
func (w JoinWindows) After(d time.Duration) JoinWindows { w.after = d.Milliseconds(); return w }

// reach is how far behind stream time (before grace) the join stores keep
// records: before + after, and with a negative bound the other one, which
// alone spans how far back a record on time reaches into the other input
// (a left record at t joins right ones down to t − before, a right one
// left ones down to t − after). Kafka Streams keeps before + after + grace
// only, and so a window such as before 10 min, after −5 min loses the
// pairs more than before + after + grace behind.
func (w JoinWindows) reach() int64 { return max(w.before+w.after, w.before, w.after) }

func (w JoinWindows) validate() error {
	if w.before+w.after < 0 || w.grace < 0 {
		return fmt.Errorf("%w: before %dms, after %dms, grace %dms", ErrInvalidWindow, w.before, w.after, w.grace)
	}
	return nil
}

// Windowed is the key of a windowed aggregation: the record key and the
// window. For time windows End is exclusive; for session and sliding windows
// both bounds are inclusive event times.
type Windowed[K any] struct {
	Key   K
	Start int64
	End   int64
}

// String uses Kafka Streams' layout, [key@start/end].
func (w Windowed[K]) String() string { return fmt.Sprintf("[%v@%d/%d]", w.Key, w.Start, w.End) }

type windowedSerde[K any] struct{ ks serde.Serde[K] }

// WindowedSerde encodes a Windowed key as the key's bytes followed by the
// 8-byte big-endian start and end. It is tidemark's own layout, which its
// stores keep; Kafka Streams cannot read it from a topic.
//
// Deprecated: for topics use TimeWindowedSerde or SessionWindowedSerde,
// Kafka Streams' layouts, which windowed aggregations write since they
// replaced this one there.
func WindowedSerde[K any](keys serde.Serde[K]) serde.Serde[Windowed[K]] {
	return windowedSerde[K]{ks: keys}
}

func (s windowedSerde[K]) Encode(dst []byte, w Windowed[K]) ([]byte, error) {
	dst, err := s.ks.Encode(dst, w.Key)
	if err != nil {
		return dst, err
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(w.Start))
	return binary.BigEndian.AppendUint64(dst, uint64(w.End)), nil
}

func (s windowedSerde[K]) Decode(b []byte) (Windowed[K], error) {
	var w Windowed[K]
	if len(b) < 16 {
		return w, fmt.Errorf("%w: windowed key of %d bytes", serde.ErrDecode, len(b))
	}
	n := len(b) - 16
	k, err := s.ks.Decode(b[:n])
	if err != nil {
		return w, err
	}
	return Windowed[K]{Key: k, Start: int64(binary.BigEndian.Uint64(b[n:])), End: int64(binary.BigEndian.Uint64(b[n+8:]))}, nil
}
