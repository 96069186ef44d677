package changelog

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dirDigest is a digest of every file under dir: names, sizes and bytes.
func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			fmt.Fprintf(h, "dir %s\n", rel)
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "file %s %d\n", rel, len(data))
		h.Write(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func openOwned(t *testing.T, dir string, o Owner, log *logBuffer) (*DB, error) {
	t.Helper()
	opts := Options{Owner: o, Logger: quietLog}
	if log != nil {
		opts.Logger = log.logger()
	}
	return OpenDB(dir, opts)
}

func TestOwnerIsRecordedAndChecked(t *testing.T) {
	app := Owner{Application: "orders", Fingerprint: "topo-1"}
	for _, c := range []struct {
		name    string
		created Owner // the owner the state was written with
		open    Owner // the owner it is opened with
		wantErr error
		wiped   bool
		want    Owner // recorded after the open
	}{
		{"the same application and topology keeps its state", app, app, nil, false, app},
		{"another application is refused", app, Owner{"payments", "topo-1"}, ErrOwnedByOtherApplication, false, app},
		{"another application with no fingerprint is refused", app, Owner{Application: "payments"}, ErrOwnedByOtherApplication, false, app},
		{"a changed topology wipes the state", app, Owner{"orders", "topo-2"}, nil, true, Owner{"orders", "topo-2"}},
		{"no fingerprint keeps the state and the recorded one", app, Owner{Application: "orders"}, nil, false, app},
		{"a state without an owner is adopted", Owner{}, app, nil, false, app},
		{"a state recorded without a fingerprint takes the first one", Owner{Application: "orders"}, app, nil, false, app},
		{"an open without an owner checks nothing", app, Owner{}, nil, false, app},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			writeTestState(t, dir, Options{Owner: c.created}, 600)
			before := dirDigest(t, dir)
			var log logBuffer
			db, err := openOwned(t, dir, c.open, &log)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("OpenDB = %v, want %v", err, c.wantErr)
				}
				for _, s := range []string{dir, c.created.Application, c.open.Application, "delete"} {
					if !strings.Contains(err.Error(), s) {
						t.Fatalf("error %q does not mention %q", err, s)
					}
				}
				if after := dirDigest(t, dir); after != before {
					t.Fatal("refused state directory was changed")
				}
				db, err = OpenDB(dir, Options{ReadOnly: true, Logger: quietLog})
				if err != nil {
					t.Fatalf("read-only open of another application's state: %v", err)
				}
				defer db.Close()
			} else if err != nil {
				t.Fatalf("OpenDB: %v", err)
			} else {
				defer db.Close()
			}
			if got, ok := db.Owner(); got != c.want || ok != (c.want != Owner{}) {
				t.Fatalf("Owner() = %+v, %v; want %+v", got, ok, c.want)
			}
			stores, err := db.Stores()
			if err != nil {
				t.Fatal(err)
			}
			_, hasOffset, err := db.AppliedOffset(TopicPartition{TopicName("app", testStoreKV), testPartition})
			if err != nil {
				t.Fatal(err)
			}
			if c.wiped {
				if len(stores) != 0 || hasOffset {
					t.Fatalf("after a topology change: stores %v, applied offset %v; want none", stores, hasOffset)
				}
				if !strings.Contains(log.String(), "topology changed") {
					t.Fatalf("the log does not say why the state was wiped:\n%s", log.String())
				}
				task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
				kv, _, _ := openTestStores(t, task)
				if got := contents(t, kv); len(got) != 0 {
					t.Fatalf("wiped store still holds %d entries", len(got))
				}
			} else if len(stores) != 3 || !hasOffset {
				t.Fatalf("state was lost: stores %v, applied offset %v", stores, hasOffset)
			}
		})
	}
}

// After the wipe of a topology change, the new fingerprint is recorded:
// the state written since is kept on the next open.
func TestStateWrittenAfterATopologyChangeIsKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	writeTestState(t, dir, Options{Owner: Owner{"orders", "topo-1"}}, 100)
	db, err := openOwned(t, dir, Owner{"orders", "topo-2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
	kv, _, _ := openTestStores(t, task)
	mustPut(t, kv, "new", "state")
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	// Reopened with the new fingerprint: nothing is wiped again.
	db, err = openOwned(t, dir, Owner{"orders", "topo-2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	task = db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
	kv, _, _ = openTestStores(t, task)
	equalMaps(t, "after reopening with the new fingerprint", contents(t, kv), map[string]string{"new": "state"})
}

// copyDir copies the files of src into a new dst, recursively, as a crash
// leaves them when taken while the DB is open.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			copyDir(t, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
			continue
		}
		if e.Name() == "LOCK" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// After an unclean shutdown the owner is checked as after a clean one (the
// STATE file records it, apart from Badger's logs): another application is
// refused, and the first application's state is intact.
func TestAnotherApplicationsStateAfterACrashIsRefusedAndKept(t *testing.T) {
	live := filepath.Join(t.TempDir(), "live")
	orders := Owner{"orders", "topo-1"}
	db, err := openOwned(t, live, orders, nil)
	if err != nil {
		t.Fatal(err)
	}
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
	kv, _, _ := openTestStores(t, task)
	mustPut(t, kv, "a", "1", "b", "2")
	if err := task.Apply(ChangelogOffsets{{TopicName("app", testStoreKV), testPartition}: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "state")
	copyDir(t, live, dir) // the directory as a kill -9 now would leave it
	_ = db.Close()

	if _, err := openOwned(t, dir, Owner{"payments", "topo-1"}, nil); !errors.Is(err, ErrOwnedByOtherApplication) {
		t.Fatalf("OpenDB by another application after a crash = %v, want ErrOwnedByOtherApplication", err)
	}
	db, err = openOwned(t, dir, orders, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	task = db.NewTaskState(TaskStateConfig{AppID: "app", Partition: testPartition})
	kv, _, _ = openTestStores(t, task)
	equalMaps(t, "the first application's state", contents(t, kv), map[string]string{"a": "1", "b": "2"})
	if a, ok, _ := db.AppliedOffset(TopicPartition{TopicName("app", testStoreKV), testPartition}); !ok || a.Offset != 7 {
		t.Fatalf("applied offset %+v, %v; want 7", a, ok)
	}
}
