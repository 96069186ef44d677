/*
 * SPDX-License-Identifier: Apache-2.0
 */

// This file is tidemark's patch to Badger v4.9.6 (see PATCH.md).

package badger

// SetLevelZeroTables replaces Options.NumLevelZeroTables, the number of
// level-0 tables that triggers a level-0 compaction, while the DB runs;
// n <= 0 goes back to the value the DB was opened with. A bulk load raises
// it so that level 0 takes the load without compacting it into the base
// level piecemeal, then lowers it so that reads consult few level-0
// tables again. It does not change NumLevelZeroTablesStall: open the DB
// with a stall above any trigger it will set.
func (db *DB) SetLevelZeroTables(n int) {
	if n < 0 {
		n = 0
	}
	db.l0Trigger.Store(int32(n))
}

func (db *DB) numLevelZeroTables() int {
	if n := db.l0Trigger.Load(); n > 0 {
		return int(n)
	}
	return db.opt.NumLevelZeroTables
}
