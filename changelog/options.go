package changelog

import (
	"cmp"
	"log/slog"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// DefaultMemoryBudget fits a 2-core, small-RAM machine: the Badger caches
// and memtables of one process stay around this size.
const DefaultMemoryBudget = 128 << 20

// Options configure OpenDB. The zero value is valid.
type Options struct {
	// MemoryBudget in bytes bounds Badger's caches: the index cache (1/8)
	// is shared out among the open task DBs, and re-shared as tasks come
	// and go (there is no block cache: badgerOptions says why), and the
	// key-value and window stores' read caches share another quarter
	// (readcache.go).
	// Each open task DB also has two memtables of 1/32 of the budget (at
	// least 4 MiB, at most 64 MiB) and tables of half a memtable, which
	// are not shared: with the default
	// budget each task DB beyond the first adds about 11 MiB of peak RSS
	// under a write-heavy load (BenchmarkNewKeys). Default
	// DefaultMemoryBudget; at least 16 MiB.
	MemoryBudget int64
	// Logger receives Badger's own warnings and errors, and restore
	// progress. Default slog.Default().
	Logger *slog.Logger
	// ReadOnly opens an existing state directory for inspection (tidemark
	// state): every task DB in it, read-only.
	ReadOnly bool
	// KeepCorrupt, when false (the default), moves damaged state aside
	// (a task DB to <dir>/tasks/<task>.corrupt-<UTC time>, an unreadable
	// state directory to <dir>.corrupt-<UTC time>) and starts it empty, so
	// its stores rebuild from their changelogs; see OpenDB. When true,
	// OpenDB and TaskState.Open fail with ErrCorrupt instead.
	KeepCorrupt bool
	// Owner is the application the state belongs to, recorded in a new
	// state directory and checked on an existing one; see Owner. Zero:
	// nothing is checked or recorded. Read-only opens record nothing and
	// refuse nothing.
	Owner Owner
	// MinFreeDisk is the free space, in bytes, the state directory's file
	// system must have before a commit writes local state or a restore
	// starts: below it they fail with ErrNoSpace, naming the stores and
	// the directory, before Badger writes (a write that finds the disk
	// full inside Badger's memory-mapped files kills the process with
	// SIGBUS). Zero means 64 MiB; negative turns the check off.
	MinFreeDisk int64
	// NoVerifyChecksums turns off the check OpenDB makes before Badger
	// opens a task DB: every table read once and every block's checksum
	// verified, so that a damaged table is found there and the task's
	// state rebuilt, instead of served as wrong values, or a panic inside
	// Badger on every start. The check reads the whole LSM tree: for 1M
	// keys of 100-byte values (119 MB of tables) 60-90 ms of CPU more
	// than an open without it, with the page cache warm or cold
	// (BenchmarkOpenVerify); less than Badger's own verification modes.
	NoVerifyChecksums bool
	// VerifyChecksums also sets Badger's own OnTableRead mode: Badger then
	// verifies each table when it opens it (a second full read at start,
	// after OpenDB's check) and each table a flush or compaction writes
	// (under 1% of the CPU of a write-heavy workload). It finds nothing
	// OpenDB's check does not, except damage done in memory to a table
	// being written. Off by default.
	VerifyChecksums bool
	// RestoreModeMinOffsets is the smallest restore (changelog offsets to
	// read into one task DB) that defers level-0 compaction
	// (restoremode.go) and, into a task DB that holds no data, is sorted
	// and written with Badger's StreamWriter (rebuild.go); smaller
	// restores are written record by record. Default 100,000: below it
	// the sorted path saves little and costs a task DB reopen. The fault
	// campaign lowers it so that its small states take the sorted path.
	RestoreModeMinOffsets int64

	// applyTxnLimit, when > 0, forces the staged Apply path for overlays
	// with more entries: tests use it to exercise that path on small data.
	applyTxnLimit int
	// levelZeroTables and restoreLevelZeroTables, when > 0, replace the
	// level-0 compaction triggers of restoremode.go: tests use them to see
	// the difference with a few MB of writes.
	levelZeroTables, restoreLevelZeroTables int
	// noRebuild turns sorted rebuilds (rebuild.go) off, so that tests
	// see restore mode's level-0 tables; rebuildRunBytes, when > 0,
	// replaces rebuildRunBytes so that tests spill several runs.
	noRebuild       bool
	rebuildRunBytes int64
	// valueLogFileSize, when > 0, replaces the value log file size: tests
	// use it to get several value log files from a few MB of values.
	valueLogFileSize int64
	// applyHook, when set, is called at each step of a staged Apply; an
	// error stops Apply there, as a crash would.
	applyHook func(step string) error
	// restoreHook, when set, is called with the task DB a restore wrote,
	// after its last record and before the DB leaves restore mode.
	restoreHook func(*taskDB)
}

func (o *Options) ensureDefaults() {
	if o.MemoryBudget <= 0 {
		o.MemoryBudget = DefaultMemoryBudget
	}
	o.MemoryBudget = max(o.MemoryBudget, 16<<20)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// dbMode is what a task DB is opened for.
type dbMode int

const (
	normalMode  dbMode = iota
	restoreMode        // a large restore: level 0 compacts late (restoremode.go)
)

// badgerOptions sizes the Badger DB of one task from the memory budget;
// shares is how many task DBs split its caches. Badger's defaults (64 MiB
// memtables × 5, 256 MiB block cache, 4 compactors) assume a server; here
// memory and cores are shared with the JVM broker in tests and with the
// processing goroutines in production.
func badgerOptions(dir string, o Options, mode dbMode, shares int) badger.Options {
	mem := o.MemoryBudget
	shares = max(shares, 1)
	memtable := memtableSize(mem)
	opts := badger.DefaultOptions(dir)
	// Every table builder allocates twice its table size up front, grows
	// by doubling when that is not enough, and goes back to a pool that
	// keeps what it grew to; a compaction runs several builders at once.
	// Table size, not the caches, is what bounds Badger's peak memory
	// under a write burst such as a restore. Tables of one size, half a
	// memtable, are the sweet spot: a memtable flush then fits the
	// builder's first buffer (with a quarter it grew twice, and a 1M-key
	// restore peaked at ~160 MiB of heap instead of ~120 MiB), while
	// compactions still build small tables.
	opts.TableSizeMultiplier = 1
	if o.VerifyChecksums {
		opts = opts.WithChecksumVerificationMode(options.OnTableRead)
	}
	l0 := o.l0Tables()
	if mode == restoreMode {
		l0 = o.restoreL0Tables()
	}
	return opts.
		WithLogger(slogLogger{o.Logger.With("component", "badger")}).
		WithReadOnly(o.ReadOnly).
		WithSyncWrites(false).      // Checkpoint syncs; Kafka is the durable log
		WithDetectConflicts(false). // each key space has one writer: its task
		WithNumVersionsToKeep(1).
		WithMemTableSize(memtable).
		WithNumMemtables(2).
		WithBaseTableSize(memtable / 2).
		// Kafka already compresses the changelog; on two cores the CPU
		// is worth more than the disk a compressed LSM saves.
		WithCompression(options.None).
		// Ten L0 tables per L0 compaction instead of Badger's five: a
		// write burst spends ~12% less CPU per record in fewer, larger
		// compactions. A large restore reopens the DB with more
		// (restoremode.go).
		WithNumLevelZeroTables(l0).
		WithNumLevelZeroTablesStall(levelZeroTablesStall).
		WithBaseLevelSize(64 << 20).
		// No block cache: tables are uncompressed and unencrypted, so a
		// block is read in place from the mmapped table. The cache only
		// copied blocks and fed Ristretto's admission goroutines on every
		// miss: on two cores shared with the broker, turning it off cut
		// the sweep workload's app CPU per record by ~10% and its p50
		// staleness at 50% load from ~96 to ~63 ms (bench sweep A/B).
		WithBlockCacheSize(0).
		WithIndexCacheSize(cacheShare(mem/8, shares)).
		WithNumCompactors(2). // Badger's minimum for L0 to progress
		WithNumGoroutines(2).
		WithValueThreshold(1 << 10). // small values stay in the LSM tree
		// Large values live in the value log, which OpenDB's table check
		// does not read: Badger checks each value's CRC-32C when it reads
		// it. It logs a mismatch and returns an empty value, which the
		// stores report as ErrCorrupt (lostValue).
		WithVerifyValueChecksum(true).
		WithValueLogFileSize(cmp.Or(o.valueLogFileSize, 64<<20)).
		WithCompactL0OnClose(false)
}

// memtableSize is a task DB's memtable size: 1/32 of the budget, as the
// one DB per process had, whatever the number of task DBs. A memtable
// bounds the largest Apply that fits one Badger transaction (about 15% of
// it; a larger one takes the slower staged path), and each task applies
// its own overlay. Splitting the budget among the task DBs instead saved
// little memory and cost CPU: with 4 and 8 tasks, memtables down to 1 MiB
// lowered peak RSS by at most 9% and cost 13–40% more CPU per record in
// flushes and compactions (BenchmarkNewKeys). What an open task DB costs
// did not follow its memtable size.
func memtableSize(budget int64) int64 { return clamp(budget/32, 4<<20, 64<<20) }

// cacheShare is one task DB's part of a cache of total bytes. Never zero:
// without an index cache Badger keeps every table index on the heap.
func cacheShare(total int64, shares int) int64 { return max(total/int64(shares), 1<<20) }

func (o Options) l0Tables() int { return cmp.Or(o.levelZeroTables, levelZeroTables) }
func (o Options) restoreL0Tables() int {
	return cmp.Or(o.restoreLevelZeroTables, restoreLevelZeroTables)
}

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }
