package changelog

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/google/btree"

	"github.com/tidemark-streams/tidemark/store"
)

// ErrFlushed is returned by writes after Flush and before Apply or Discard:
// those writes are in no changelog record of the transaction being
// committed, so applying them would put Badger ahead of Kafka.
var ErrFlushed = errors.New("changelog: write after Flush before Apply or Discard")

// TaskStateConfig identifies a task to its stores.
type TaskStateConfig struct {
	// ID is the task's id, which names its Badger DB (<dir>/tasks/<ID>):
	// Kafka Streams' "<sub-topology>_<partition>" in the runtime. Letters,
	// digits, '_' and '-'. Default "p<Partition>". TaskStates with the
	// same ID share one DB; a large restore is faster in a DB of its own.
	ID string
	// AppID names the changelog topics: "<AppID>-<store>-changelog".
	AppID string
	// Partition of the task; every store of the task is opened on it and
	// its changelog records go to this partition.
	Partition int32
	// Producer takes the task's changelog records. Required when a logged
	// store is opened.
	Producer Producer
	// Logger for restore progress; default the DB's logger with the task's
	// coordinates.
	Logger *slog.Logger
}

// TaskState holds the stores of one task (one partition of one sub-topology)
// and their uncommitted writes, the overlay. It implements store.Provider.
// A TaskState is used from its task's goroutine only.
//
// Lifecycle per commit: writes → Flush (changelog records into the
// transaction) → commit → Apply(offsets), or Discard on abort.
type TaskState struct {
	db  *DB
	tdb *taskDB // the task's Badger DB, from the first Open on
	cfg TaskStateConfig
	log *slog.Logger

	stores  map[string]*storeState
	pending *btree.BTreeG[*entry]
	// index holds pending's entries by key: a point read or a write of a
	// key the transaction already wrote is one map lookup instead of a
	// btree descent (a count over hot keys: 45% of the state's CPU). The
	// btree stays for what needs key order: scans, Flush, Apply.
	index map[string]*entry
	// gen counts Seals: an entry written since the last Seal has the
	// current gen and may change in place; an older one is the sealed
	// layer's and is replaced.
	gen uint64
	// sealed is the overlay of the transaction being committed while
	// pending already takes the next one's writes (layered.go); nil
	// otherwise.
	sealed  *btree.BTreeG[*entry]
	kbuf    []byte
	rtxn    *badger.Txn // read snapshot, renewed after every Apply
	cache   readCache   // committed values of key-value stores (readcache.go)
	flushed bool
	// stagedPos is the input position the transaction being prepared
	// commits (StagePosition); sentPos the last one a committed flush wrote
	// to the changelogs, so an unchanged position is not written again.
	stagedPos, sentPos InputPosition
	closed             bool
	view               *snapView // set on the read-only tasks of a Snapshot
}

// entry is one uncommitted write: a put, or a delete (del) that hides what
// Badger holds under key.
type entry struct {
	key   []byte // full data key: 'd' + store id + suffix
	value []byte
	del   bool
	st    *storeState
	gen   uint64 // the TaskState's gen when the entry was created
}

func lessEntry(a, b *entry) bool { return bytes.Compare(a.key, b.key) < 0 }

// storeState is what a TaskState knows of one of its stores.
type storeState struct {
	spec    store.Spec
	id      []byte // storeID(name, partition)
	dprefix []byte // 'd' + id
	topic   string
	topicID [16]byte // the changelog's id, learned by Restore
	cut     int64    // expiry cut applied to Badger
	newCut  int64    // expiry cut requested since the last Apply
	sealCut int64    // newCut when the overlay was sealed (layered.go)
	closed  bool
}

// NewTaskState returns a task's state on db. Open its stores, then Restore
// them before processing.
func (db *DB) NewTaskState(cfg TaskStateConfig) *TaskState {
	if cfg.ID == "" {
		cfg.ID = defaultTaskID(cfg.Partition)
	}
	l := cfg.Logger
	if l == nil {
		l = db.log.With("app", cfg.AppID, "task", cfg.ID)
	}
	return &TaskState{
		db:      db,
		cfg:     cfg,
		log:     l,
		stores:  map[string]*storeState{},
		pending: btree.NewG(32, lessEntry),
	}
}

// TopicName is the changelog topic of a store.
func TopicName(appID, storeName string) string { return appID + "-" + storeName + "-changelog" }

var _ store.Provider = (*TaskState)(nil)

// Open returns the task's store for spec; partition must be the task's. The
// first Open opens the task's Badger DB. The store is registered in it (so
// tidemark state can list it) and its persisted expiry cut is loaded.
func (t *TaskState) Open(spec store.Spec, partition int32) (store.Store, error) {
	if t.closed {
		return nil, store.ErrClosed
	}
	if partition != t.cfg.Partition {
		return nil, fmt.Errorf("changelog: open store %q partition %d on the task of partition %d", spec.Name, partition, t.cfg.Partition)
	}
	if spec.Name == "" {
		return nil, fmt.Errorf("changelog: open store partition %d: spec has no name", partition)
	}
	if spec.Logged && t.cfg.Producer == nil {
		return nil, fmt.Errorf("changelog: open logged store %q partition %d: task has no Producer", spec.Name, partition)
	}
	if st, ok := t.stores[spec.Name]; ok && !st.closed {
		return nil, fmt.Errorf("changelog: store %q partition %d is already open", spec.Name, partition)
	}
	st := &storeState{
		spec:  spec,
		id:    storeID(spec.Name, partition),
		topic: TopicName(t.cfg.AppID, spec.Name),
	}
	st.dprefix = withNS(nsData, st.id)
	if err := t.openDB(); err != nil {
		return nil, fmt.Errorf("changelog: open store %q partition %d: %w", spec.Name, partition, err)
	}
	if err := t.tdb.register(st.id, st.spec.Kind, st.topic); err != nil {
		return nil, fmt.Errorf("changelog: open store %q partition %d: %w", spec.Name, partition, err)
	}
	cut, err := t.tdb.readCut(st.id)
	if err != nil {
		return nil, fmt.Errorf("changelog: open store %q partition %d: %w", spec.Name, partition, err)
	}
	st.cut, st.newCut = cut, cut
	t.stores[spec.Name] = st
	switch spec.Kind {
	case store.KindKeyValue:
		return &kvStore{t: t, st: st}, nil
	case store.KindWindow:
		return &windowStore{t: t, st: st}, nil
	case store.KindSession:
		return &sessionStore{t: t, st: st}, nil
	}
	delete(t.stores, spec.Name)
	return nil, fmt.Errorf("changelog: open store %q partition %d: unknown kind %d", spec.Name, partition, int(spec.Kind))
}

// Pending returns the number of uncommitted writes.
func (t *TaskState) Pending() int { return t.pending.Len() }

// Discard drops the overlay: the transaction it belonged to aborted. With
// a sealed layer (Seal) both layers go: the live one was computed from it.
func (t *TaskState) Discard() {
	t.stagedPos = nil
	t.clearPending()
	t.sealed = nil
	for _, st := range t.stores {
		st.newCut = st.cut
	}
	t.flushed = false
}

// openDB opens the task's Badger DB if it is not open yet.
func (t *TaskState) openDB() error {
	if t.tdb != nil {
		return nil
	}
	if !validTaskID(t.cfg.ID) {
		return fmt.Errorf("changelog: task id %q: want letters, digits, '_' and '-'", t.cfg.ID)
	}
	tdb, err := t.db.acquire(t.cfg.ID, false)
	if err != nil {
		return err
	}
	t.tdb = tdb
	return nil
}

// Close discards the overlay and releases the read snapshot and the
// task's Badger DB, which closes when no other user holds it.
func (t *TaskState) Close() error {
	t.Discard()
	if t.closed {
		return nil
	}
	t.closed = true
	for _, st := range t.stores {
		st.closed = true
	}
	t.resetSnapshot()
	if t.tdb != nil && t.view == nil {
		t.db.release(t.tdb)
	}
	return nil
}

// snapshot returns the task's read snapshot of Badger: nil for the store
// of a Snapshot that no task DB holds, which reads as empty.
func (t *TaskState) snapshot() *badger.Txn {
	if t.rtxn == nil {
		if t.tdb == nil {
			return nil
		}
		t.rtxn = t.tdb.bdb.NewTransaction(false)
	}
	return t.rtxn
}

// resetSnapshot drops the read snapshot and, with it, the read cache:
// whatever made the snapshot stale may have changed what it cached.
// ApplyAt, which knows what it wrote, uses dropSnapshot.
func (t *TaskState) resetSnapshot() {
	t.cache.clear()
	t.dropSnapshot()
}

func (t *TaskState) dropSnapshot() {
	if t.rtxn != nil {
		t.rtxn.Discard()
		t.rtxn = nil
	}
}

func (t *TaskState) check(st *storeState, write bool) error {
	if t.closed || st.closed {
		return store.ErrClosed
	}
	if write && t.flushed {
		return fmt.Errorf("store %q partition %d: %w", st.spec.Name, t.cfg.Partition, ErrFlushed)
	}
	return nil
}

// key returns st's full data key for suffix in the task's scratch buffer.
func (t *TaskState) key(st *storeState, suffix []byte) []byte {
	t.kbuf = append(append(t.kbuf[:0], st.dprefix...), suffix...)
	return t.kbuf
}

// get reads a full data key through the overlay.
func (t *TaskState) get(key []byte) ([]byte, bool, error) {
	if v, ok, found := t.overlayGet(key); found {
		return v, ok, nil
	}
	return t.readBadger(key)
}

// overlayGet looks key up in the overlay: found reports whether the
// overlay decides it (a put or a delete).
func (t *TaskState) overlayGet(key []byte) (v []byte, ok, found bool) {
	e, hit := t.index[string(key)]
	if !hit {
		return nil, false, false
	}
	if e.del {
		return nil, false, true
	}
	return e.value, true, true
}

// insertPending puts e into the overlay, in place of any entry of its key.
func (t *TaskState) insertPending(e *entry) {
	if t.index == nil {
		t.index = map[string]*entry{}
	}
	t.pending.ReplaceOrInsert(e)
	t.index[string(e.key)] = e
}

// clearPending empties the overlay.
func (t *TaskState) clearPending() {
	t.pending.Clear(false)
	clear(t.index)
}

// readBadger reads a full data key through the read snapshot.
func (t *TaskState) readBadger(key []byte) (_ []byte, _ bool, err error) {
	defer t.recoverRead(&err, nil)
	txn := t.snapshot()
	if txn == nil {
		return nil, false, nil
	}
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, readErr(err)
	}
	v, err := item.ValueCopy(nil)
	if err == nil {
		err = lostValue(item, v)
	}
	if err != nil {
		return nil, false, readErr(err)
	}
	return v, true, nil
}

// recoverRead is recoverRead (corrupt.go) for the task's reads; after a
// panic inside Badger it also drops the read snapshot, whose state is
// unknown.
func (t *TaskState) recoverRead(err *error, inFn *bool) {
	r := recover()
	if r == nil {
		return
	}
	if inFn != nil && *inFn {
		panic(r)
	}
	*err = caughtPanic(t.log, t.closedFlag(), r)
	txn := t.rtxn
	t.rtxn = nil
	if txn != nil {
		func() {
			defer func() { _ = recover() }() // an iterator left open: leave the snapshot to the GC
			txn.Discard()
		}()
	}
}

// set records a put (value != nil) or delete of a full data key.
func (t *TaskState) set(st *storeState, key, value []byte) {
	e, ok := t.index[string(key)]
	switch {
	case !ok:
		e = &entry{key: bytes.Clone(key), st: st, gen: t.gen}
		t.insertPending(e)
	case e.gen != t.gen:
		// The sealed layer's entry: replace it, never change it in place
		// (layered.go).
		e = &entry{key: e.key, st: st, gen: t.gen}
		t.insertPending(e)
	}
	if value == nil {
		e.value, e.del = nil, true
		return
	}
	e.value = append(make([]byte, 0, len(value)), value...)
	e.del = false
}

// scan calls fn for the live entries with full keys in [lo, hi), the
// overlay merged over the snapshot, in key order. fn must not write to the
// task's stores.
func (t *TaskState) scan(st *storeState, lo, hi []byte, fn func(key, value []byte) bool) (err error) {
	if hi != nil && bytes.Compare(lo, hi) >= 0 {
		return nil
	}
	var inFn bool
	defer t.recoverRead(&err, &inFn)
	txn := t.snapshot()
	if txn == nil {
		return nil // a snapshot's empty view: no overlay either
	}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: rangePrefix(st.dprefix, lo, hi)})
	defer it.Close()
	it.Seek(lo)
	var ierr error
	stopped := false
	// emit sends Badger's entries below limit (all of them when limit is
	// nil) and skips one equal to limit: the overlay shadows it.
	emit := func(limit []byte) bool {
		for ; it.Valid(); it.Next() {
			item := it.Item()
			k := item.Key()
			if hi != nil && bytes.Compare(k, hi) >= 0 {
				return true
			}
			if limit != nil {
				if c := bytes.Compare(k, limit); c >= 0 {
					if c == 0 {
						it.Next()
					}
					return true
				}
			}
			more := true
			err := item.Value(func(v []byte) error {
				if err := lostValue(item, v); err != nil {
					return err
				}
				inFn = true
				more = fn(k, v)
				inFn = false
				return nil
			})
			if err != nil {
				ierr = readErr(err)
				return false
			}
			if !more {
				return false
			}
		}
		return true
	}
	visit := func(e *entry) bool {
		if !emit(e.key) {
			stopped = true
			return false
		}
		if e.del {
			return true
		}
		inFn = true
		more := fn(e.key, e.value)
		inFn = false
		if !more {
			stopped = true
			return false
		}
		return true
	}
	if hi == nil {
		t.pending.AscendGreaterOrEqual(&entry{key: lo}, visit)
	} else {
		t.pending.AscendRange(&entry{key: lo}, &entry{key: hi}, visit)
	}
	if !stopped {
		emit(nil)
	}
	return ierr
}

// closedFlag says whether the task's DB was closed under a read (see
// recoverRead).
func (t *TaskState) closedFlag() *atomic.Bool {
	if t.tdb == nil {
		return &t.db.closed
	}
	return &t.tdb.closed
}

// cutOf is the expiry cut reads apply: entries below it are gone even if
// Badger still holds them until the next Apply.
func (st *storeState) cutOf() int64 { return max(st.cut, st.newCut) }

const minTime = math.MinInt64
