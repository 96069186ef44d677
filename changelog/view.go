package changelog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/google/btree"

	"github.com/tidemark-streams/tidemark/store"
)

// Reading committed state from outside the tasks: interactive queries.
//
// Badger holds exactly the committed state (see the package doc), so a
// read-only Badger transaction is a consistent view of the committed state
// of every store, as of the Applies that finished before it was opened. A
// Snapshot is such a view, with the stores' contracts on top: it reads
// concurrently with the tasks, their Applies and restores, and never sees
// an overlay.
//
// Every Apply that is given one also records the task's input position
// (ApplyAt), in the same atomic step as the data and the changelog
// offsets, so a snapshot's position and data always agree. A staged Apply
// is atomic for a restart but not for a reader: between its commit point
// (the applied marker, written with the offsets and the position) and the
// end of its copy, Badger holds the new position with only part of the
// data. Snapshot waits until no applied marker is left, so a reader never
// sees a position ahead of its data.

// metaPosition is the meta sub-space of the input positions: store id ->
// encodePosition.
const metaPosition = 'p'

// InputPosition is what a state reflects of its inputs: for each input topic
// and partition, the next offset to read (one past the last record the
// state reflects). It is the position of Kafka Streams' interactive
// queries (IQv2); what the state reflects of its changelogs is its
// ChangelogOffsets.
type InputPosition map[string]map[int32]int64

// Offset returns the position of one input partition.
func (p InputPosition) Offset(topic string, partition int32) (int64, bool) {
	off, ok := p[topic][partition]
	return off, ok
}

// Set sets the position of one input partition (p must not be nil).
func (p InputPosition) Set(topic string, partition int32, offset int64) {
	if p[topic] == nil {
		p[topic] = map[int32]int64{}
	}
	p[topic][partition] = offset
}

// Covers reports whether p is at or past bound on every input partition
// bound names. An input partition p does not know is not covered.
func (p InputPosition) Covers(bound InputPosition) bool {
	for topic, parts := range bound {
		for part, off := range parts {
			if have, ok := p.Offset(topic, part); !ok || have < off {
				return false
			}
		}
	}
	return true
}

// Merge adds q to p, keeping the larger offset where both have one.
func (p InputPosition) Merge(q InputPosition) {
	for topic, parts := range q {
		for part, off := range parts {
			if have, ok := p.Offset(topic, part); !ok || off > have {
				p.Set(topic, part, off)
			}
		}
	}
}

// String is "topic:partition:offset" per input partition, comma-separated,
// in topic then partition order: the form ParsePosition reads.
func (p InputPosition) String() string {
	var b strings.Builder
	for _, topic := range slices.Sorted(maps.Keys(p)) {
		for _, part := range slices.Sorted(maps.Keys(p[topic])) {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s:%d:%d", topic, part, p[topic][part])
		}
	}
	return b.String()
}

// ParsePosition reads positions written as String writes them:
// "topic:partition:offset", several separated by commas, in any number of
// arguments. (Kafka topic names cannot hold ':' or ','.)
func ParsePosition(specs ...string) (InputPosition, error) {
	p := InputPosition{}
	for _, spec := range specs {
		for item := range strings.SplitSeq(spec, ",") {
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			fields := strings.Split(item, ":")
			if len(fields) != 3 || fields[0] == "" {
				return nil, fmt.Errorf("position %q: want topic:partition:offset", item)
			}
			part, err := strconv.ParseInt(fields[1], 10, 32)
			if err != nil || part < 0 {
				return nil, fmt.Errorf("position %q: bad partition %q", item, fields[1])
			}
			off, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil || off < 0 {
				return nil, fmt.Errorf("position %q: bad offset %q", item, fields[2])
			}
			p.Set(fields[0], int32(part), off)
		}
	}
	return p, nil
}

// encodePosition is a uvarint count, then per input partition, in String's
// order, the topic's uvarint length and bytes, the partition (4 bytes) and
// the offset (8 bytes).
func encodePosition(p InputPosition) []byte {
	var b []byte
	n := 0
	for _, parts := range p {
		n += len(parts)
	}
	b = binary.AppendUvarint(b, uint64(n))
	for _, topic := range slices.Sorted(maps.Keys(p)) {
		for _, part := range slices.Sorted(maps.Keys(p[topic])) {
			b = binary.AppendUvarint(b, uint64(len(topic)))
			b = append(b, topic...)
			b = binary.BigEndian.AppendUint32(b, uint32(part))
			b = binary.BigEndian.AppendUint64(b, uint64(p[topic][part]))
		}
	}
	return b
}

func decodePosition(b []byte) (InputPosition, error) {
	bad := fmt.Errorf("%w: position of %d bytes", errBadKey, len(b))
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, bad
	}
	b = b[w:]
	p := InputPosition{}
	for range n {
		l, w := binary.Uvarint(b)
		if w <= 0 || l > uint64(len(b)-w) || uint64(len(b)-w)-l < 12 {
			return nil, bad
		}
		topic := string(b[w : w+int(l)])
		b = b[w+int(l):]
		p.Set(topic, int32(binary.BigEndian.Uint32(b)), int64(binary.BigEndian.Uint64(b[4:])))
		b = b[12:]
	}
	if len(b) != 0 {
		return nil, bad
	}
	return p, nil
}

// emitPosition writes pos as the position of every store of the task.
func (t *TaskState) emitPosition(pos InputPosition, emit emitFunc) error {
	v := encodePosition(pos)
	for _, st := range t.stores {
		if err := emit(metaKey(metaPosition, st.id), v, false); err != nil {
			return err
		}
	}
	return nil
}

// RecordPosition records pos as the input position of every store of the
// task, without data: for a task whose restore has just brought its state
// to a known position (the group's committed input offsets, which the
// changelog records a restore reads up to reflect). A nil pos deletes the
// recorded position: unknown until the next ApplyAt. Apply and ApplyAt
// record positions together with the data they reflect.
func (t *TaskState) RecordPosition(pos InputPosition) error {
	if t.closed {
		return store.ErrClosed
	}
	if t.tdb == nil {
		return nil // no stores: no positions
	}
	err := t.tdb.bdb.Update(func(txn *badger.Txn) error {
		if pos == nil {
			for _, st := range t.stores {
				if err := txn.Delete(metaKey(metaPosition, st.id)); err != nil {
					return err
				}
			}
			return nil
		}
		return t.emitPosition(pos, func(key, value []byte, _ bool) error { return txn.Set(key, value) })
	})
	if err != nil {
		return fmt.Errorf("changelog: record position of partition %d: %w", t.cfg.Partition, err)
	}
	return nil
}

// ErrReadOnly is returned by writes to the stores of a Snapshot.
var ErrReadOnly = errors.New("changelog: the stores of a snapshot are read-only")

// Snapshot is a consistent, read-only view of the committed state of every
// store in the open task DBs, with each store's persisted expiry cut
// applied (windows and sessions below it are invisible, as they are to
// tasks). Many Snapshots can be open at once, beside the tasks; one
// Snapshot and the stores it returns are used from one goroutine. Close
// it soon: an open snapshot keeps Badger from discarding the versions it
// reads, and a restore that wants to reopen a task DB waits for it. After
// an error wrapping ErrCorrupt, close it and open no more: the state is
// damaged.
//
// A snapshot holds one read transaction per task DB open when it was
// taken, except those being restored; a store in none of them (its task
// is not open here, or it was restoring) reads as empty.
type Snapshot struct {
	db    *DB
	views []*snapView // by task id
	done  func()      // releases the task DBs
}

// snapView is a snapshot's view of one task DB.
type snapView struct {
	tdb   *taskDB
	txn   *badger.Txn
	tasks map[int32]*TaskState // read-only tasks over txn, one per partition read
}

// snapshotPoll bounds the pause between Snapshot's looks for a staged
// Apply to finish.
const snapshotPoll = 20 * time.Millisecond

// Snapshot opens a snapshot of the committed state. While a staged Apply
// is between its commit point and the end of its copy, it waits, until ctx
// is done.
func (db *DB) Snapshot(ctx context.Context) (*Snapshot, error) {
	pause := time.Millisecond
	for {
		s, busy, err := db.openSnapshot()
		if err != nil {
			return nil, fmt.Errorf("changelog: snapshot of %s: %w", db.dir, err)
		}
		if !busy {
			return s, nil
		}
		s.Close()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("changelog: snapshot of %s: waiting for a staged apply to finish: %w", db.dir, ctx.Err())
		case <-time.After(pause):
		}
		pause = min(2*pause, snapshotPoll)
	}
}

// openSnapshot opens a read transaction on every open task DB and says
// whether one of them sees an applied marker: a staged Apply between its
// commit point and the end of its copy.
func (db *DB) openSnapshot() (s *Snapshot, busy bool, err error) {
	tdbs, done, err := db.readers()
	if err != nil {
		return nil, false, err
	}
	s = &Snapshot{db: db, done: done}
	for _, tdb := range tdbs {
		txn, marked, err := tdb.openSnapshot()
		if err != nil {
			s.Close()
			return nil, false, err
		}
		busy = busy || marked
		s.views = append(s.views, &snapView{tdb: tdb, txn: txn, tasks: map[int32]*TaskState{}})
	}
	return s, busy, nil
}

// openSnapshot opens a read transaction on tdb and says whether it sees an
// applied marker.
func (tdb *taskDB) openSnapshot() (txn *badger.Txn, busy bool, err error) {
	defer func() { // after recoverRead
		if err != nil && txn != nil {
			func() {
				defer func() { _ = recover() }() // an iterator left open: leave the txn to the GC
				txn.Discard()
			}()
			txn = nil
		}
	}()
	defer recoverRead(tdb.db.log, &tdb.closed, &err, nil)
	txn = tdb.bdb.NewTransaction(false)
	mp := metaKey(metaApplied)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: mp})
	it.Rewind()
	busy = it.Valid()
	it.Close()
	return txn, busy, tdb.noteErr(err)
}

// Close releases the snapshot.
func (s *Snapshot) Close() {
	if s.done == nil {
		return
	}
	for _, v := range s.views {
		for _, t := range v.tasks {
			if t.rtxn != v.txn {
				t.resetSnapshot() // one a read opened after a Badger panic dropped txn
			}
			t.rtxn = nil
		}
		v.txn.Discard()
	}
	s.views = nil
	s.done()
	s.done = nil
}

// KeyValue returns the key-value store name of partition as of the
// snapshot. Its writes fail with ErrReadOnly.
func (s *Snapshot) KeyValue(name string, partition int32) (store.KeyValue, error) {
	t, st, err := s.open(name, partition, store.KindKeyValue)
	if err != nil {
		return nil, err
	}
	return snapshotKV{&kvStore{t: t, st: st}}, nil
}

// Window returns the window store name of partition as of the snapshot.
// Its writes fail with ErrReadOnly.
func (s *Snapshot) Window(name string, partition int32) (store.Window, error) {
	t, st, err := s.open(name, partition, store.KindWindow)
	if err != nil {
		return nil, err
	}
	return snapshotWindow{&windowStore{t: t, st: st}}, nil
}

// Session returns the session store name of partition as of the snapshot.
// Its writes fail with ErrReadOnly.
func (s *Snapshot) Session(name string, partition int32) (store.Session, error) {
	t, st, err := s.open(name, partition, store.KindSession)
	if err != nil {
		return nil, err
	}
	return snapshotSession{&sessionStore{t: t, st: st}}, nil
}

// Position returns the input position the snapshot's state of store name,
// partition reflects, as its last Apply or RecordPosition recorded it;
// found=false when none did.
func (s *Snapshot) Position(name string, partition int32) (pos InputPosition, found bool, err error) {
	v, err := s.view(name, partition)
	if err == nil && v != nil {
		found, err = v.meta(metaKey(metaPosition, storeID(name, partition)), func(b []byte) error {
			pos, err = decodePosition(b)
			return err
		})
	}
	if err != nil {
		return nil, false, fmt.Errorf("changelog: read position of store %q partition %d: %w", name, partition, err)
	}
	return pos, found, nil
}

// AppliedOffset returns the changelog offset the snapshot reflects for tp,
// or found=false when the partition was never applied or restored.
func (s *Snapshot) AppliedOffset(tp TopicPartition) (a AppliedOffset, found bool, err error) {
	for _, v := range s.views {
		found, err = v.meta(offsetKey(tp.Topic, tp.Partition), func(b []byte) error {
			a, err = decodeApplied(b)
			return err
		})
		if err != nil {
			return AppliedOffset{}, false, fmt.Errorf("changelog: read applied offset of %s: %w", tp, err)
		}
		if found {
			return a, true, nil
		}
	}
	return AppliedOffset{}, false, nil
}

// view returns the snapshot's view of the task DB that holds store name,
// partition; nil when none does.
func (s *Snapshot) view(name string, partition int32) (*snapView, error) {
	if s.done == nil {
		return nil, store.ErrClosed
	}
	id := storeID(name, partition)
	for _, v := range s.views {
		found, err := v.meta(metaKey(metaRegistry, id), func([]byte) error { return nil })
		if err != nil {
			return nil, err
		}
		if found {
			return v, nil
		}
	}
	return nil, nil
}

// meta reads one meta key of the view.
func (v *snapView) meta(key []byte, decode func(v []byte) error) (found bool, err error) {
	defer recoverRead(v.tdb.db.log, &v.tdb.closed, &err, nil)
	item, err := v.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err == nil {
		err = item.Value(decode)
	}
	return err == nil, v.tdb.noteErr(readErr(err))
}

// open returns the read-only task of partition and the state of its store
// name, with the expiry cut the snapshot holds.
func (s *Snapshot) open(name string, partition int32, kind store.Kind) (*TaskState, *storeState, error) {
	if name == "" {
		return nil, nil, fmt.Errorf("changelog: snapshot: open store partition %d: no name", partition)
	}
	v, err := s.view(name, partition)
	if err != nil {
		return nil, nil, fmt.Errorf("changelog: snapshot: open store %q partition %d: %w", name, partition, err)
	}
	st := &storeState{spec: store.Spec{Name: name, Kind: kind}, id: storeID(name, partition), cut: minTime}
	st.dprefix = withNS(nsData, st.id)
	if v == nil {
		// No open task DB holds the store: an empty view.
		t := &TaskState{db: s.db, cfg: TaskStateConfig{Partition: partition}, log: s.db.log,
			stores: map[string]*storeState{name: st}, pending: btree.NewG(2, lessEntry), view: &snapView{}}
		st.newCut = st.cut
		return t, st, nil
	}
	if kind != store.KindKeyValue {
		_, err := v.meta(metaKey(metaCut, st.id), func(b []byte) error {
			if len(b) != 8 {
				return fmt.Errorf("%w: cut of %d bytes", errBadKey, len(b))
			}
			st.cut = getTime(b)
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("changelog: snapshot: open store %q partition %d: %w", name, partition, err)
		}
	}
	st.newCut = st.cut
	t := v.tasks[partition]
	if t == nil {
		t = &TaskState{
			db:      s.db,
			tdb:     v.tdb,
			cfg:     TaskStateConfig{ID: v.tdb.id, Partition: partition},
			log:     s.db.log,
			stores:  map[string]*storeState{},
			pending: btree.NewG(2, lessEntry), // stays empty: a snapshot has no overlay
			rtxn:    v.txn,
			view:    v,
		}
		v.tasks[partition] = t
	}
	t.stores[name] = st
	return t, st, nil
}

// The stores of a snapshot are the tasks' stores over a task without an
// overlay, whose read snapshot is the Snapshot's: one implementation of
// every read, with the writes refused.

type snapshotKV struct{ *kvStore }

func (snapshotKV) Put(_, _ []byte) error { return ErrReadOnly }
func (snapshotKV) Delete([]byte) error   { return ErrReadOnly }

type snapshotWindow struct{ *windowStore }

func (snapshotWindow) Put([]byte, int64, []byte) error { return ErrReadOnly }
func (snapshotWindow) ExpireBefore(int64) error        { return ErrReadOnly }

type snapshotSession struct{ *sessionStore }

func (snapshotSession) Put([]byte, int64, int64, []byte) error { return ErrReadOnly }
func (snapshotSession) Remove([]byte, int64, int64) error      { return ErrReadOnly }
func (snapshotSession) ExpireBefore(int64) error               { return ErrReadOnly }
