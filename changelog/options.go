package changelog

import (
	"cmp"
	"log/slog"

	badger "github.com/tidemark-streams/tidemark/third_party/badger"
	"github.com/tidemark-streams/tidemark/third_party/badger/options"
)

// DefaultMemoryBudget fits a 2-core, small-RAM machine: the Badger caches
// and memtables of one process stay around this size.
const DefaultMemoryBudget = 128 << 20

// Options configure OpenDB. The zero value is valid.
type Options struct {
	// MemoryBudget in bytes bounds what Badger keeps in memory: two
	// memtables of 1/32 each, the block cache 1/4, the index cache 1/8,
	// and tables of half a memtable. Default
	// DefaultMemoryBudget; at least 16 MiB.
	MemoryBudget int64
	// Logger receives Badger's own warnings and errors, and restore
	// progress. Default slog.Default().
	Logger *slog.Logger
	// ReadOnly opens an existing DB for inspection (tidemark state).
	ReadOnly bool
	// KeepCorrupt, when false (the default), moves damaged state aside
	// (to <dir>.corrupt-<UTC time>) and starts empty, so every store is
	// rebuilt from its changelog; see OpenDB. When true, OpenDB fails with
	// ErrCorrupt instead.
	KeepCorrupt bool
	// Owner is the application the state belongs to, recorded in a new DB
	// and checked on an existing one; see Owner. Zero: nothing is checked
	// or recorded. Read-only opens record nothing and refuse nothing.
	Owner Owner
	// NoVerifyChecksums turns off the check OpenDB makes before Badger
	// opens the directory: every table read once and every block's
	// checksum verified, so that a damaged table is found there and the
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

	// applyTxnLimit, when > 0, forces the staged Apply path for overlays
	// with more entries: tests use it to exercise that path on small data.
	applyTxnLimit int
	// levelZeroTables and restoreLevelZeroTables, when > 0, replace the
	// level-0 compaction triggers of bulk.go: tests use them to see the
	// difference with a few MB of writes.
	levelZeroTables, restoreLevelZeroTables int
	// valueLogFileSize, when > 0, replaces the value log file size: tests
	// use it to get several value log files from a few MB of values.
	valueLogFileSize int64
	// applyHook, when set, is called at each step of a staged Apply; an
	// error stops Apply there, as a crash would.
	applyHook func(step string) error
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

// badgerOptions sizes Badger from the memory budget. Badger's defaults
// (64 MiB memtables × 5, 256 MiB block cache, 4 compactors) assume a
// server; here memory and cores are shared with the JVM broker in tests and
// with the processing goroutines in production.
func badgerOptions(dir string, o Options) badger.Options {
	mem := o.MemoryBudget
	memtable := clamp(mem/32, 4<<20, 64<<20)
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
		// compactions. Restores raise it while they run (bulk.go).
		WithNumLevelZeroTables(o.l0Tables()).
		WithNumLevelZeroTablesStall(levelZeroTablesStall).
		WithBaseLevelSize(64 << 20).
		WithBlockCacheSize(mem / 4).
		WithIndexCacheSize(mem / 8).
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

func (o Options) l0Tables() int { return cmp.Or(o.levelZeroTables, levelZeroTables) }
func (o Options) restoreL0Tables() int {
	return cmp.Or(o.restoreLevelZeroTables, restoreLevelZeroTables)
}

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }
