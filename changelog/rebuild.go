package changelog

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
	"unsafe"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/ristretto/v2/z"
)

// A rebuild is a large restore into a task DB that holds no data yet: a
// partition that moved to an instance without its state, or state that
// was wiped. Written record by record, the changelog's order is random
// order for the LSM tree: every level-0 table overlaps all the others,
// and the level-0 compaction that restore mode defers (restoremode.go)
// rewrites the whole state once the restore ends. On two cores that
// compaction took ~1.2 cores for 0.8 s right after a 500k-record
// restore, and every other task's staleness rose with it (bench
// --failover, tidemark-restore).
//
// A rebuild sorts instead: the restore's writes are kept in runs of at
// most rebuildRunBytes, each sorted by key (the last write of a key wins)
// and spilled to a file beside the task DB when the next run starts; at
// the end the runs are merged and written with Badger's StreamWriter
// straight into the last level of the LSM tree, as tables that overlap
// nothing and never need compacting. Memory stays bounded by one run
// whatever the size of the state, the work is paced like the rest of the
// restore, and no memtable, level-0 table or compaction is involved.
//
// StreamWriter starts by dropping everything in the DB, so the keys the
// DB held before (meta keys only: the format, store registry, offsets)
// are read first and written back as part of the stream.

// rebuildRunBytes bounds the memory of one rebuild: the keys, values and
// entries of the run being collected.
const rebuildRunBytes = 16 << 20

// rebuildEntryBytes is what an entry costs beside its key and value.
const rebuildEntryBytes = int64(unsafe.Sizeof(runEntry{}))

// rebuildWriteBytes is how much the merge hands StreamWriter at once.
const rebuildWriteBytes = 1 << 20

const rebuildTempMark = ".rebuild-"

// restoreSink is what a restore writes one task DB's records to: a
// Badger WriteBatch, or a rebuild.
type restoreSink interface {
	SetEntry(e *badger.Entry) error
	Set(key, value []byte) error
	Delete(key []byte) error
}

// runEntry is a write of a run, its key and value in the run's arena. It
// holds no pointers, so the garbage collector does not scan a run.
type runEntry struct {
	chunk, off, klen, vlen uint32
	del                    bool
}

// rebuild is the restoreSink of a task DB written by a sorted rebuild.
type rebuild struct {
	tdb     *taskDB
	limit   int64 // run bytes
	dir     string
	run     []runEntry
	runSize int64
	arena   arena
	files   []string // spilled runs, oldest first
	// progress, when set, hears of the keys finish has written so far,
	// after each write to the task DB.
	progress func(keys int)
}

// holdsData reports whether the task DB has any store data (or a staged
// apply): a rebuild needs a DB with meta keys only.
func (tdb *taskDB) holdsData() (bool, error) {
	found := false
	err := tdb.bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for _, ns := range []byte{nsData, nsIndex, nsStaged} {
			it.Seek([]byte{ns})
			if it.ValidForPrefix([]byte{ns}) {
				found = true
				return nil
			}
		}
		return nil
	})
	return found, err
}

// rebuildable picks the task DBs in restore mode that a restore can
// rebuild: those that hold no data.
func (db *DB) rebuildable(inMode []*taskDB) (map[*taskDB]bool, error) {
	out := map[*taskDB]bool{}
	if db.opts.noRebuild {
		return out, nil
	}
	for _, tdb := range inMode {
		if tdb.id == "" {
			continue // the old layout's shared DB
		}
		has, err := tdb.holdsData()
		if err != nil {
			return nil, fmt.Errorf("changelog: restore: look into task DB %s: %w", tdb.id, err)
		}
		if !has {
			out[tdb] = true
		}
	}
	return out, nil
}

// newRebuild starts a rebuild of tdb, which the caller holds exclusively
// (in restore mode) and which holds no data: its meta keys become the
// start of the first run.
func newRebuild(tdb *taskDB, runBytes int64) (*rebuild, error) {
	rb := &rebuild{tdb: tdb, limit: cmp.Or(runBytes, rebuildRunBytes)}
	removeRebuildTemps(tdb.db.dir, tdb.id, tdb.db.log)
	err := tdb.bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			if err := item.Value(func(v []byte) error {
				rb.add(item.Key(), v, false)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("changelog: rebuild task DB %s: read its meta keys: %w", tdb.id, err)
	}
	return rb, nil
}

// removeRebuildTemps deletes the run files of rebuilds a crash
// interrupted.
func removeRebuildTemps(dir, task string, log interface{ Warn(string, ...any) }) {
	matches, _ := filepath.Glob(filepath.Join(dir, tasksDir, task+rebuildTempMark+"*"))
	for _, m := range matches {
		if err := os.RemoveAll(m); err != nil {
			log.Warn("remove an interrupted rebuild's runs", "dir", m, "err", err)
		}
	}
}

func (rb *rebuild) SetEntry(e *badger.Entry) error { return rb.Set(e.Key, e.Value) }

func (rb *rebuild) Set(key, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	return rb.put(key, value, false)
}

func (rb *rebuild) Delete(key []byte) error { return rb.put(key, nil, true) }

func (rb *rebuild) put(key, value []byte, del bool) error {
	rb.add(key, value, del)
	if rb.runSize >= rb.limit {
		return rb.spill()
	}
	return nil
}

// add copies key and value into the run.
func (rb *rebuild) add(key, value []byte, del bool) {
	e := rb.arena.put(key, value)
	e.del = del
	rb.run = append(rb.run, e)
	rb.runSize += int64(len(key)+len(value)) + rebuildEntryBytes
}

// sortRun sorts the run by key and keeps only the last write of each key.
func (rb *rebuild) sortRun() []runEntry {
	a := &rb.arena
	slices.SortStableFunc(rb.run, func(x, y runEntry) int { return bytes.Compare(a.key(x), a.key(y)) })
	out := rb.run[:0]
	for _, e := range rb.run {
		if len(out) > 0 && bytes.Equal(a.key(out[len(out)-1]), a.key(e)) {
			out[len(out)-1] = e
			continue
		}
		out = append(out, e)
	}
	return out
}

// spill writes the current run, sorted, to a file and starts a new one.
func (rb *rebuild) spill() (err error) {
	run := rb.sortRun()
	if rb.dir == "" {
		if rb.dir, err = os.MkdirTemp(filepath.Join(rb.tdb.db.dir, tasksDir), rb.tdb.id+rebuildTempMark); err != nil {
			return fmt.Errorf("changelog: rebuild task DB %s: %w", rb.tdb.id, err)
		}
	}
	name := filepath.Join(rb.dir, fmt.Sprintf("run-%06d", len(rb.files)))
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("changelog: rebuild task DB %s: %w", rb.tdb.id, err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("changelog: rebuild task DB %s: write %s: %w", rb.tdb.id, name, cerr)
		}
	}()
	w := bufio.NewWriterSize(f, 256<<10)
	var hdr [2*binary.MaxVarintLen64 + 1]byte
	for _, e := range run {
		n := binary.PutUvarint(hdr[:], uint64(e.klen))
		hdr[n] = btob(e.del)
		n++
		n += binary.PutUvarint(hdr[n:], uint64(e.vlen))
		if _, err := w.Write(hdr[:n]); err != nil {
			return fmt.Errorf("changelog: rebuild task DB %s: write %s: %w", rb.tdb.id, name, err)
		}
		w.Write(rb.arena.key(e))
		w.Write(rb.arena.value(e))
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("changelog: rebuild task DB %s: write %s: %w", rb.tdb.id, name, err)
	}
	rb.files = append(rb.files, name)
	clear(rb.run)
	rb.run, rb.runSize = rb.run[:0], 0
	rb.arena.reset()
	return nil
}

func btob(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// cancel removes the spilled runs.
func (rb *rebuild) cancel() {
	if rb.dir != "" {
		_ = os.RemoveAll(rb.dir)
		rb.dir = ""
	}
}

// finish merges the runs and writes the result into the task DB, whose
// previous content (meta keys, read by newRebuild) it replaces.
func (rb *rebuild) finish(ctx context.Context, p *pacer) (err error) {
	defer rb.cancel()
	start := time.Now()
	runs := len(rb.files)
	if len(rb.run) > 0 || runs == 0 {
		runs++
	}
	written := 0
	var src runSource
	if len(rb.files) == 0 {
		src = &sliceSource{run: rb.sortRun(), a: &rb.arena}
	} else {
		if len(rb.run) > 0 {
			if err := rb.spill(); err != nil {
				return err
			}
		}
		m, err := openMerge(rb.files)
		if err != nil {
			return fmt.Errorf("changelog: rebuild task DB %s: %w", rb.tdb.id, err)
		}
		defer m.close()
		src = m
	}
	// Cancelled before the merge, the DB is left as it was (Prepare drops
	// it); during it, every write checks: unpaced (the pacer only looks at
	// ctx when it paces), a shutdown used to wait out the whole merge, 3.4 s
	// of a 1.5M-record restore and proportionally more for larger state.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("changelog: rebuild task DB %s: %w", rb.tdb.id, err)
	}
	sw := rb.tdb.bdb.NewStreamWriter()
	if err := sw.Prepare(); err != nil {
		sw.Cancel()
		return fmt.Errorf("changelog: rebuild task DB %s: prepare: %w", rb.tdb.id, err)
	}
	flushed := false
	defer func() {
		if !flushed {
			sw.Cancel()
		}
	}()
	buf := z.NewBuffer(2*rebuildWriteBytes, "tidemark.rebuild")
	defer func() { _ = buf.Release() }()
	kv := &pb.KV{Version: 1, StreamId: 1}
	for {
		key, value, del, ok, err := src.next()
		if err != nil {
			return fmt.Errorf("changelog: rebuild task DB %s: read runs: %w", rb.tdb.id, err)
		}
		if !ok {
			break
		}
		if del {
			continue // nothing below it to delete
		}
		kv.Key, kv.Value = key, value
		badger.KVToBuffer(kv, buf)
		written++
		if buf.LenNoPadding() >= rebuildWriteBytes {
			if err := sw.Write(buf); err != nil {
				return fmt.Errorf("changelog: rebuild task DB %s: write: %w", rb.tdb.id, err)
			}
			buf.Reset()
			if rb.progress != nil {
				rb.progress(written)
			}
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("changelog: rebuild task DB %s: %w", rb.tdb.id, err)
			}
			if err := p.pace(ctx); err != nil {
				return fmt.Errorf("changelog: rebuild task DB %s: %w", rb.tdb.id, err)
			}
		}
	}
	if err := sw.Write(buf); err != nil {
		return fmt.Errorf("changelog: rebuild task DB %s: write: %w", rb.tdb.id, err)
	}
	flushed = true
	if err := sw.Flush(); err != nil {
		return fmt.Errorf("changelog: rebuild task DB %s: flush: %w", rb.tdb.id, err)
	}
	rb.tdb.rebuilds++
	rb.tdb.db.log.Info("task DB written sorted", "task", rb.tdb.id, "keys", written, "runs", runs,
		"duration", time.Since(start).Round(time.Millisecond))
	return nil
}

// runSource yields a rebuild's entries in key order, one per key.
type runSource interface {
	next() (key, value []byte, del, ok bool, err error)
}

type sliceSource struct {
	run []runEntry
	a   *arena
	i   int
}

func (s *sliceSource) next() ([]byte, []byte, bool, bool, error) {
	if s.i == len(s.run) {
		return nil, nil, false, false, nil
	}
	e := s.run[s.i]
	s.i++
	return s.a.key(e), s.a.value(e), e.del, true, nil
}

// runReader reads one spilled run; its key and value are valid until the
// next read.
type runReader struct {
	f          *os.File
	r          *bufio.Reader
	idx        int // newer runs have higher indexes and win
	key, value []byte
	del        bool
}

func (rr *runReader) read() (bool, error) {
	klen, err := binary.ReadUvarint(rr.r)
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	flag, err := rr.r.ReadByte()
	if err != nil {
		return false, noEOF(err)
	}
	vlen, err := binary.ReadUvarint(rr.r)
	if err != nil {
		return false, noEOF(err)
	}
	rr.key = slices.Grow(rr.key[:0], int(klen))[:klen]
	rr.value = slices.Grow(rr.value[:0], int(vlen))[:vlen]
	if _, err := io.ReadFull(rr.r, rr.key); err != nil {
		return false, noEOF(err)
	}
	if _, err := io.ReadFull(rr.r, rr.value); err != nil {
		return false, noEOF(err)
	}
	rr.del = flag == 1
	return true, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// merge is a k-way merge of spilled runs. Each run holds a key at most
// once; of a key in several runs, the newest run's entry wins.
type merge struct {
	h    runHeap
	all  []*runReader
	last *runReader // returned by the previous next, advanced on the next
}

func openMerge(files []string) (*merge, error) {
	m := &merge{}
	for i, name := range files {
		f, err := os.Open(name)
		if err != nil {
			m.close()
			return nil, err
		}
		rr := &runReader{f: f, r: bufio.NewReaderSize(f, 64<<10), idx: i}
		m.all = append(m.all, rr)
		ok, err := rr.read()
		if err != nil {
			m.close()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if ok {
			m.h = append(m.h, rr)
		}
	}
	heap.Init(&m.h)
	return m, nil
}

func (m *merge) advance(rr *runReader) error {
	ok, err := rr.read()
	if err != nil {
		return fmt.Errorf("%s: %w", rr.f.Name(), err)
	}
	if ok {
		heap.Push(&m.h, rr)
	}
	return nil
}

func (m *merge) next() ([]byte, []byte, bool, bool, error) {
	if m.last != nil {
		rr := m.last
		m.last = nil
		if err := m.advance(rr); err != nil {
			return nil, nil, false, false, err
		}
	}
	for len(m.h) > 0 {
		rr := heap.Pop(&m.h).(*runReader)
		if len(m.h) > 0 && bytes.Equal(m.h[0].key, rr.key) {
			// A newer run has this key too.
			if err := m.advance(rr); err != nil {
				return nil, nil, false, false, err
			}
			continue
		}
		m.last = rr
		return rr.key, rr.value, rr.del, true, nil
	}
	return nil, nil, false, false, nil
}

func (m *merge) close() {
	for _, rr := range m.all {
		_ = rr.f.Close()
	}
}

// runHeap orders run readers by key, then oldest run first.
type runHeap []*runReader

func (h runHeap) Len() int { return len(h) }
func (h runHeap) Less(i, j int) bool {
	if c := bytes.Compare(h[i].key, h[j].key); c != 0 {
		return c < 0
	}
	return h[i].idx < h[j].idx
}
func (h runHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)   { *h = append(*h, x.(*runReader)) }
func (h *runHeap) Pop() any {
	old := *h
	rr := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return rr
}

// arena keeps a run's keys and values, each key followed by its value,
// in chunks it reuses from run to run.
type arena struct {
	chunks [][]byte
	cur    int
}

const arenaChunk = 1 << 20

// put copies key and value into the arena and returns where they are.
func (a *arena) put(key, value []byte) runEntry {
	n := len(key) + len(value)
	if len(a.chunks) == 0 {
		a.chunks = append(a.chunks, make([]byte, 0, arenaChunk))
	}
	if c := a.chunks[a.cur]; cap(c)-len(c) < n {
		a.cur++
		if a.cur == len(a.chunks) || cap(a.chunks[a.cur]) < n {
			// A pair larger than a chunk gets a chunk of its own size.
			a.chunks = slices.Insert(a.chunks, a.cur, make([]byte, 0, max(n, arenaChunk)))
		}
	}
	c := a.chunks[a.cur]
	e := runEntry{chunk: uint32(a.cur), off: uint32(len(c)), klen: uint32(len(key)), vlen: uint32(len(value))}
	c = append(c, key...)
	a.chunks[a.cur] = append(c, value...)
	return e
}

func (a *arena) key(e runEntry) []byte {
	return a.chunks[e.chunk][e.off : e.off+e.klen : e.off+e.klen]
}

func (a *arena) value(e runEntry) []byte {
	o := e.off + e.klen
	return a.chunks[e.chunk][o : o+e.vlen : o+e.vlen]
}

// reset makes every chunk free again, for the next run.
func (a *arena) reset() {
	for i := range a.chunks {
		a.chunks[i] = a.chunks[i][:0]
	}
	a.cur = 0
}
