package changelog

// HandOver keeps task id's Badger DB open after its current users close it,
// until the next TaskState of the task opens it, which takes it over as it
// is, or EndHandOver drops the hand-over. A standby whose task becomes
// active on the same instance closes its TaskState a moment before the
// active task opens one: without the hand-over the DB closed and reopened
// between them, which flushes the memtable into a new level-0 table, reads
// every table's index again and, when that flush reaches the level-0
// trigger, starts a compaction of the whole level 0 at once. On two cores
// that compaction took the CPU the record loop needed right when the
// promoted task began to process (a ~300–450 ms stall of every task's
// outputs in the failover benchmark). An open DB keeps compacting as
// before, in the background, as the standby's writes filled it.
//
// A task DB that is not open, or is being restored in restore mode, is not
// held: there is nothing to keep.
func (db *DB) HandOver(id string) {
	db.mu.Lock()
	defer db.mu.Unlock()
	tdb := db.tasks[id]
	if db.closed.Load() || tdb == nil || tdb.exclusive || tdb.handover {
		return
	}
	tdb.users++
	tdb.handover = true
}

// EndHandOver drops task id's hand-over if no TaskState took it over; the
// DB closes if that was its last user. Safe to call when there is none.
func (db *DB) EndHandOver(id string) {
	db.mu.Lock()
	tdb := db.tasks[id]
	pending := tdb != nil && tdb.handover
	if pending {
		tdb.handover = false
	}
	db.mu.Unlock()
	if pending {
		db.release(tdb)
	}
}

// HandedOver reports whether task id's DB is held for a hand-over, for
// tests.
func (db *DB) HandedOver(id string) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	tdb := db.tasks[id]
	return tdb != nil && tdb.handover
}
