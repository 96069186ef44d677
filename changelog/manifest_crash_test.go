package changelog

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A MANIFEST cut short after a crash, with the memtable logs of the
// crashed process still there: Badger replays the logs, the latest writes
// and offsets, on top of the older set of tables the cut MANIFEST names,
// and deletes the newer tables it no longer names. That is no committed
// prefix: the state must not be served with the offsets the logs carry.
func TestOpenDBAfterACrashWithATruncatedManifest(t *testing.T) {
	const commits = 4
	tp := TopicPartition{TopicName("app", testStoreKV), testPartition}
	build := func(t *testing.T, dir string) (crashed string) {
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
		// The last commit stays in the memtable log: the process is
		// killed (its directory copied while the DB is open).
		db, err := OpenDB(dir, Options{Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
		kv, _, _ := openTestStores(t, task)
		mustPut(t, kv, "key-000", fmt.Sprintf("commit %d", commits+1))
		if err := task.Apply(ChangelogOffsets{tp: commits + 1}); err != nil {
			t.Fatal(err)
		}
		crashed = filepath.Join(t.TempDir(), "crashed")
		if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return crashed
	}
	for _, frac := range []float64{0.5, 0.8, 0.9, 0.95, 1} {
		t.Run(fmt.Sprintf("cut to %.0f%%", frac*100), func(t *testing.T) {
			dir := build(t, filepath.Join(t.TempDir(), "state"))
			a, found, got := openAfterManifestCut(t, dir, frac, tp)
			want := map[string]string{}
			if found {
				for i := range 100 {
					want[fmt.Sprintf("key-%03d", i)] = fmt.Sprintf("commit %d", min(a.Offset, commits))
				}
				if a.Offset > commits {
					want["key-000"] = fmt.Sprintf("commit %d", a.Offset)
				}
			}
			if frac == 1 && (!found || a.Offset != commits+1) {
				t.Fatalf("intact crashed state: applied offset %d (found %v), want %d", a.Offset, found, commits+1)
			}
			var wrong []string
			for k, v := range want {
				if got[k] != v {
					wrong = append(wrong, fmt.Sprintf("%s=%q", k, got[k]))
				}
			}
			slices.Sort(wrong)
			if len(wrong) > 0 || len(got) != len(want) {
				t.Fatalf("state at applied offset %d (found %v) has %d keys, %d of them not what that offset reflects: %v ...",
					a.Offset, found, len(got), len(wrong), wrong[:min(3, len(wrong))])
			}
		})
	}
}
