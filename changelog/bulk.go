package changelog

// Restores defer level-0 compaction. A restore writes a store's whole
// changelog into the shared DB in changelog order, which for the LSM is
// random order: every level-0 table overlaps the whole base level, so each
// level-0 compaction during the restore rewrites all the state restored so
// far. For the length of a restore the DB lets level 0 grow to
// restoreLevelZeroTables tables before it compacts it (a 1M-key restore
// fits), then goes back to the trigger steady-state reads want: a Get
// consults every level-0 table's bloom filter, and with 40 tables instead
// of 10 a workload of new keys spent ~25% more CPU. The compaction the
// restore skipped runs after it, once, while the task processes.
//
// Restores of several tasks overlap: the trigger goes back when the last
// one ends.

const (
	levelZeroTables        = 10
	restoreLevelZeroTables = 40
	// levelZeroTablesStall is where memtable flushes wait for level 0
	// to shrink: above the restore trigger, and with room for the
	// compaction that follows a restore to run without stalling the
	// writes of the tasks that resume.
	levelZeroTablesStall = 60
)

// beginBulkLoad raises the level-0 trigger until the matching endBulkLoad.
func (db *DB) beginBulkLoad() {
	db.bulkMu.Lock()
	defer db.bulkMu.Unlock()
	db.bulkLoads++
	if db.bulkLoads == 1 {
		db.bdb.SetLevelZeroTables(db.opts.restoreL0Tables())
	}
}

func (db *DB) endBulkLoad() {
	db.bulkMu.Lock()
	defer db.bulkMu.Unlock()
	db.bulkLoads--
	if db.bulkLoads == 0 {
		db.bdb.SetLevelZeroTables(0) // back to the trigger it was opened with
	}
}
