package changelog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

// Random writes, Applies (small and staged), Discards and crashes in the
// middle of a staged Apply: after every reopen Badger holds exactly the
// state of the last Apply that reached its commit point, and the offset
// recorded with it — never a mix, never a lost Apply.
func TestPropertyApplyIsAtomicAcrossCrashes(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TIDEMARK_CHANGELOG_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with TIDEMARK_CHANGELOG_SEED=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 11))
	dir := t.TempDir()
	tp := TopicPartition{"a-s-changelog", 0}
	failAt := ""
	opts := Options{Logger: quietLog, applyTxnLimit: 3, applyHook: func(step string) error {
		if step == failAt {
			return errors.New("crash at " + step)
		}
		return nil
	}}
	spec := store.Spec{Name: "s", Kind: store.KindKeyValue, Logged: true}
	var db *DB
	var task *TaskState
	var kv store.KeyValue
	open := func() {
		var err error
		if db, err = OpenDB(dir, opts); err != nil {
			t.Fatal(err)
		}
		task = db.NewTaskState(TaskStateConfig{AppID: "a", Partition: 0, Producer: &fakeProducer{}})
		s, err := task.Open(spec, 0)
		if err != nil {
			t.Fatal(err)
		}
		kv = s.(store.KeyValue)
	}
	open()
	defer func() { _ = db.Close() }()
	applied := map[string]string{}
	var appliedOffset int64
	pending := map[string]*string{}
	merged := func() map[string]string {
		m := map[string]string{}
		for k, v := range applied {
			m[k] = v
		}
		for k, v := range pending {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = *v
			}
		}
		return m
	}
	for i := range 400 {
		switch x := r.IntN(100); {
		case x < 60:
			k := "k" + strconv.Itoa(r.IntN(20))
			if r.IntN(4) == 0 {
				mustPut(t, kv, k, "<del>")
				pending[k] = nil
			} else {
				v := fmt.Sprint(i)
				mustPut(t, kv, k, v)
				pending[k] = &v
			}
		case x < 75:
			if _, err := task.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := task.Apply(ChangelogOffsets{tp: int64(i)}); err != nil {
				t.Fatal(err)
			}
			applied, appliedOffset, pending = merged(), int64(i), map[string]*string{}
		case x < 85:
			task.Discard()
			pending = map[string]*string{}
		default:
			// crash inside an Apply: before the marker it never happened,
			// after it the reopen finishes it
			failAt = []string{"staged", "marked", "copied"}[r.IntN(3)]
			if _, err := task.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			err := task.Apply(ChangelogOffsets{tp: int64(i)})
			if len(pending) > 3 && err == nil {
				t.Fatalf("op %d: staged Apply survived a crash at %s", i, failAt)
			}
			if err == nil || failAt != "staged" {
				applied, appliedOffset = merged(), int64(i)
			}
			failAt = ""
			pending = map[string]*string{}
			_ = task.Close()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			open()
			a, _, err := db.AppliedOffset(tp)
			if err != nil {
				t.Fatal(err)
			}
			if a.Offset != appliedOffset {
				t.Fatalf("op %d: applied offset %d after reopen, want %d", i, a.Offset, appliedOffset)
			}
		}
		if got, want := contents(t, kv), merged(); !mapsEqual(got, want) {
			t.Fatalf("op %d:\n got  %q\n want %q", i, got, want)
		}
	}
}
