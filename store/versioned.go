package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Versioned is a key-value store that keeps every version of each key for
// a history window, so that a lookup can ask for the value a key had at a
// given event time (Kafka Streams' VersionedKeyValueStore, KIP-889): the
// store behind versioned tables and the as-of stream-table join.
//
// A version is (value, validFrom): it is valid from its timestamp until the
// next newer version of the key (validTo, exclusive), or forever when it is
// the latest. A delete is a version too (a tombstone): as of its timestamp
// the key has no value, while lookups as of earlier times still see the
// older versions.
//
// History is bounded by the store's observed stream time st, the largest
// timestamp ever put (kept in the store, so it survives a restore from the
// changelog). With history h the cutoff is st − h:
//
//   - GetAsOf(key, asOf) with asOf < cutoff answers the key's latest
//     version when that is a value valid at asOf (validFrom ≤ asOf: the
//     latest never expires), and not found otherwise, whatever the store
//     still holds: history older than the window is not kept, and an
//     answer must not depend on when cleanup ran. Kafka Streams'
//     RocksDBVersionedStore answers the same.
//   - Put with ts < cutoff is dropped (not stored, no error): it could only
//     answer lookups that are no longer answered. Use Cutoff to tell.
//   - Versions that stopped being valid at or before the cutoff are deleted
//     (tombstones in the changelog). The newest version at or before the
//     cutoff is kept while it is the latest, so Get always answers the
//     latest value, however old. A delete at or before the cutoff removes
//     the key entirely.
//
// Get, GetAsOf and LatestTimestamp return copies that the caller may keep.
type Versioned interface {
	Store
	// Put adds the version (value, ts) of key, replacing a version with the
	// same timestamp. A nil value is a delete as of ts. Out-of-order puts
	// (ts older than the key's latest version) are stored as history.
	Put(key []byte, ts int64, value []byte) error
	// Get returns the latest version of key; found is false when key has
	// none or its latest version is a delete.
	Get(key []byte) (value []byte, ts int64, found bool, err error)
	// GetAsOf returns the version of key valid at asOf: the newest with
	// validFrom ≤ asOf. found is false when there is none, when it is a
	// delete, or when asOf is older than the cutoff and the version is not
	// the key's latest.
	GetAsOf(key []byte, asOf int64) (value []byte, validFrom int64, found bool, err error)
	// LatestTimestamp returns the timestamp of key's latest version, a
	// delete included (found is false when the store has no version of
	// key): a put older than it is an out-of-order update.
	LatestTimestamp(key []byte) (ts int64, found bool, err error)
	// Range calls fn with the latest version of each key in [from, to)
	// (nil: unbounded), in key order, skipping keys whose latest version
	// is a delete, until fn returns false.
	Range(from, to []byte, fn func(key, value []byte, ts int64) bool) error
	// Cutoff is observed stream time − history (math.MinInt64 before the
	// first put): puts older than it are dropped, lookups as of earlier
	// times find only a key's latest version.
	Cutoff() (int64, error)
}

// VersionedKeyValue implements Versioned on a KeyValue store, so that every
// backend (memory, Badger) and the changelog and restore paths serve it
// unchanged: a versioned store is a key-value store (KindKeyValue) with
// this layout, distinguished by the first byte of each key:
//
//	0x00                                  → observed stream time (8 bytes)
//	0x01 esc(key) ^ts                      → 0x01 value | 0x00 (a delete)
//	0x02 expiry esc(key) ^ts               → 0x01 (the expiry index)
//
// esc(key) is the key with every 0x00 byte written 0x00 0xFF and a 0x00
// 0x01 terminator: no encoded key is a prefix of another ("a" and
// "a\x00b" do not mix) and encoded keys sort like the keys. ^ts is the
// timestamp with its sign bit flipped and then every bit inverted, 8 bytes
// big-endian, so a key's versions sort newest first, negative timestamps
// included: the version valid at t is the first entry at or after
// esc(key) ^t. expiry (sign bit flipped, big-endian) is when a version
// stops being needed: the validFrom of the next newer version for a value,
// its own timestamp for a delete; the latest value has no index entry.
// Cleanup scans the index up to the cutoff, so it costs only what it
// deletes, as Deduplicate's does. A put that advances the observed stream
// time also rewrites the 0x00 entry (one more changelog record, which
// compaction folds), so that a restored store has the cutoff the lost one
// had: answers do not depend on where a restart happened.
type VersionedKeyValue struct {
	kv      KeyValue
	history int64
	// st is the observed stream time, math.MinInt64 before the first put.
	st     int64
	loaded bool
	// lowest is at most the smallest expiry in the index (math.MinInt64:
	// unknown), so that cleanup scans only when something is due.
	lowest int64
	kbuf   []byte
	due    [][]byte
}

var _ Versioned = (*VersionedKeyValue)(nil)

const (
	versionedMetaPrefix  byte = 0
	versionedDataPrefix  byte = 1
	versionedIndexPrefix byte = 2
)

var (
	versionedMetaKey = []byte{versionedMetaPrefix}
	versionedIndexOn = []byte{1}
)

// NewVersioned wraps kv, a key-value store used only through the wrapper,
// as a versioned store keeping history of stream time (at least 0). The
// observed stream time is read from kv on first use, so a store restored
// from its changelog resumes with the cutoff it had. Two wrappers of one
// store do not see each other's stream time: open one per store and task.
func NewVersioned(kv KeyValue, history time.Duration) (*VersionedKeyValue, error) {
	if history < 0 {
		return nil, fmt.Errorf("store %q: versioned history %v is negative", kv.Name(), history)
	}
	return &VersionedKeyValue{kv: kv, history: history.Milliseconds(), st: math.MinInt64, lowest: math.MinInt64}, nil
}

// load reads the observed stream time, once.
func (s *VersionedKeyValue) load() error {
	if s.loaded {
		return nil
	}
	raw, found, err := s.kv.Get(versionedMetaKey)
	if err != nil {
		return s.errorf("read observed stream time: %w", err)
	}
	if found {
		if len(raw) != 8 {
			return s.errorf("corrupt observed stream time (%d bytes)", len(raw))
		}
		s.st = int64(binary.BigEndian.Uint64(raw))
	}
	s.loaded = true
	return nil
}

func (s *VersionedKeyValue) Name() string { return s.kv.Name() }
func (s *VersionedKeyValue) Kind() Kind   { return KindKeyValue }
func (s *VersionedKeyValue) Close() error { return s.kv.Close() }

// Store returns the key-value store underneath.
func (s *VersionedKeyValue) Store() KeyValue { return s.kv }

// History is the history window in ms.
func (s *VersionedKeyValue) History() int64 { return s.history }

// ObservedStreamTime is the largest timestamp put, math.MinInt64 before
// the first.
func (s *VersionedKeyValue) ObservedStreamTime() (int64, error) {
	err := s.load()
	return s.st, err
}

func (s *VersionedKeyValue) Cutoff() (int64, error) {
	if err := s.load(); err != nil {
		return 0, err
	}
	return s.cutoff(), nil
}

func (s *VersionedKeyValue) cutoff() int64 {
	if s.st == math.MinInt64 {
		return math.MinInt64
	}
	if s.st < math.MinInt64+s.history {
		return math.MinInt64
	}
	return s.st - s.history
}

func (s *VersionedKeyValue) errorf(format string, args ...any) error {
	return fmt.Errorf("store %q: "+format, append([]any{s.kv.Name()}, args...)...)
}

// AppendVersionedKey appends the data key of (key, ts) to dst: the layout
// is described at VersionedKeyValue. Exported for tests and tools that read
// a versioned store's raw entries.
func AppendVersionedKey(dst, key []byte, ts int64) []byte {
	dst = appendVersionedPrefix(append(dst, versionedDataPrefix), key)
	return binary.BigEndian.AppendUint64(dst, uint64(invertTS(ts)))
}

// appendVersionedPrefix appends esc(key) with its terminator.
func appendVersionedPrefix(dst, key []byte) []byte {
	for _, c := range key {
		dst = append(dst, c)
		if c == 0 {
			dst = append(dst, 0xFF)
		}
	}
	return append(dst, 0, 1)
}

// ParseVersionedKey splits a data key written by AppendVersionedKey.
func ParseVersionedKey(b []byte) (key []byte, ts int64, err error) {
	if len(b) < 1+2+8 || b[0] != versionedDataPrefix {
		return nil, 0, fmt.Errorf("versioned data key of %d bytes (prefix %#x) is malformed", len(b), b[:min(len(b), 1)])
	}
	esc, tsb := b[1:len(b)-8], b[len(b)-8:]
	key = []byte{}
	for i := 0; i < len(esc); i++ {
		if esc[i] != 0 {
			key = append(key, esc[i])
			continue
		}
		if i+1 >= len(esc) {
			return nil, 0, fmt.Errorf("versioned data key: unterminated key")
		}
		switch esc[i+1] {
		case 0xFF:
			key = append(key, 0)
			i++
		case 1:
			if i+2 != len(esc) {
				return nil, 0, fmt.Errorf("versioned data key: bytes after the key terminator")
			}
			return key, invertTS(binary.BigEndian.Uint64(tsb)), nil
		default:
			return nil, 0, fmt.Errorf("versioned data key: bad escape %#x", esc[i+1])
		}
	}
	return nil, 0, fmt.Errorf("versioned data key: unterminated key")
}

// invertTS maps a timestamp to a uint64 that sorts newest first, and back.
func invertTS[T int64 | uint64](ts T) int64 {
	return int64(^(uint64(ts) ^ (1 << 63)))
}

func indexKey(expiry int64, dataKey []byte) []byte {
	b := make([]byte, 0, 9+len(dataKey)-1)
	b = append(b, versionedIndexPrefix)
	b = binary.BigEndian.AppendUint64(b, uint64(expiry)^(1<<63))
	return append(b, dataKey[1:]...)
}

// version is one stored version of a key.
type version struct {
	ts        int64
	value     []byte // nil for a delete
	tombstone bool
}

// expiry says when v stops being needed given the validFrom of the next
// newer version (hasNext false: v is the latest); ok false means never.
func (v version) expiry(next int64, hasNext bool) (int64, bool) {
	if v.tombstone {
		return v.ts, true
	}
	return next, hasNext
}

func decodeVersion(ts int64, raw []byte) (version, error) {
	if len(raw) == 0 || raw[0] > 1 || (raw[0] == 0 && len(raw) != 1) {
		return version{}, fmt.Errorf("corrupt version at %d (%d bytes)", ts, len(raw))
	}
	if raw[0] == 0 {
		return version{ts: ts, tombstone: true}, nil
	}
	return version{ts: ts, value: bytes.Clone(raw[1:])}, nil
}

// versions returns key's versions with validFrom ≤ from, newest first,
// down to the first at or before downTo (math.MaxInt64: the first only).
//
// It stops there, not at the key's end: a key's expired versions lie
// after its live ones, and a Badger store keeps their deletes as
// tombstones until compaction. Reading to the key's end, every put of a
// key stepped over all the versions it ever expired.
func (s *VersionedKeyValue) versions(key []byte, from, downTo int64) ([]version, error) {
	start := AppendVersionedKey(s.kbuf[:0], key, from)
	s.kbuf = start
	prefix := start[:len(start)-8]
	end := append(bytes.Clone(prefix[:len(prefix)-1]), 2)
	var out []version
	var derr error
	err := s.kv.Range(start, end, func(k, v []byte) bool {
		ts := invertTS(binary.BigEndian.Uint64(k[len(k)-8:]))
		ver, err := decodeVersion(ts, v)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, ver)
		return ts > downTo
	})
	if err == nil {
		err = derr
	}
	return out, err
}

func (s *VersionedKeyValue) Get(key []byte) ([]byte, int64, bool, error) {
	vs, err := s.versions(key, math.MaxInt64, math.MaxInt64)
	if err != nil {
		return nil, 0, false, s.errorf("get latest: %w", err)
	}
	if len(vs) == 0 || vs[0].tombstone {
		return nil, 0, false, nil
	}
	return vs[0].value, vs[0].ts, true, nil
}

func (s *VersionedKeyValue) GetAsOf(key []byte, asOf int64) ([]byte, int64, bool, error) {
	if err := s.load(); err != nil {
		return nil, 0, false, err
	}
	if asOf < s.cutoff() {
		// History older than the cutoff is not answered, but the latest
		// version never expires: when it is valid at asOf it is the
		// answer, as in Kafka Streams' RocksDBVersionedStore.
		vs, err := s.versions(key, math.MaxInt64, math.MaxInt64)
		if err != nil {
			return nil, 0, false, s.errorf("get as of %d: %w", asOf, err)
		}
		if len(vs) == 0 || vs[0].tombstone || vs[0].ts > asOf {
			return nil, 0, false, nil
		}
		return vs[0].value, vs[0].ts, true, nil
	}
	vs, err := s.versions(key, asOf, math.MaxInt64)
	if err != nil {
		return nil, 0, false, s.errorf("get as of %d: %w", asOf, err)
	}
	if len(vs) == 0 || vs[0].tombstone {
		return nil, 0, false, nil
	}
	return vs[0].value, vs[0].ts, true, nil
}

func (s *VersionedKeyValue) LatestTimestamp(key []byte) (int64, bool, error) {
	vs, err := s.versions(key, math.MaxInt64, math.MaxInt64)
	if err != nil {
		return 0, false, s.errorf("get latest timestamp: %w", err)
	}
	if len(vs) == 0 {
		return 0, false, nil
	}
	return vs[0].ts, true, nil
}

func (s *VersionedKeyValue) Put(key []byte, ts int64, value []byte) error {
	if err := s.load(); err != nil {
		return err
	}
	if ts < s.cutoff() {
		return nil
	}
	if err := s.put(key, ts, value); err != nil {
		return s.errorf("put version at %d: %w", ts, err)
	}
	if ts > s.st {
		s.st = ts
		if err := s.kv.Put(versionedMetaKey, binary.BigEndian.AppendUint64(nil, uint64(ts))); err != nil {
			return s.errorf("put observed stream time: %w", err)
		}
	}
	if err := s.expire(s.cutoff()); err != nil {
		return s.errorf("expire versions: %w", err)
	}
	return nil
}

// put writes the version and keeps the expiry index of it and of the
// version it follows right.
func (s *VersionedKeyValue) put(key []byte, ts int64, value []byte) error {
	// The versions newer than ts, and the one at or before it (old).
	all, err := s.versions(key, math.MaxInt64, ts)
	if err != nil {
		return err
	}
	var next *version
	var old *version
	for i := range all {
		if all[i].ts > ts {
			next = &all[i]
			continue
		}
		old = &all[i]
		break
	}
	nextTS := int64(0)
	if next != nil {
		nextTS = next.ts
	}
	dk := AppendVersionedKey(nil, key, ts)
	newV := version{ts: ts, value: value, tombstone: value == nil}

	if old != nil && (!old.tombstone || old.ts == ts) {
		// A value's expiry moves to ts (or the version is replaced); a
		// delete's stays its own timestamp.
		oldKey := AppendVersionedKey(nil, key, old.ts)
		if e, ok := old.expiry(nextTS, next != nil); ok {
			if err := s.kv.Delete(indexKey(e, oldKey)); err != nil {
				return fmt.Errorf("delete expiry index: %w", err)
			}
		}
		if old.ts != ts {
			// old now ends where the new version starts.
			if e, ok := old.expiry(ts, true); ok {
				if err := s.index(e, oldKey); err != nil {
					return err
				}
			}
		}
	}
	raw := []byte{0}
	if !newV.tombstone {
		raw = append([]byte{1}, value...)
	}
	if err := s.kv.Put(dk, raw); err != nil {
		return fmt.Errorf("put version: %w", err)
	}
	if e, ok := newV.expiry(nextTS, next != nil); ok {
		if err := s.index(e, dk); err != nil {
			return err
		}
	}
	return nil
}

func (s *VersionedKeyValue) index(expiry int64, dataKey []byte) error {
	if err := s.kv.Put(indexKey(expiry, dataKey), versionedIndexOn); err != nil {
		return fmt.Errorf("put expiry index: %w", err)
	}
	s.lowest = min(s.lowest, expiry)
	return nil
}

// expire deletes every version whose expiry is at or before cut, with its
// index entry.
func (s *VersionedKeyValue) expire(cut int64) error {
	if cut < s.lowest || cut == math.MinInt64 {
		return nil
	}
	// The scan starts at lowest, not at the index's start: no entry lies
	// below it (index lowers it on every insert; it is unknown, the whole
	// index, until the first scan of a new wrapper, as after a restart or
	// an abort, which reinstantiates the task), only the tombstones of the
	// entries expired before, which a Badger store keeps until compaction;
	// from the start, every put's expiry stepped over all of them again.
	from := []byte{versionedIndexPrefix}
	if s.lowest != math.MinInt64 {
		from = binary.BigEndian.AppendUint64(from, uint64(s.lowest)^(1<<63))
	}
	to := binary.BigEndian.AppendUint64([]byte{versionedIndexPrefix}, uint64(cut)^(1<<63)+1)
	if cut == math.MaxInt64 {
		to = []byte{versionedIndexPrefix + 1}
	}
	s.due = s.due[:0]
	if err := s.kv.Range(from, to, func(k, _ []byte) bool {
		s.due = append(s.due, bytes.Clone(k))
		return true
	}); err != nil {
		return fmt.Errorf("scan expiry index: %w", err)
	}
	for _, k := range s.due {
		if len(k) < 9+2+8 {
			return fmt.Errorf("corrupt expiry index key (%d bytes)", len(k))
		}
		if err := s.kv.Delete(k); err != nil {
			return fmt.Errorf("delete expiry index: %w", err)
		}
		dk := append([]byte{versionedDataPrefix}, k[9:]...)
		if err := s.kv.Delete(dk); err != nil {
			return fmt.Errorf("delete version: %w", err)
		}
	}
	// The next scan is due once cut reaches the oldest expiry left.
	s.lowest = math.MaxInt64
	if err := s.kv.Range(to, []byte{versionedIndexPrefix + 1}, func(k, _ []byte) bool {
		if len(k) >= 9 {
			s.lowest = int64(binary.BigEndian.Uint64(k[1:9]) ^ (1 << 63))
		}
		return false
	}); err != nil {
		return fmt.Errorf("scan expiry index: %w", err)
	}
	return nil
}

func (s *VersionedKeyValue) Range(from, to []byte, fn func(key, value []byte, ts int64) bool) error {
	// esc is order-preserving and prefix-free, so the versions of the keys
	// in [from, to) are the data keys in [0x01 esc(from), 0x01 esc(to)),
	// the terminator left off.
	lo, hi := []byte{versionedDataPrefix}, []byte{versionedDataPrefix + 1}
	if from != nil {
		lo = appendVersionedPrefix(lo, from)
		lo = lo[:len(lo)-2]
	}
	if to != nil {
		hi = appendVersionedPrefix([]byte{versionedDataPrefix}, to)
		hi = hi[:len(hi)-2]
	}
	// A key's latest version comes first; its older versions follow, and
	// after them, in a Badger store, the deletes of its expired versions
	// until compaction. Reading on through them, a Range stepped over the
	// key's whole history. At the first older version of a key the read
	// starts again after the key: 0x01 esc(key) 0x00 0x02 is above every
	// version of key (its terminator is 0x00 0x01) and below every other
	// key after it. (A key whose history window holds no older version
	// shows nothing to stop at: the deletes behind its latest version are
	// still stepped over, as a new read per key would cost every key.)
	var last []byte
	for {
		var next []byte
		var derr error
		stopped := false
		err := s.kv.Range(lo, hi, func(k, v []byte) bool {
			key, ts, err := ParseVersionedKey(k)
			if err == nil && last != nil && bytes.Equal(key, last) {
				next = appendVersionedPrefix([]byte{versionedDataPrefix}, key)
				next[len(next)-1] = 2
				return false // an older version: skip the rest of key
			}
			var ver version
			if err == nil {
				ver, err = decodeVersion(ts, v)
			}
			if err != nil {
				derr = err
				return false
			}
			last = key
			if ver.tombstone {
				return true
			}
			if !fn(key, ver.value, ts) {
				stopped = true
				return false
			}
			return true
		})
		if err == nil {
			err = derr
		}
		if err != nil {
			return s.errorf("range: %w", err)
		}
		if stopped || next == nil || bytes.Compare(next, hi) >= 0 {
			return nil
		}
		lo = next
	}
}
