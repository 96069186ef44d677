package changelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4/fb"
	"github.com/tidemark-streams/tidemark/internal/testlog"
	"github.com/tidemark-streams/tidemark/store"
)

// Helpers that damage a state directory the ways disks and operators do.
// Every test that breaks local state goes through them.

// corrupt overwrites Badger's MANIFEST, the file that says which tables
// make up the DB.
func corrupt(t *testing.T, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(taskDirOf(t, dir), "MANIFEST"), []byte("garbage, not a manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tableFiles returns the table files of the task DB in the state
// directory dir, in name order.
func tableFiles(t *testing.T, dir string) []string {
	t.Helper()
	tables, err := filepath.Glob(filepath.Join(taskDirOf(t, dir), "*.sst"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) == 0 {
		t.Fatalf("no table in %s", dir)
	}
	slices.Sort(tables)
	return tables
}

// span is a byte range of a file.
type span struct{ off, len int }

// tableBlocks reads the block ranges of a table file from its index.
// Badger's table layout: blocks, then the index, its 4-byte length, the
// checksum of the index and the checksum's 4-byte length.
func tableBlocks(t *testing.T, path string) []span {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := len(data) - 4
	end -= int(binary.BigEndian.Uint32(data[end:])) // the checksum
	end -= 4
	indexLen := int(binary.BigEndian.Uint32(data[end:]))
	index := fb.GetRootAsTableIndex(data[end-indexLen:end], 0)
	var bo fb.BlockOffset
	spans := make([]span, index.OffsetsLength())
	for i := range spans {
		if !index.Offsets(&bo, i) {
			t.Fatalf("%s: no block %d", path, i)
		}
		spans[i] = span{int(bo.Offset()), int(bo.Len())}
	}
	return spans
}

// overwrite writes b at off in path.
func overwrite(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// flipByte inverts one bit of the byte at off in path.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// testSeed returns TIDEMARK_CORRUPT_SEED, or a new seed; the test logs it
// so a failure can be replayed.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TIDEMARK_CORRUPT_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (rerun with TIDEMARK_CORRUPT_SEED=%d)", seed, seed)
	return seed
}

// breakEntries writes 0xff over the first entry header of every block of
// every table except each table's last block: a block then still passes
// Badger's structural checks, and decoding its entries panics. The last
// block holds the largest keys, the meta keys OpenDB reads, and Badger
// reads it when it opens the table.
func breakEntries(t *testing.T, dir string) {
	t.Helper()
	for _, path := range tableFiles(t, dir) {
		blocks := tableBlocks(t, path)
		for _, b := range blocks[:len(blocks)-1] {
			overwrite(t, path, int64(b.off), []byte{0xff, 0xff, 0xff, 0xff})
		}
	}
}

const (
	testStoreKV      = "counts"
	testStoreWindow  = "per-minute"
	testStoreSession = "visits"
	testPartition    = 3
)

// writeTestState fills a key-value, a window and a session store with n
// entries each, applied with changelog offsets, and leaves everything in
// table files: Flatten writes the memtable out, Close syncs.
func writeTestState(t *testing.T, dir string, opts Options, n int) {
	t.Helper()
	opts.Logger = orQuiet(opts.Logger)
	db, err := OpenDB(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
	kv, win, ses := openTestStores(t, task)
	for i := range n {
		k := fmt.Appendf(nil, "key-%05d", i)
		v := fmt.Appendf(nil, "value of %05d, long enough to fill a few blocks", i)
		if err := kv.Put(k, v); err != nil {
			t.Fatal(err)
		}
		if err := win.Put(k, int64(i)*60_000, v); err != nil {
			t.Fatal(err)
		}
		if err := ses.Put(k, int64(i), int64(i)+10, v); err != nil {
			t.Fatal(err)
		}
		if i%500 == 499 || i == n-1 {
			if err := task.Apply(ChangelogOffsets{{TopicName("app", testStoreKV), testPartition}: int64(i + 1)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := task.tdb.bdb.Flatten(1); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func openTestStores(t *testing.T, task *TaskState) (store.KeyValue, store.Window, store.Session) {
	t.Helper()
	kv, err := task.Open(store.Spec{Name: testStoreKV, Kind: store.KindKeyValue}, testPartition)
	if err != nil {
		t.Fatal(err)
	}
	win, err := task.Open(store.Spec{Name: testStoreWindow, Kind: store.KindWindow, WindowSize: 60_000}, testPartition)
	if err != nil {
		t.Fatal(err)
	}
	ses, err := task.Open(store.Spec{Name: testStoreSession, Kind: store.KindSession}, testPartition)
	if err != nil {
		t.Fatal(err)
	}
	return kv.(store.KeyValue), win.(store.Window), ses.(store.Session)
}

func orQuiet(l *slog.Logger) *slog.Logger {
	if l == nil {
		return quietLog
	}
	return l
}

// logBuffer is a logger that keeps what it was told, for tests that check
// what OpenDB said.
type logBuffer struct{ testlog.Buffer }

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// requireRebuilt checks that db is a fresh DB in dir, that the old state
// of the test's task was moved aside (not deleted) and that the log says
// so.
func requireRebuilt(t *testing.T, dir string, db *DB, log *logBuffer) {
	t.Helper()
	requireMovedAside(t, filepath.Join(dir, tasksDir, defaultTaskID(testPartition)+".corrupt-*"), db, log)
}

// requireMovedAside checks that one directory matches the glob aside and
// holds files, that db holds no state, and that the log says why.
func requireMovedAside(t *testing.T, pattern string, db *DB, log *logBuffer) {
	t.Helper()
	aside, _ := filepath.Glob(pattern)
	if len(aside) != 1 {
		t.Fatalf("damaged state not moved aside: %v", aside)
	}
	if files, _ := os.ReadDir(aside[0]); len(files) == 0 {
		t.Fatal("moved-aside state lost its files")
	}
	if stores, err := db.Stores(); err != nil || len(stores) != 0 {
		t.Fatalf("rebuilt DB lists stores %v (%v), want none", stores, err)
	}
	if _, ok, err := db.AppliedOffset(TopicPartition{TopicName("app", testStoreKV), testPartition}); ok || err != nil {
		t.Fatalf("rebuilt DB has an applied offset (%v, %v)", ok, err)
	}
	if !strings.Contains(log.String(), "moving it aside and rebuilding its stores from their changelogs") {
		t.Fatalf("log does not say the state is rebuilt:\n%s", log)
	}
}

func TestOpenDBRebuildsDamagedState(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"a flipped byte in a table", func(t *testing.T, dir string) {
			path := tableFiles(t, dir)[0]
			blocks := tableBlocks(t, path)
			b := blocks[len(blocks)/2]
			flipByte(t, path, int64(b.off+b.len/2))
		}},
		{"256 random bytes at a random offset of a table", func(t *testing.T, dir string) {
			r := rand.New(rand.NewPCG(testSeed(t), 0))
			tables := tableFiles(t, dir)
			path := tables[r.IntN(len(tables))]
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			junk := make([]byte, 256)
			for i := range junk {
				junk[i] = byte(r.Uint32())
			}
			off := r.Int64N(fi.Size() - int64(len(junk)) + 1)
			t.Logf("256 random bytes at %d of %s (%d bytes)", off, filepath.Base(path), fi.Size())
			overwrite(t, path, off, junk)
		}},
		{"the footer of a table overwritten", func(t *testing.T, dir string) {
			// Badger reads it in a goroutine of its own when it opens the
			// table: without the verification, a panic there kills the
			// process, and every restart.
			path := tableFiles(t, dir)[0]
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			overwrite(t, path, fi.Size()-8, bytes.Repeat([]byte{0xa5}, 8))
		}},
		{"a table deleted", func(t *testing.T, dir string) {
			if err := os.Remove(tableFiles(t, dir)[0]); err != nil {
				t.Fatal(err)
			}
		}},
		{"the MANIFEST overwritten", corrupt},
		{"the MANIFEST deleted", func(t *testing.T, dir string) {
			// Badger would start afresh, delete the tables, and keep what
			// its memtable logs hold: the latest writes and offsets alone.
			if err := os.Remove(filepath.Join(taskDirOf(t, dir), "MANIFEST")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			writeTestState(t, dir, Options{}, 3000)
			c.damage(t, dir)
			var log logBuffer
			db, err := OpenDB(dir, Options{Logger: log.logger()})
			if err != nil {
				t.Fatalf("OpenDB of damaged state: %v", err)
			}
			defer db.Close()
			requireRebuilt(t, dir, db, &log)
		})
	}
}

// A MANIFEST cut short (the tail of its log of table changes lost) names
// an older set of tables. That is a state Badger held before, with the
// offsets it reflected then, so OpenDB serves it; whatever it lacks
// is replayed from the changelog. Each table below is one Close's flush of
// one commit, so a shorter MANIFEST gives an earlier commit or none.
func TestOpenDBWithATruncatedManifestHoldsACommittedPrefix(t *testing.T) {
	const commits = 5
	tp := TopicPartition{TopicName("app", testStoreKV), testPartition}
	build := func(t *testing.T, dir string) {
		for c := 1; c <= commits; c++ {
			db, err := OpenDB(dir, Options{Logger: quietLog})
			if err != nil {
				t.Fatal(err)
			}
			task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
			kv, _, _ := openTestStores(t, task)
			for i := range 100 {
				mustPut(t, kv, fmt.Sprintf("key-%03d", i), fmt.Sprintf("commit %d", c))
			}
			if err := task.Apply(ChangelogOffsets{tp: int64(c)}); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, frac := range []float64{0.2, 0.5, 0.8, 0.95} {
		t.Run(fmt.Sprintf("cut to %.0f%%", frac*100), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			build(t, dir)
			a, found, got := openAfterManifestCut(t, dir, frac, tp)
			want := map[string]string{}
			if found {
				for i := range 100 {
					want[fmt.Sprintf("key-%03d", i)] = fmt.Sprintf("commit %d", a.Offset)
				}
			}
			t.Logf("applied offset %d (found %v), %d keys", a.Offset, found, len(got))
			equalMaps(t, "state after a truncated MANIFEST", got, want)
		})
	}
}

// A panic inside Badger while a store reads (damage that appeared after
// the open, here one opened without verification) is an error wrapping
// ErrCorrupt that names the store and partition; the process goes on.
func TestPanicsInBadgerReadsAreErrCorrupt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	writeTestState(t, dir, Options{}, 3000)
	breakEntries(t, dir)
	var log logBuffer
	db, err := OpenDB(dir, Options{Logger: log.logger(), NoVerifyChecksums: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
	defer task.Close()
	kv, win, ses := openTestStores(t, task)
	key := []byte("key-01500")
	all := func([]byte, int64, []byte) bool { return true }
	for _, c := range []struct {
		name, store string
		read        func() error
	}{
		{"key-value Get", testStoreKV, func() error { _, _, err := kv.Get(key); return err }},
		{"key-value Range", testStoreKV, func() error { return kv.Range(nil, nil, func(k, v []byte) bool { return true }) }},
		{"window Fetch", testStoreWindow, func() error { _, _, err := win.Fetch(key, 1500*60_000); return err }},
		{"window FetchRange", testStoreWindow, func() error {
			return win.FetchRange(key, 0, 1<<62, func(int64, []byte) bool { return true })
		}},
		{"window FetchAll", testStoreWindow, func() error { return win.FetchAll(1000*60_000, 1100*60_000, all) }},
		{"session FindSessions", testStoreSession, func() error {
			return ses.FindSessions(key, 0, 1<<62, func(int64, int64, []byte) bool { return true })
		}},
		{"DB.Scan (tidemark state)", testStoreKV, func() error {
			return db.Scan(StoreInstance{Name: testStoreKV, Partition: testPartition, Kind: store.KindKeyValue}, ScanOptions{}, func(Entry) bool { return true })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.read()
			if !IsCorrupt(err) {
				t.Fatalf("read of damaged blocks = %v, want an error wrapping ErrCorrupt", err)
			}
			if want := fmt.Sprintf("%q partition %d", c.store, testPartition); !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not name %s", err, want)
			}
		})
	}
	if !strings.Contains(log.String(), "Badger panicked reading local state") {
		t.Fatalf("the log does not say what happened:\n%s", log.String())
	}
}

// A panic in the caller's callback is the caller's: it is not turned into
// ErrCorrupt (which would make the runtime rebuild state over a bug).
func TestPanicsInCallbacksAreNotErrCorrupt(t *testing.T) {
	db := openTestDB(t, Options{Logger: quietLog})
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
	kv, win, _ := openTestStores(t, task)
	mustPut(t, kv, "a", "1", "b", "2")
	if err := win.Put([]byte("a"), 0, []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}
	mustPut(t, kv, "c", "3") // one in the overlay too
	boom := errors.New("boom")
	for _, c := range []struct {
		name string
		read func()
	}{
		{"Range over Badger", func() { _ = kv.Range([]byte("a"), []byte("b"), func([]byte, []byte) bool { panic(boom) }) }},
		{"Range over the overlay", func() { _ = kv.Range([]byte("c"), nil, func([]byte, []byte) bool { panic(boom) }) }},
		{"FetchAll", func() { _ = win.FetchAll(0, 10, func([]byte, int64, []byte) bool { panic(boom) }) }},
		{"DB.Scan", func() {
			_ = db.Scan(StoreInstance{Name: testStoreKV, Partition: testPartition, Kind: store.KindKeyValue}, ScanOptions{}, func(Entry) bool { panic(boom) })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != boom {
					t.Fatalf("recovered %v, want the callback's own panic", r)
				}
			}()
			c.read()
		})
	}
}

// A DB closed under a reader (a shutdown race) is not damage.
func TestReadsOfAClosedDBAreNotErrCorrupt(t *testing.T) {
	db, err := OpenDB(t.TempDir(), Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
	kv, _, _ := openTestStores(t, task)
	mustPut(t, kv, "a", "1")
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := kv.Get([]byte("a")); err != nil { // the task now holds a read snapshot
		t.Fatal(err)
	}
	_ = db.Close()
	err = kv.Range(nil, nil, func([]byte, []byte) bool { return true })
	if err == nil || IsCorrupt(err) {
		t.Fatalf("Range after Close = %v, want an error that is not ErrCorrupt", err)
	}
}

func TestQuarantineMovesAClosedStateDirAside(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	writeTestState(t, dir, Options{}, 10)
	var log logBuffer
	moved, err := Quarantine(dir, log.logger())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(moved, dir+".corrupt-") {
		t.Fatalf("moved to %s", moved)
	}
	db, err := OpenDB(dir, Options{Logger: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	requireMovedAside(t, dir+".corrupt-*", db, &log)
	if _, err := Quarantine(filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Fatal("Quarantine of a missing directory succeeded")
	}
}

// Values of 1 KiB and more live in Badger's value log, which OpenDB's
// check does not read. Badger logs a failed read of one (a damaged entry
// fails its CRC; one past where Badger cut a damaged last file at open is
// gone) and returns an empty value without an error: the stores report
// ErrCorrupt instead of serving it.
func TestADamagedValueInTheValueLogIsErrCorrupt(t *testing.T) {
	for _, c := range []struct {
		name string
		file func(logs []string) string
	}{
		{"in an older value log file", func(logs []string) string { return logs[0] }},
		{"in the last value log file", func(logs []string) string { return logs[len(logs)-1] }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			opts := Options{Logger: quietLog, valueLogFileSize: 1 << 20}
			db, err := OpenDB(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
			kv, _, _ := openTestStores(t, task)
			big := strings.Repeat("a value too large for the LSM tree ", 100)
			const n = 800 // ~2.8 MB: three value log files
			for i := range n {
				mustPut(t, kv, fmt.Sprintf("key-%03d", i), fmt.Sprintf("%03d %s", i, big))
				if i%100 == 99 {
					if err := task.Apply(nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			_ = db.Close()
			logs, _ := filepath.Glob(filepath.Join(taskDirOf(t, dir), "*.vlog"))
			slices.Sort(logs)
			if len(logs) < 2 {
				t.Fatalf("%d value log files, want several", len(logs))
			}
			// One byte inside one value: the entry still parses, only its
			// CRC tells.
			path := c.file(logs)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			i := bytes.Index(data[len(data)/4:], []byte(big))
			if i < 0 {
				t.Fatalf("no value in %s", path)
			}
			flipByte(t, path, int64(len(data)/4+i+len(big)/2))

			db, err = OpenDB(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			task = db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
			kv, _, _ = openTestStores(t, task)
			var corrupt int
			for i := range n {
				v, _, err := kv.Get(fmt.Appendf(nil, "key-%03d", i))
				switch {
				case IsCorrupt(err):
					corrupt++
				case err != nil:
					t.Fatalf("Get: %v, want nil or ErrCorrupt", err)
				case string(v) != fmt.Sprintf("%03d %s", i, big):
					t.Fatalf("key-%03d: a damaged value was served: %.40q", i, v)
				}
			}
			if corrupt == 0 {
				t.Fatal("no read found the damaged value")
			}
			t.Logf("%d of %d reads found damage", corrupt, n)
			err = kv.Range(nil, nil, func([]byte, []byte) bool { return true })
			if !IsCorrupt(err) {
				t.Fatalf("Range over the damaged value = %v, want ErrCorrupt", err)
			}
		})
	}
}

// A directory a DB has open is neither verified (a compaction may be
// replacing its tables) nor moved aside.
func TestAStateDirInUseIsLeftAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	db, err := OpenDB(dir, Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := OpenDB(dir, Options{Logger: quietLog}); err == nil || IsCorrupt(err) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second OpenDB of an open dir = %v, want an in-use error", err)
	}
	if _, err := Quarantine(dir, quietLog); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("Quarantine of an open dir = %v, want an in-use error", err)
	}
	if aside, _ := filepath.Glob(dir + ".corrupt-*"); len(aside) != 0 {
		t.Fatalf("a state dir in use was moved aside: %v", aside)
	}
}

// openAfterManifestCut cuts the MANIFEST of dir's task DB to frac of its
// size, opens the state directory and returns tp's applied offset and the
// test key-value store's contents.
func openAfterManifestCut(t *testing.T, dir string, frac float64, tp TopicPartition) (a AppliedOffset, found bool, got map[string]string) {
	t.Helper()
	m := filepath.Join(taskDirOf(t, dir), "MANIFEST")
	fi, err := os.Stat(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(m, int64(float64(fi.Size())*frac)); err != nil {
		t.Fatal(err)
	}
	db, err := OpenDB(dir, Options{Logger: quietLog})
	if err != nil {
		t.Fatalf("OpenDB: %v", err)
	}
	defer db.Close()
	if a, found, err = db.AppliedOffset(tp); err != nil {
		t.Fatal(err)
	}
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
	kv, _, _ := openTestStores(t, task)
	return a, found, contents(t, kv)
}
