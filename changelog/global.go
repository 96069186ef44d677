package changelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"maps"
	"os"
	"sync"
	"sync/atomic"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/tidemark-streams/tidemark/store"
)

// GlobalStore is an instance's local copy of a global table
// (topology.GlobalTable): a key-value store in a Badger DB of its own,
// <stateDir>/global/<store>, filled from every partition of its source
// topic. The topic is its changelog; the store never produces anything.
//
// Unlike task stores it is shared: the runtime's global goroutine writes it
// with Apply while any number of tasks read it with Get and Range. Every
// read and every Apply is a Badger transaction, so a reader sees the
// store either before or after an Apply's batch, never a torn record, and
// needs no lock.
//
// Next to the data, the store records its position: per partition of the
// topic, the next offset to read. Apply writes the position in the same
// Badger transaction as the batch's last records (a batch too large for
// one transaction commits its first records earlier: re-reading them from
// the older position after a crash rewrites the same values in the same
// order, so state converges). A restart reads only the topic's tail. A
// missing, unreadable or foreign position (another topic), or a Badger
// directory that does not open or fails OpenDB's checks of a task DB
// (damaged tables, a MANIFEST lost), means a full reload: the data is
// dropped (a damaged directory is moved aside) and the topic read from
// its start.
type GlobalStore struct {
	name, topic, dir string
	bdb              *badger.DB
	log              *slog.Logger
	closed           atomic.Bool
	minFree          int64 // Options.MinFreeDisk

	mu  sync.Mutex // guards pos; Apply has one caller, Position many
	pos map[int32]int64
}

var (
	_ store.KeyValue = (*GlobalStore)(nil)

	globalDataPrefix  = []byte{'d'}
	globalPositionKey = []byte("m/position")
)

// globalPositionVersion is the first byte of an encoded position.
const globalPositionVersion = 1

// GlobalRecord is one record of a global topic, as Apply writes it: Value
// nil deletes Key.
type GlobalRecord struct {
	Key, Value []byte
}

// OpenGlobalStore opens (or creates) the global store name, fed from topic,
// in dir. Reload reports whether its local state was missing or unusable,
// so the store starts empty and the topic must be read from its start.
func OpenGlobalStore(dir, name, topic string, opts Options) (gs *GlobalStore, reload string, err error) {
	opts.ensureDefaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("changelog: global store %q: create %s: %w", name, dir, err)
	}
	g := &GlobalStore{name: name, topic: topic, dir: dir, log: opts.Logger.With("global_store", name), minFree: opts.MinFreeDisk}
	// A global DB shares the budget's caches with the task DBs: a quarter
	// of what one task DB gets alone.
	bopts := badgerOptions(dir, opts, normalMode, 4)
	// Verified first, as a task DB is (verifyTables): Badger panics on
	// some damaged tables in goroutines of its own, which kills the
	// process at every start, and a MANIFEST lost or cut short leaves the
	// memtable logs' latest position over older data.
	err = checkManifest(dir)
	if err == nil && !opts.NoVerifyChecksums {
		err = verifyTables(dir, bopts)
	}
	if err == nil {
		g.bdb, err = openBadger(bopts, opts.Logger)
	} else if !IsCorrupt(err) {
		return nil, "", fmt.Errorf("changelog: global store %q: %w", name, err)
	}
	if err == nil && !opts.NoVerifyChecksums {
		// The table check does not read the value log; a damaged value
		// there would be served as an empty one (lostValue).
		if err = g.verifyValues(); err != nil {
			_ = g.bdb.Close()
			g.bdb = nil
			if !IsCorrupt(err) {
				return nil, "", fmt.Errorf("changelog: global store %q: %w", name, err)
			}
		}
	}
	if err != nil {
		if isLockErr(err) {
			return nil, "", fmt.Errorf("changelog: global store %q: %s in use by another process: %w", name, dir, err)
		}
		moved, merr := moveAside(dir, "local state of a global store is damaged", err, g.log)
		if merr != nil {
			return nil, "", fmt.Errorf("changelog: global store %q: %w", name, merr)
		}
		reload = "local state unreadable, moved to " + moved
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, "", fmt.Errorf("changelog: global store %q: create %s: %w", name, dir, err)
		}
		if g.bdb, err = openBadger(bopts, opts.Logger); err != nil {
			return nil, "", fmt.Errorf("changelog: global store %q: open %s: %w", name, dir, err)
		}
	}
	if reload == "" {
		g.pos, reload = g.readPosition()
	}
	if g.pos == nil {
		if err := g.bdb.DropAll(); err != nil {
			_ = g.bdb.Close()
			return nil, "", fmt.Errorf("changelog: global store %q: drop local state for a full reload: %w", name, err)
		}
		g.pos = map[int32]int64{}
	}
	return g, reload, nil
}

// readPosition reads the recorded position, or returns nil and why the
// store must be reloaded.
func (g *GlobalStore) readPosition() (map[int32]int64, string) {
	var raw []byte
	err := g.bdb.View(func(txn *badger.Txn) error {
		it, err := txn.Get(globalPositionKey)
		if err != nil {
			return err
		}
		raw, err = it.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, "no recorded position"
	}
	if err != nil {
		return nil, fmt.Sprintf("position unreadable: %v", err)
	}
	topic, pos, err := decodeGlobalPosition(raw)
	if err != nil {
		return nil, fmt.Sprintf("position corrupt: %v", err)
	}
	if topic != g.topic {
		return nil, fmt.Sprintf("state is of topic %q", topic)
	}
	return pos, ""
}

// encodeGlobalPosition: version, topic (u16 length), count (u32), then
// (partition i32, next offset i64) pairs, then a CRC-32C of all before.
func encodeGlobalPosition(topic string, pos map[int32]int64) []byte {
	b := []byte{globalPositionVersion}
	b = binary.BigEndian.AppendUint16(b, uint16(len(topic)))
	b = append(b, topic...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(pos)))
	for p, off := range pos {
		b = binary.BigEndian.AppendUint32(b, uint32(p))
		b = binary.BigEndian.AppendUint64(b, uint64(off))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

func decodeGlobalPosition(b []byte) (string, map[int32]int64, error) {
	if len(b) < 1+2+4+4 || b[0] != globalPositionVersion {
		return "", nil, fmt.Errorf("%w: %d bytes of global store position", ErrCorrupt, len(b))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)) != sum {
		return "", nil, fmt.Errorf("%w: global store position checksum mismatch", ErrCorrupt)
	}
	tl := int(binary.BigEndian.Uint16(body[1:]))
	if len(body) < 3+tl+4 {
		return "", nil, fmt.Errorf("%w: global store position truncated", ErrCorrupt)
	}
	topic := string(body[3 : 3+tl])
	rest := body[3+tl:]
	n := int(binary.BigEndian.Uint32(rest))
	rest = rest[4:]
	if len(rest) != n*12 {
		return "", nil, fmt.Errorf("%w: global store position of %d partitions has %d bytes", ErrCorrupt, n, len(rest))
	}
	pos := make(map[int32]int64, n)
	for i := range n {
		pos[int32(binary.BigEndian.Uint32(rest[i*12:]))] = int64(binary.BigEndian.Uint64(rest[i*12+4:]))
	}
	return topic, pos, nil
}

// Position is the next offset to read of each partition recorded so far;
// a partition that is absent is read from its start.
func (g *GlobalStore) Position() map[int32]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.pos)
}

// Apply writes recs, in order, and moves the position of the partitions in
// pos. It must not be called concurrently with itself or Reset.
func (g *GlobalStore) Apply(recs []GlobalRecord, pos map[int32]int64) error {
	if g.closed.Load() {
		return store.ErrClosed
	}
	if len(recs) > 0 {
		if err := checkSpace(Options{MinFreeDisk: g.minFree}, g.dir, fmt.Sprintf("global store %q", g.name)); err != nil {
			return err
		}
	}
	next := g.Position()
	maps.Copy(next, pos)
	txn := g.bdb.NewTransaction(true)
	defer func() { txn.Discard() }()
	write := func(f func() error) error {
		err := f()
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = txn.Commit(); err != nil {
				return err
			}
			txn = g.bdb.NewTransaction(true)
			err = f()
		}
		return err
	}
	for _, r := range recs {
		k := append(append(make([]byte, 0, 1+len(r.Key)), globalDataPrefix...), r.Key...)
		var err error
		if r.Value == nil {
			err = write(func() error { return txn.Delete(k) })
		} else {
			err = write(func() error { return txn.Set(k, r.Value) })
		}
		if err != nil {
			return fmt.Errorf("changelog: global store %q: write: %w", g.name, err)
		}
	}
	enc := encodeGlobalPosition(g.topic, next)
	if err := write(func() error { return txn.Set(globalPositionKey, enc) }); err != nil {
		return fmt.Errorf("changelog: global store %q: write position: %w", g.name, err)
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("changelog: global store %q: commit: %w", g.name, err)
	}
	g.mu.Lock()
	g.pos = next
	g.mu.Unlock()
	return nil
}

// Reset drops the data and the position, for a full reload (the topic was
// recreated, or truncated below the position).
func (g *GlobalStore) Reset() error {
	if err := g.bdb.DropAll(); err != nil {
		return fmt.Errorf("changelog: global store %q: reset: %w", g.name, err)
	}
	g.mu.Lock()
	g.pos = map[int32]int64{}
	g.mu.Unlock()
	return nil
}

// Name implements store.Store.
func (g *GlobalStore) Name() string { return g.name }

// Kind implements store.Store.
func (g *GlobalStore) Kind() store.Kind { return store.KindKeyValue }

// Get implements store.KeyValue; it is safe for concurrent use.
func (g *GlobalStore) Get(key []byte) (value []byte, found bool, err error) {
	if g.closed.Load() {
		return nil, false, store.ErrClosed
	}
	k := append(append(make([]byte, 0, 1+len(key)), globalDataPrefix...), key...)
	err = g.bdb.View(func(txn *badger.Txn) error {
		it, err := txn.Get(k)
		if err != nil {
			return err
		}
		if value, err = it.ValueCopy(nil); err != nil {
			return readErr(err)
		}
		return lostValue(it, value)
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, g.readError("get", err)
	}
	return value, true, nil
}

// Range implements store.KeyValue on one consistent snapshot; it is safe
// for concurrent use.
func (g *GlobalStore) Range(from, to []byte, fn func(key, value []byte) bool) error {
	if g.closed.Load() {
		return store.ErrClosed
	}
	err := g.bdb.View(func(txn *badger.Txn) error {
		start := append(append([]byte(nil), globalDataPrefix...), from...)
		var end []byte
		if to != nil {
			end = append(append([]byte(nil), globalDataPrefix...), to...)
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: rangePrefix(globalDataPrefix, start, end), PrefetchValues: false})
		defer it.Close()
		for it.Seek(start); it.Valid(); it.Next() {
			item := it.Item()
			k := item.Key()
			if end != nil && bytes.Compare(k, end) >= 0 {
				return nil
			}
			var goOn bool
			if err := item.Value(func(v []byte) error {
				if err := lostValue(item, v); err != nil {
					return err
				}
				goOn = fn(k[len(globalDataPrefix):], v)
				return nil
			}); err != nil {
				return readErr(err)
			}
			if !goOn {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return g.readError("range", err)
	}
	return nil
}

// Put is refused: only the global topic writes a global store.
func (g *GlobalStore) Put(_, _ []byte) error {
	return fmt.Errorf("changelog: global store %q: %w", g.name, ErrGlobalReadOnly)
}

// Delete is refused: only the global topic writes a global store.
func (g *GlobalStore) Delete([]byte) error { return g.Put(nil, nil) }

// ErrGlobalReadOnly is returned by Put and Delete of a GlobalStore: only
// its topic writes it.
var ErrGlobalReadOnly = errors.New("global stores are written only by their topic")

// Close syncs and closes the DB; readers must be done.
func (g *GlobalStore) Close() error {
	if g.closed.Swap(true) {
		return nil
	}
	if err := g.bdb.Close(); err != nil {
		return fmt.Errorf("changelog: global store %q: close: %w", g.name, err)
	}
	return nil
}

// verifyValues reads every value of the store once, so a value damaged in
// the value log (which OpenDB's table check does not read) is found when
// the store opens, as ErrCorrupt, and the store reloaded from its topic,
// rather than served as an empty value to the tasks that join with it.
func (g *GlobalStore) verifyValues() error {
	return g.bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, AllVersions: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			if err := item.Value(func(v []byte) error { return lostValue(item, v) }); err != nil {
				return fmt.Errorf("verify values: %w", readErr(err))
			}
		}
		return nil
	})
}

// ErrGlobalCorrupt is wrapped, with ErrCorrupt, by a global store read
// that met damaged state: rebuilding a task's state does not repair it;
// the store's next open finds the damage and reloads it from its topic.
var ErrGlobalCorrupt = errors.New("global store damaged")

func (g *GlobalStore) readError(op string, err error) error {
	if IsCorrupt(err) {
		return fmt.Errorf("changelog: global store %q (%s): %s: %w: %w", g.name, g.dir, op, ErrGlobalCorrupt, err)
	}
	return fmt.Errorf("changelog: global store %q: %s: %w", g.name, op, err)
}
