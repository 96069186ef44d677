// Package changelog makes operator state durable: key-value, window and
// session stores on one Badger DB per task, backed by compacted changelog
// topics in Kafka, with the overlay that keeps uncommitted writes out of
// Badger, and the restore, rebuild and replay paths.
//
// # Invariant
//
// Badger always holds a committed prefix of every store plus the changelog
// offsets that prefix reflects. Writes of a task go to its overlay first;
// Flush produces them as changelog records into the open Kafka transaction;
// only after that transaction commits does Apply move the overlay into
// Badger, in one atomic step together with the new offsets. An abort calls
// Discard and Badger never saw the writes. A crash anywhere leaves Badger at
// the last applied commit, and Restore replays the changelog (read_committed)
// from the recorded offsets to the last stable offset. Local state is never
// ahead of Kafka, so it never has to be wiped after a crash.
//
// Apply is atomic in two ways. An overlay that fits in one Badger
// transaction is written in one. A larger one is first staged under a fresh
// epoch (not atomic, and harmless: staged entries are invisible to reads),
// then a single small transaction writes the epoch's applied marker together
// with the offsets — the commit point — and only then are the staged entries
// copied into place and removed. Opening a task's DB finishes every marked
// epoch and drops unmarked staging left by a crash. Both need every store
// of a task in one Badger DB, which is why a DB is per task and not per
// store.
//
// # Usage
//
// One DB (a state directory) per process, or per application when a
// process hosts several; one TaskState per task (its stores and their
// overlay), which opens the task's Badger DB with its first store:
//
//	db, err := changelog.OpenDB(dir, changelog.Options{MemoryBudget: 128 << 20})
//	err = changelog.EnsureTopics(ctx, adm, changelog.TopicFor(appID, spec, partitions)) // at startup
//	state := db.NewTaskState(changelog.TaskStateConfig{ID: "0_3", AppID: appID, Partition: 3, Producer: session})
//	st, err := state.Open(spec, 3)           // TaskState is a store.Provider
//	_, err = state.Restore(ctx, changelog.RestoreOptions{ClientOpts: seeds})
//	// process records: writes go to the overlay, reads see them
//	offs, err := state.Flush(ctx)            // changelog records into the open transaction
//	// EndTransaction(commit) succeeded:
//	err = state.Apply(offs)                  // or state.Discard() after an abort
//	cost, err := db.Checkpoint(ctx)          // when the checkpoint scheduler says so
//	err = state.Close()                      // the task is revoked: its DB closes
//
// In the service, processor's liveTask is the txn.Participant that drives
// these three calls.
//
// # Layout
//
// A state directory holds one Badger DB per task, as Kafka Streams keeps a
// directory per task with a RocksDB per store:
//
//	<dir>/STATE          the directory's record: layout format (2) and owner, JSON
//	<dir>/tasks/<task>/  the Badger DB of task <task> ("<sub-topology>_<partition>")
//	<dir>/tasks/<task>.corrupt-<time>/   a damaged task DB, moved aside
//	<dir>/tasks/<task>.rebuild-*/        sorted runs of a restore into an empty task DB (rebuild.go)
//	<dir>/tasks/<task>.snapshot-*/       a snapshot being loaded
//
// A task DB is open while its TaskState is (and while a Snapshot or a tool
// reads it); the directories of tasks this process no longer runs stay on
// disk, so a task that comes back restores only the changelog's tail.
// Within a task DB, keys carry the store and partition:
//
//	d <store> <partition> <suffix>        data
//	i <store> <partition> <time> <suffix> time index of window and session stores
//	m ...                                 offsets, expiry cuts, input positions, store registry, format
//	s <epoch> <seq>                       staged entries of a large Apply
//
// The suffix is the raw key for key-value stores, esc(key)+start for windows
// and esc(key)+end+start for sessions, where esc is an order-preserving,
// prefix-free escaping; so byte order of the suffix is the order each store
// contract promises. The changelog record key is a one-byte kind tag followed
// by the same suffix, so a changelog can be replayed without knowing the
// topology, and compaction keeps exactly one record per stored entry.
//
// Versions before this one kept one Badger DB for every task at the root of
// the directory (layout format 1). OpenDB converts such a directory: it
// keeps the owner, deletes the Badger files, and every store rebuilds from
// its changelog, which is always correct. Read-only opens (tidemark state)
// read it as it is.
//
// Why a DB per task: a restore writes a store's changelog in random key
// order, and Badger, which fixes its level-0 compaction trigger when it
// opens a DB, would compact level 0 into the whole restored state again
// and again. A task's own DB can be reopened for the length of a large
// restore with a trigger that defers that compaction, and reopened with
// the normal one after, without stopping other tasks (restoremode.go). A
// damaged task DB rebuilds that task only. The cost is per open task DB:
// sixteen goroutines, and about 11 MiB of peak RSS with the default
// budget under a write-heavy load (two memtables and what Badger keeps
// around them; the caches are shared out, see Options.MemoryBudget).
//
// # Ownership
//
// Data keys carry the store name and partition, and task DBs the task id,
// not the application, so a directory must only ever hold one
// application's state. Options.Owner (application id and a topology
// fingerprint) is recorded in STATE when the directory is created, and
// checked on every open before anything is written: another application's
// directory is ErrOwnedByOtherApplication and stays as it was. A changed
// fingerprint wipes every task DB, so that everything rebuilds from the
// changelogs; a directory from a version that recorded no owner is
// adopted.
//
// # Damaged state
//
// OpenDB reads every table each task DB's MANIFEST names and verifies its
// checksums before Badger opens the directory (Badger opens tables in
// goroutines of its own, where a panic on a damaged one cannot be
// recovered). A damaged or missing table, an unreadable MANIFEST, or
// tables without one, moves that task DB aside to
// <dir>/tasks/<task>.corrupt-<time> and starts it empty: the task's stores
// rebuild from their changelogs. Reads that meet damage later (a panic
// inside Badger, a value Badger could not read from its value log) return
// an error wrapping ErrCorrupt with the store and partition, and mark the
// task DB; the runtime then closes the DB and calls Quarantine, which moves
// the marked task DBs aside the same way. A MANIFEST cut short names an
// older set of tables: an earlier committed prefix with its offsets, served
// as such, unless memtable logs newer than the tables it forgot remain
// (after a crash): Badger would replay them, later offsets and all, onto
// the older tables, so that task DB moves aside too (checkLostTables). An
// unreadable STATE moves the whole directory aside to <dir>.corrupt-<time>.
//
// # Memory
//
// Options.MemoryBudget sizes Badger's memtables, caches and tables (see
// Options). Badger also maps every table file it writes and leaves it
// resident, so without help a restore's RSS would grow by the size of the
// state it writes; Restore asks the kernel to page the tables below level
// 0 out as it goes (MADV_PAGEOUT on Linux, a hint that never loses data),
// and reads fault them back in from the file. A 1M-key restore of 100-byte
// values peaks around 100 MiB RSS with the default budget, about 70 MiB
// of it anonymous memory (BenchmarkKafkaRestore).
//
// # Snapshots
//
// Snapshot reads the committed state of every store of the open task DBs
// from outside the tasks (interactive queries); ApplyAt records each
// task's input position with its data, and Snapshot waits out a staged
// Apply between its mark and the end of its copy.
//
// Window and session expiry is not logged: the changelog's compact,delete
// retention drops old windows, and the expiry cut is persisted with Apply so
// restored entries below it stay invisible.
package changelog
