package changelog

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tidemark-streams/tidemark/store"
)

// benchKeys is the size of the DBs the verification benchmarks use:
// TIDEMARK_BENCH_VERIFY_KEYS, default 1M keys of 100-byte values.
func benchKeys() int {
	if s := os.Getenv("TIDEMARK_BENCH_VERIFY_KEYS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
	}
	return 1_000_000
}

// randomValue fills a 100-byte value with random bytes: state compresses
// far less than a repeated byte.
func randomValue(r *rand.Rand, v []byte) []byte {
	v = v[:0]
	for len(v) < 100 {
		v = binary.LittleEndian.AppendUint64(v, r.Uint64())
	}
	return v[:100]
}

// writeKV fills a key-value store of dir with keys entries, in random key
// order, applied in commits of 2k entries (one Badger transaction each).
func writeKV(b *testing.B, db *DB, keys int) {
	b.Helper()
	task := db.NewTaskState(TaskStateConfig{AppID: "bench", Partition: 0})
	s, err := task.Open(store.Spec{Name: "kv", Kind: store.KindKeyValue}, 0)
	if err != nil {
		b.Fatal(err)
	}
	kv := s.(store.KeyValue)
	r := rand.New(rand.NewPCG(3, 4))
	perm := r.Perm(keys)
	var key, value []byte
	for i, k := range perm {
		key = fmt.Appendf(key[:0], "key-%08d", k)
		value = randomValue(r, value)
		if err := kv.Put(key, value); err != nil {
			b.Fatal(err)
		}
		if i%2000 == 1999 || i == keys-1 {
			if err := task.Apply(ChangelogOffsets{{"t", 0}: int64(i + 1)}); err != nil {
				b.Fatal(err)
			}
		}
	}
	_ = task.Close()
}

// dropPageCache asks the kernel to drop the cached pages of every file of
// dir (clean pages only, which they are after Close), so that an open
// reads from the disk.
func dropPageCache(b *testing.B, dir string) {
	b.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		_ = unix.Fdatasync(int(f.Fd()))
		_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		_ = f.Close()
	}
}

// BenchmarkOpenVerify measures OpenDB and the open of its task DB,
// holding 1M keys of 100-byte values (~130 MB of tables), with each way of
// checking table checksums: none, the pre-open verification (the default;
// with an Owner, read from the STATE file), Badger's OnTableRead mode, and
// Badger's DB.VerifyChecksum after the open; with the page cache warm (a
// restart) and cold (a reboot).
func BenchmarkOpenVerify(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "state")
	db, err := OpenDB(dir, Options{Logger: quietLog, NoVerifyChecksums: true})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	writeKV(b, db, benchKeys())
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	tdir := taskDirOf(b, dir)
	lsm := dirSize(tdir, "*.sst")
	b.Logf("wrote %d keys in %s: %d MB of tables", benchKeys(), time.Since(start).Round(time.Millisecond), lsm>>20)

	modes := []struct {
		name  string
		opts  Options
		after bool // call Badger's VerifyChecksum after the open
	}{
		{"none", Options{NoVerifyChecksums: true}, false},
		{"pre-open", Options{}, false},
		{"pre-open+owner", Options{Owner: Owner{"bench", "f"}}, false},
		{"badger-OnTableRead", Options{NoVerifyChecksums: true, VerifyChecksums: true}, false},
		{"badger-VerifyChecksum", Options{NoVerifyChecksums: true}, true},
	}
	for _, cache := range []string{"warm", "cold"} {
		for _, m := range modes {
			b.Run(cache+"/"+m.name, func(b *testing.B) {
				opts := m.opts
				opts.Logger = quietLog
				var cpu time.Duration
				for b.Loop() {
					b.StopTimer()
					if cache == "cold" {
						dropPageCache(b, tdir)
					}
					cpu0 := cpuTime()
					b.StartTimer()
					db, err := OpenDB(dir, opts)
					if err != nil {
						b.Fatal(err)
					}
					tdb, err := db.acquire(defaultTaskID(0), true) // OpenDB opens no Badger DB
					if err != nil {
						b.Fatal(err)
					}
					if m.after {
						if err := tdb.bdb.VerifyChecksum(); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					cpu += cpuTime() - cpu0
					_ = db.Close()
					b.StartTimer()
				}
				b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/open")
				b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/open")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkWriteVerify measures the CPU a write workload costs with and
// without Badger's OnTableRead mode, which re-reads and checksums every
// table a flush or compaction writes: 1M random keys applied in 2k-entry
// commits, then Close (which waits for running compactions).
func BenchmarkWriteVerify(b *testing.B) {
	for _, m := range []struct {
		name string
		opts Options
	}{
		{"none", Options{}},
		{"badger-OnTableRead", Options{VerifyChecksums: true}},
	} {
		b.Run(m.name, func(b *testing.B) {
			var cpu, wall time.Duration
			for b.Loop() {
				b.StopTimer()
				opts := m.opts
				opts.Logger = quietLog
				db, err := OpenDB(filepath.Join(b.TempDir(), "state"), opts)
				if err != nil {
					b.Fatal(err)
				}
				cpu0, t0 := cpuTime(), time.Now()
				b.StartTimer()
				writeKV(b, db, benchKeys())
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += cpuTime() - cpu0
				wall += time.Since(t0)
				b.StartTimer()
			}
			b.ReportMetric(cpu.Seconds()*1e6/float64(benchKeys()*b.N), "cpu-µs/key")
			b.ReportMetric(float64(benchKeys()*b.N)/wall.Seconds(), "keys/s")
		})
	}
}

func dirSize(dir, pattern string) int64 {
	files, _ := filepath.Glob(filepath.Join(dir, pattern))
	var n int64
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}
