package changelog

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/store"
)

// BenchmarkKafkaRestore restores a key-value changelog of 1M keys with
// 100-byte values from the real broker into an empty directory (the
// rebuild path) and reports records/s and the peak RSS of the restore.
// Targets: ≥ 500k records/s, ≤ 256 MiB. Size it with
// TIDEMARK_BENCH_RESTORE_KEYS.
//
// Sub-benchmarks: "rebuilt" is the default, a restore into an empty
// directory written sorted (rebuild.go); "written" writes the records in
// changelog order in restore mode, as restores into existing state do.
// settle-cpu-s adds the CPU until the task DB no longer needs a level-0
// compaction, which restore mode defers until after the restore.
func BenchmarkKafkaRestore(b *testing.B) {
	keys := 1_000_000
	if s := os.Getenv("TIDEMARK_BENCH_RESTORE_KEYS"); s != "" {
		keys, _ = strconv.Atoi(s)
	}
	brokers := kafkatest.Brokers(b)
	topic := kafkatest.NewTopic(b, 1, map[string]string{"cleanup.policy": "compact"})
	produceChangelog(b, topic, keys)
	b.Run("rebuilt", func(b *testing.B) { benchRestore(b, brokers, topic, keys, Options{Logger: quietLog}) })
	b.Run("written", func(b *testing.B) { benchRestore(b, brokers, topic, keys, Options{Logger: quietLog, noRebuild: true}) })
}

func benchRestore(b *testing.B, brokers []string, topic string, keys int, opts Options) {
	var last RestoreResult
	var peak, peakAnon int64
	var cpu, wall, settled time.Duration
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		db, err := OpenDB(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		debug.FreeOSMemory()
		resetPeakRSS(b)
		sampler := startAnonSampler()
		cpu0 := cpuTime()
		b.StartTimer()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		last, err = db.Restore(ctx, []RestoreTarget{{Store: "bench", Partition: 0, Topic: topic, Kind: store.KindKeyValue}},
			RestoreOptions{ClientOpts: []kgo.Opt{kgo.SeedBrokers(brokers...)}, Logger: quietLog})
		cancel()
		b.StopTimer()
		cpu += cpuTime() - cpu0
		wall += last.Duration
		peakAnon = max(peakAnon, sampler())
		peak = max(peak, peakRSS(b))
		db.mu.Lock()
		tdb := db.tasks[defaultTaskID(0)]
		db.mu.Unlock()
		for tdb != nil && levelTables(tdb)[0] >= levelZeroTables {
			time.Sleep(10 * time.Millisecond)
		}
		settled += cpuTime() - cpu0
		b.Logf("after restore: %s", rssBreakdown())
		if path := os.Getenv("TIDEMARK_BENCH_HEAP_PROFILE"); path != "" {
			if f, err := os.Create(path); err == nil {
				_ = pprof.WriteHeapProfile(f)
				_ = f.Close()
			}
		}
		if err != nil {
			b.Fatal(err)
		}
		if last.Records != int64(keys) {
			b.Fatalf("restored %d records, want %d", last.Records, keys)
		}
		_ = db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(last.Records)*float64(b.N)/wall.Seconds(), "records/s")
	// The machine is shared: records per CPU-second of this process (all
	// its goroutines: fetch, decode, Badger) says what a dedicated core
	// pair would sustain better than wall time does.
	b.ReportMetric(float64(last.Records)*float64(b.N)/cpu.Seconds(), "records/cpu-s")
	b.ReportMetric(settled.Seconds()/float64(b.N), "settle-cpu-s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(peakAnon)/(1<<20), "peak-anon-MiB")
}

func produceChangelog(b *testing.B, topic string, keys int) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkatest.Brokers(b)...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close() // before the restore: its buffers are not the restore's
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Random values: state (counts, Avro aggregates) compresses far less
	// than a repeated byte, and a compressible value would make every
	// fetch decompress into many times its size.
	rnd := rand.New(rand.NewPCG(1, 2))
	errc := make(chan error, 1)
	start := time.Now()
	for i := range keys {
		value := make([]byte, 104)
		for j := 0; j < len(value); j += 8 {
			binary.LittleEndian.PutUint64(value[j:], rnd.Uint64())
		}
		value = value[:100]
		cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf([]byte{tagKeyValue}, "key-%08d", i), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-errc:
		b.Fatal(err)
	default:
	}
	b.Logf("produced %d records in %s", keys, time.Since(start).Round(time.Millisecond))
}

// resetPeakRSS resets the kernel's VmHWM for this process, so peakRSS
// measures what the restore itself needed.
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("cannot reset peak RSS (%v): the figure includes setup", err)
	}
}

func peakRSS(b *testing.B) int64 {
	b.Helper()
	v, ok := procStatusBytes("VmHWM")
	if !ok {
		b.Fatal("no VmHWM in /proc/self/status")
	}
	return v
}

// BenchmarkApply measures Apply of overlays of 100-byte values over 100k
// existing keys: the per-commit cost after EndTransaction. With the default
// memory budget a Badger transaction holds about 4k such entries; bigger
// overlays take the staged path.
func BenchmarkApply(b *testing.B) {
	for _, c := range []struct {
		name   string
		batch  int
		staged bool
	}{{"one transaction/2k entries", 2_000, false}, {"staged/10k entries", 10_000, true}} {
		b.Run(c.name, func(b *testing.B) {
			db := openTestDB(b, Options{Logger: quietLog})
			task := db.NewTaskState(TaskStateConfig{AppID: "bench", Partition: 0})
			s, err := task.Open(store.Spec{Name: "kv", Kind: store.KindKeyValue}, 0)
			if err != nil {
				b.Fatal(err)
			}
			kv := s.(store.KeyValue)
			value := []byte(strings.Repeat("v", 100))
			batch := c.batch
			var key []byte
			round := 0
			for b.Loop() {
				b.StopTimer()
				for i := range batch {
					key = fmt.Appendf(key[:0], "key-%08d", (round*batch+i)%100_000)
					if err := kv.Put(key, value); err != nil {
						b.Fatal(err)
					}
				}
				round++
				b.StartTimer()
				if err := task.Apply(ChangelogOffsets{{"t", 0}: int64(round)}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "entries/s")
			if st := db.Stats(); (st.StagedApplies > 0) != c.staged {
				b.Fatalf("%d of %d applies were staged", st.StagedApplies, st.Applies)
			}
		})
	}
}

func rssBreakdown() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, line := range strings.Split(string(data), "\n") {
		for _, k := range []string{"VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"} {
			if strings.HasPrefix(line, k+":") {
				parts = append(parts, strings.Join(strings.Fields(line), " "))
			}
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	parts = append(parts, fmt.Sprintf("GoHeapSys: %d MiB", ms.HeapSys>>20))
	return strings.Join(parts, ", ")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startAnonSampler samples RssAnon (process memory not backed by files:
// heap, Badger arenas) every 10 ms; the returned func stops it and returns
// the peak. File-backed pages (mmapped tables) count in VmHWM but are
// page cache the kernel can drop.
func startAnonSampler() func() int64 {
	stop := make(chan struct{})
	done := make(chan int64)
	go func() {
		var peak int64
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, rssAnon())
			select {
			case <-stop:
				done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 { close(stop); return <-done }
}

func rssAnon() int64 {
	v, _ := procStatusBytes("RssAnon")
	return v
}

// procStatusBytes reads one "<field>: N kB" line of /proc/self/status.
func procStatusBytes(field string) (int64, bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// BenchmarkNewKeys is the state side of a count over new keys, the
// steady-state workload the level-0 trigger and the number of task DBs
// matter to: per record a Get that misses (it consults the bloom filter of
// every level-0 table) and a Put of an 8-byte count, applied every 2000
// records of a task; 1M keys (TIDEMARK_BENCH_NEWKEYS) in random order,
// spread over 1, 4 and 8 tasks. It reports records per CPU-second of the
// process (Badger's flushes and compactions included) and peak RSS.
func BenchmarkNewKeys(b *testing.B) {
	keys := 1_000_000
	if s := os.Getenv("TIDEMARK_BENCH_NEWKEYS"); s != "" {
		keys, _ = strconv.Atoi(s)
	}
	for _, tasks := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("tasks=%d", tasks), func(b *testing.B) {
			perm := rand.New(rand.NewPCG(7, 8)).Perm(keys)
			var cpu time.Duration
			var peak, peakAnon int64
			for b.Loop() {
				b.StopTimer()
				db, err := OpenDB(b.TempDir(), Options{Logger: quietLog})
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				debug.FreeOSMemory()
				resetPeakRSS(b)
				sampler := startAnonSampler()
				cpu0 := cpuTime()
				b.StartTimer()
				kvs := make([]store.KeyValue, tasks)
				states := make([]*TaskState, tasks)
				pending := make([]int, tasks)
				for i := range tasks {
					states[i] = db.NewTaskState(TaskStateConfig{ID: fmt.Sprintf("0_%d", i), AppID: "bench", Partition: int32(i)})
					s, err := states[i].Open(store.Spec{Name: "counts", Kind: store.KindKeyValue}, int32(i))
					if err != nil {
						b.Fatal(err)
					}
					kvs[i] = s.(store.KeyValue)
				}
				var key []byte
				value := binary.BigEndian.AppendUint64(nil, 1)
				for _, k := range perm {
					i := k % tasks
					key = fmt.Appendf(key[:0], "key-%08d", k)
					if _, _, err := kvs[i].Get(key); err != nil {
						b.Fatal(err)
					}
					if err := kvs[i].Put(key, value); err != nil {
						b.Fatal(err)
					}
					if pending[i]++; pending[i] == 2000 {
						pending[i] = 0
						if err := states[i].Apply(nil); err != nil {
							b.Fatal(err)
						}
					}
				}
				for _, st := range states {
					if err := st.Apply(nil); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				cpu += cpuTime() - cpu0
				peakAnon = max(peakAnon, sampler())
				peak = max(peak, peakRSS(b))
				if path := os.Getenv("TIDEMARK_BENCH_HEAP_PROFILE"); path != "" {
					if f, err := os.Create(fmt.Sprintf("%s.tasks%d", path, tasks)); err == nil {
						_ = pprof.WriteHeapProfile(f)
						_ = f.Close()
					}
				}
				_ = db.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(keys*b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(keys*b.N)/cpu.Seconds(), "records/cpu-s")
			b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
			b.ReportMetric(float64(peakAnon)/(1<<20), "peak-anon-MiB")
		})
	}
}
