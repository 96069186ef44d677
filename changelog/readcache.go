package changelog

import (
	"github.com/dgraph-io/badger/v4"

	"github.com/tidemark-streams/tidemark/store"
)

// The committed-value cache of a task's key-value and window stores.
//
// A key-value Get that misses the overlay reads Badger: a memtable skiplist
// walk and, for keys flushed to tables, a bloom probe and a block seek per
// level. On the sweep workload (10 000 Zipf keys) that was 30% of the
// record loop's CPU, mostly re-reading the same hot keys. The cache keeps
// what those reads returned, and what Apply wrote, so the next Get of a hot
// key is one map lookup.
//
// It holds committed state only (the overlay is always read first), and it
// must never disagree with what a fresh Badger read would return. Badger's
// timestamps guard that: the cache is consistent with Badger as of one read
// timestamp (ts). A value read through the snapshot enters only when the
// snapshot's read timestamp is ts. ApplyAt writes its kv entries through,
// and only when its write transaction started at ts, so no other write came
// in between; its commit then takes ts+1, and the next snapshot must read
// at exactly ts+1 for the cache to stay. Any other writer (a restore, a
// standby's tail, a rebuild, another transaction) moves the timestamp past
// that, or resets the snapshot outside ApplyAt, and the cache is dropped.
// Window stores' point reads (Fetch, every record of a window
// aggregation) use it too. Their expiry deletes keys the overlay never
// held, so the cache may keep an expired window's value; a read of it never
// reaches the cache (Fetch returns nothing below the expiry cut first), and
// the entry ages out with its generation. Range reads (FetchAll,
// FetchRange) and session stores read Badger.
//
// Two generations bound it: lookups promote from the old generation to the
// current one, and when the current one holds half the limit it becomes the
// old one. That is an approximate LRU for the cost of two map lookups.
type readCache struct {
	cur, prev map[string]cachedValue
	curBytes  int
	limit     int        // bytes of both generations, set when primed
	ts        uint64     // Badger read timestamp the contents reflect; valid only if primed
	bdb       *badger.DB // the Badger instance ts is of: a reopened DB restarts its timestamps
	primed    bool
	hits      uint64
	misses    uint64
}

// cachedValue is a committed value, or its absence (ok false).
type cachedValue struct {
	v  []byte
	ok bool
}

// cacheEntryOverhead approximates a map entry's bytes besides key and value.
const cacheEntryOverhead = 64

// lookup returns the cached committed value of key, if any.
func (c *readCache) lookup(key []byte) (cachedValue, bool) {
	if v, ok := c.cur[string(key)]; ok {
		c.hits++
		return v, true
	}
	if v, ok := c.prev[string(key)]; ok {
		c.hits++
		delete(c.prev, string(key))
		c.put(key, v)
		return v, true
	}
	return cachedValue{}, false
}

// put stores v under key.
func (c *readCache) put(key []byte, v cachedValue) {
	if c.cur == nil {
		c.cur = make(map[string]cachedValue)
	}
	k := string(key)
	if old, ok := c.cur[k]; ok {
		c.curBytes -= len(k) + len(old.v) + cacheEntryOverhead
	}
	c.cur[k] = v
	c.curBytes += len(k) + len(v.v) + cacheEntryOverhead
	if c.curBytes >= c.limit/2 {
		c.prev, c.cur, c.curBytes = c.cur, make(map[string]cachedValue, len(c.cur)), 0
	}
}

// clear drops everything.
func (c *readCache) clear() {
	c.cur, c.prev, c.curBytes, c.primed, c.bdb = nil, nil, 0, false, nil
}

// cacheLimit is this task's share of the cache budget: a quarter of the
// memory budget (what Badger's block cache had) over the open task DBs.
func (t *TaskState) cacheLimit() int {
	t.db.mu.Lock()
	n := max(1, len(t.db.tasks))
	t.db.mu.Unlock()
	return int(t.db.opts.MemoryBudget / 4 / int64(n))
}

// getKV is get for a key-value store or a window store's point read:
// overlay, then the cache, then Badger (whose answer enters the cache).
func (t *TaskState) getKV(key []byte) ([]byte, bool, error) {
	if v, ok, found := t.overlayGet(key); found {
		return v, ok, nil
	}
	if t.tdb == nil || t.view != nil {
		return t.readBadger(key) // no DB, or a short-lived query view
	}
	txn := t.snapshot()
	c := &t.cache
	if c.primed && (c.ts != txn.ReadTs() || c.bdb != t.tdb.bdb) {
		c.clear()
	}
	if c.primed {
		if v, ok := c.lookup(key); ok {
			return v.v, v.ok, nil
		}
	}
	c.misses++
	v, ok, err := t.readBadger(key)
	if err != nil {
		return nil, false, err
	}
	if t.rtxn == txn { // not dropped by a failed read
		if !c.primed {
			c.ts, c.bdb, c.primed, c.limit = txn.ReadTs(), t.tdb.bdb, true, t.cacheLimit()
		}
		c.put(key, cachedValue{v: v, ok: ok})
	}
	return v, ok, nil
}

// followApply records what ApplyAt committed for the key-value and window
// stores: Badger went from read timestamp from (what its writes started
// at) to to (what a read sees after them). A cache that was not at from is
// dropped instead. The single-transaction Apply checks this exactly: its
// commit takes from+1 only if nothing else committed meanwhile, and the
// next snapshot must read at to. A staged Apply commits several times, so
// the cache trusts that the timestamps between were its own: a task DB has
// one writer at a time, the task's goroutine (restores, standby tails and
// rebuilds run before or after, never during, an Apply, and they move the
// timestamp the next read checks). Dropping the cache after every staged
// Apply cost a loaded windowed count half its reads from Badger: under
// load commits grow past one Badger transaction, and the misses made the
// loop slower, which grew the commits further.
func (t *TaskState) followApply(from, to uint64) {
	c := &t.cache
	if !c.primed {
		return
	}
	if c.ts != from || c.bdb != t.tdb.bdb {
		c.clear()
		return
	}
	if to == from {
		return // no commit, no new timestamp
	}
	t.applied().Ascend(func(e *entry) bool {
		if k := e.st.spec.Kind; k != store.KindKeyValue && k != store.KindWindow {
			return true
		}
		c.put(e.key, cachedValue{v: e.value, ok: !e.del})
		return true
	})
	c.ts = to
}
