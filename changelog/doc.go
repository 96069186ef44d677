// Package changelog makes operator state durable: key-value, window and
// session stores on one Badger DB per process, backed by compacted changelog
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
// copied into place and removed. OpenDB finishes every marked epoch and drops
// unmarked staging left by a crash.
//
// # Usage
//
// One DB per process (or per application, when a process hosts several),
// one TaskState per task (its stores and their overlay):
//
//	db, err := changelog.OpenDB(dir, changelog.Options{MemoryBudget: 128 << 20})
//	err = changelog.EnsureTopics(ctx, adm, changelog.TopicFor(appID, spec, partitions)) // at startup
//	state := db.NewTaskState(changelog.TaskStateConfig{AppID: appID, Partition: p, Producer: session})
//	st, err := state.Open(spec, p)           // TaskState is a store.Provider
//	_, err = state.Restore(ctx, changelog.RestoreOptions{ClientOpts: seeds})
//	// process records: writes go to the overlay, reads see them
//	offs, err := state.Flush(ctx)            // changelog records into the open transaction
//	// EndTransaction(commit) succeeded:
//	err = state.Apply(offs)                  // or state.Discard() after an abort
//	cost, err := db.Checkpoint(ctx)          // when the checkpoint scheduler says so
//
// TaskState.Participant wraps Flush/Apply/Discard for a commit loop that
// keeps no offsets itself.
//
// # Ownership
//
// Data keys carry the store name and partition, not the application, so a
// directory must only ever hold one application's state. Options.Owner
// (application id and a topology fingerprint) is recorded in the DB (meta
// key 'w') when it is created, and checked on every open before anything
// is written: another application's directory is
// ErrOwnedByOtherApplication and stays as it was. (After an unclean
// shutdown Badger cannot open a directory read-only; then the check comes
// right after the read-write open, which replays Badger's memtable logs
// but changes no state.) A changed fingerprint wipes every store, applied
// offsets included, so that everything rebuilds from the changelogs; a DB
// from a version that recorded no owner is adopted.
//
// # Damaged state
//
// OpenDB reads every table the MANIFEST names and verifies its checksums
// before Badger opens the directory (Badger opens tables in goroutines of
// its own, where a panic on a damaged one cannot be recovered). A damaged
// or missing table, an unreadable MANIFEST, or tables without one, moves
// the directory aside to <dir>.corrupt-<time> and starts empty: every
// store rebuilds from its changelog. Reads that meet damage later (a panic
// inside Badger, a value Badger could not read from its value log) return
// an error wrapping ErrCorrupt with the store and partition; the runtime
// then closes the DB and calls Quarantine, which moves the directory aside
// the same way. A MANIFEST cut short names an older set of tables: an
// earlier committed prefix with its offsets, served as such.
//
// # Memory
//
// Options.MemoryBudget sizes Badger's memtables, caches and tables (see
// Options). Badger also maps every table file it writes and leaves it
// resident, so without help a restore's RSS would grow by the size of the
// state it writes; Restore asks the kernel to page the tables below level
// 0 out as it goes (MADV_PAGEOUT on Linux, a hint that never loses data),
// and reads fault them back in from the file. A 1M-key restore of 100-byte
// values peaks around 200 MiB RSS with the default budget, about 120 MiB
// of it heap.
//
// # Layout
//
// One DB serves every store and partition of a process, keyed by prefix:
//
//	d <store> <partition> <suffix>        data
//	i <store> <partition> <time> <suffix> time index of window and session stores
//	m ...                                 offsets, expiry cuts, input positions, store registry, format, owner
//	s <epoch> <seq>                       staged entries of a large Apply
//
// The suffix is the raw key for key-value stores, esc(key)+start for windows
// and esc(key)+end+start for sessions, where esc is an order-preserving,
// prefix-free escaping; so byte order of the suffix is the order each store
// contract promises. The changelog record key is a one-byte kind tag followed
// by the same suffix, so a changelog can be replayed without knowing the
// topology, and compaction keeps exactly one record per stored entry.
//
// Snapshot reads the committed state of every store from outside the tasks
// (interactive queries); ApplyAt records each task's input position with its
// data, and Snapshot waits out a staged Apply between its mark and the end
// of its copy.
//
// Window and session expiry is not logged: the changelog's compact,delete
// retention drops old windows, and the expiry cut is persisted with Apply so
// restored entries below it stay invisible.
package changelog
