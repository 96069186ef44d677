package changelog

import (
	"cmp"
	"fmt"
)

// Large restores write their task DB in restore mode. A restore writes a
// store's changelog in changelog order, which for the LSM is random order:
// every level-0 table overlaps the whole base level, so each level-0
// compaction during the restore rewrites all the state restored so far.
// In restore mode the task DB lets level 0 grow to
// restoreLevelZeroTables tables before it compacts it (a 1M-key restore
// fits); afterwards it goes back to the trigger steady-state reads want: a
// Get consults every level-0 table's bloom filter, and with 40 tables
// instead of 10 a workload of new keys spent ~25% more CPU. The compaction
// the restore skipped runs after it, once, while the task processes.
//
// Badger fixes the trigger when it opens a DB, so restore mode is a
// reopen: the task DB is closed and opened with the restore trigger before
// the first record, and closed and opened with the normal one after the
// last. That is why every task has a DB of its own: a reopen must not stop
// the other tasks. A close flushes the memtable and waits for a running
// compaction, and an open reads the tables' indexes; restores of fewer
// than restoreModeMinOffsets offsets, which do not fill level 0 to its
// normal trigger, skip both. Measured on 1M keys of 100 bytes
// (BenchmarkKafkaRestore), restores in restore mode match the patched
// Badger this replaced, which changed the trigger in place, within a few
// percent in records/s, CPU and peak RSS; without it, upstream Badger
// restored ~20% fewer records per CPU-second with ~50% more peak RSS.
//
// A task DB in restore mode that holds no data yet is not written record
// by record at all: the restore sorts and writes it with StreamWriter
// (rebuild.go), and no compaction is deferred.

const (
	levelZeroTables        = 10
	restoreLevelZeroTables = 40
	// levelZeroTablesStall is where memtable flushes wait for level 0
	// to shrink: above the restore trigger, and with room for the
	// compaction that follows a restore to run without stalling the
	// writes of the task once it resumes.
	levelZeroTablesStall = 60
	// restoreModeMinOffsets is the smallest restore (changelog offsets to
	// read into one task DB) that reopens it in restore mode: about half
	// the records of 100 bytes that fill level 0 to its normal trigger.
	restoreModeMinOffsets = 100_000
)

func (o Options) restoreModeMin() int64 {
	return cmp.Or(o.RestoreModeMinOffsets, restoreModeMinOffsets)
}

// enterRestoreMode reopens tdb with the restore trigger, unless other
// users share it or snapshots keep reading it: then the restore goes on in
// normal mode, only slower. It reports whether tdb is in restore mode.
func (tdb *taskDB) enterRestoreMode() (bool, error) {
	if err := tdb.reopen(restoreMode); err != nil {
		if err == errShared || err == errBusy {
			tdb.db.log.Info("restoring without deferring level-0 compaction", "task", tdb.id, "reason", err.Error())
			return false, nil
		}
		return false, fmt.Errorf("changelog: reopen task DB %s for a restore: %w", tdb.id, err)
	}
	return true, nil
}

// leaveRestoreMode reopens tdb with the normal trigger.
func (tdb *taskDB) leaveRestoreMode() error {
	if err := tdb.reopen(normalMode); err != nil {
		return fmt.Errorf("changelog: reopen task DB %s after a restore: %w", tdb.id, err)
	}
	return nil
}
