package changelog

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

// layerModel is the reference for TaskState's layered overlays: the
// committed state (Badger), the sealed transaction N and the live N+1, as
// plain maps ("" value = deleted in that layer).
type layerModel struct {
	committed map[string]string
	n, next   map[string]string
}

func (m *layerModel) read() map[string]string {
	out := maps.Clone(m.committed)
	for _, layer := range []map[string]string{m.n, m.next} {
		for k, v := range layer {
			if v == "" {
				delete(out, k)
			} else {
				out[k] = v
			}
		}
	}
	return out
}

func randomWrites(rng *rand.Rand, kv store.KeyValue, layer map[string]string, t *testing.T) {
	t.Helper()
	for range rng.IntN(12) {
		k := fmt.Sprintf("k%02d", rng.IntN(16))
		if rng.IntN(4) == 0 {
			mustPut(t, kv, k, "<del>")
			layer[k] = ""
			continue
		}
		v := fmt.Sprintf("v%d", rng.IntN(1000))
		mustPut(t, kv, k, v)
		layer[k] = v
	}
}

func checkReads(t *testing.T, what string, kv store.KeyValue, want map[string]string) {
	t.Helper()
	equalMaps(t, what+" (range)", contents(t, kv), want)
	for i := range 16 {
		k := fmt.Sprintf("k%02d", i)
		v, ok, err := kv.Get([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		if wv, wok := want[k]; ok != wok || string(v) != wv {
			t.Fatalf("%s: Get(%s) = %q,%v want %q,%v", what, k, v, ok, wv, wok)
		}
	}
}

// TestLayeredOverlayAgainstModel runs random transactions through Flush,
// Seal, writes of the next transaction, then a commit (ApplyAt) or an
// abort (Discard) of the sealed one, and checks every read, what Badger
// holds and what the next Flush produces against the model.
func TestLayeredOverlayAgainstModel(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	db := openTestDB(t, Options{})
	p := &fakeProducer{}
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 0, Producer: p})
	s, err := task.Open(store.Spec{Name: "kv", Kind: store.KindKeyValue, Logged: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	kv := s.(store.KeyValue)
	m := &layerModel{committed: map[string]string{}, n: map[string]string{}}
	ctx := context.Background()
	for round := range 200 {
		randomWrites(rng, kv, m.n, t)
		checkReads(t, "before flush", kv, m.read())
		p.records = nil
		offs, err := task.Flush(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.records) != len(m.n) {
			t.Fatalf("round %d: flush produced %d records for %d keys written", round, len(p.records), len(m.n))
		}
		if err := task.Seal(); err != nil {
			t.Fatal(err)
		}
		m.next = map[string]string{}
		randomWrites(rng, kv, m.next, t)
		checkReads(t, "sealed N under N+1", kv, m.read())
		if _, err := task.Flush(ctx); err == nil {
			t.Fatal("Flush with a sealed layer unapplied succeeded")
		}
		if rng.IntN(4) == 0 {
			// N aborts: N+1 goes with it.
			task.Discard()
			m.n, m.next = map[string]string{}, nil
			checkReads(t, "after abort of N", kv, m.read())
			if task.Pending() != 0 || task.Sealed() {
				t.Fatalf("after Discard: pending %d sealed %v", task.Pending(), task.Sealed())
			}
			continue
		}
		if err := task.ApplyAt(offs, nil); err != nil {
			t.Fatal(err)
		}
		m.committed = (&layerModel{committed: m.committed, n: m.n}).read()
		m.n, m.next = m.next, nil
		checkReads(t, "after apply of N", kv, m.read())
		if task.Pending() != len(m.n) {
			t.Fatalf("round %d: live overlay holds %d entries, want N+1's %d", round, task.Pending(), len(m.n))
		}
		// What Badger holds is exactly the committed state.
		fresh := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 0, Producer: p})
		fs, err := fresh.Open(store.Spec{Name: "kv", Kind: store.KindKeyValue, Logged: true}, 0)
		if err != nil {
			t.Fatal(err)
		}
		equalMaps(t, "badger after apply", contents(t, fs.(store.KeyValue)), m.committed)
		_ = fresh.Close()
	}
}

// TestLayeredOverlayTable walks the cases one by one.
func TestLayeredOverlayTable(t *testing.T) {
	type step struct {
		n, next []string // writes (key, value|<del>) of N and of N+1
		commit  bool
		reads   map[string]string // after N+1's writes
		after   map[string]string // after N's commit or abort
		flushed []string          // what N+1's Flush produces after N's commit
	}
	cases := map[string]step{
		"N+1 overwrites N": {n: []string{"a", "1"}, next: []string{"a", "2"}, commit: true,
			reads: map[string]string{"a": "2"}, after: map[string]string{"a": "2"}, flushed: []string{"a=2"}},
		"N+1 deletes N's key": {n: []string{"a", "1"}, next: []string{"a", "<del>"}, commit: true,
			reads: map[string]string{}, after: map[string]string{}, flushed: []string{"a=<tombstone>"}},
		"N+1 untouched keys are not flushed again": {n: []string{"a", "1", "b", "1"}, next: []string{"c", "3"}, commit: true,
			reads: map[string]string{"a": "1", "b": "1", "c": "3"}, after: map[string]string{"a": "1", "b": "1", "c": "3"}, flushed: []string{"c=3"}},
		"abort of N drops N+1": {n: []string{"a", "1"}, next: []string{"b", "2"}, commit: false,
			reads: map[string]string{"a": "1", "b": "2"}, after: map[string]string{"base": "0"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			db := openTestDB(t, Options{})
			p := &fakeProducer{}
			task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 0, Producer: p})
			s, err := task.Open(store.Spec{Name: "kv", Kind: store.KindKeyValue, Logged: true}, 0)
			if err != nil {
				t.Fatal(err)
			}
			kv := s.(store.KeyValue)
			ctx := context.Background()
			if !c.commit {
				mustPut(t, kv, "base", "0")
				offs, _ := task.Flush(ctx)
				if err := task.ApplyAt(offs, nil); err != nil {
					t.Fatal(err)
				}
				c.reads["base"] = "0"
			}
			mustPut(t, kv, c.n...)
			offs, err := task.Flush(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := task.Seal(); err != nil {
				t.Fatal(err)
			}
			mustPut(t, kv, c.next...)
			equalMaps(t, "reads", contents(t, kv), c.reads)
			if !c.commit {
				task.Discard()
				equalMaps(t, "after abort", contents(t, kv), c.after)
				return
			}
			if err := task.ApplyAt(offs, nil); err != nil {
				t.Fatal(err)
			}
			equalMaps(t, "after commit", contents(t, kv), c.after)
			p.records = nil
			if _, err := task.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range p.records {
				if r.Key[0] != kindTag(store.KindKeyValue) {
					continue // the position record
				}
				v := string(r.Value)
				if r.Value == nil {
					v = "<tombstone>"
				}
				got = append(got, string(r.Key[1:])+"="+v)
			}
			if !slices.Equal(got, c.flushed) {
				t.Fatalf("N+1's flush = %q, want %q", got, c.flushed)
			}
		})
	}
}

// TestLayeredExpiryCut: a cut requested by N+1 hides windows from reads at
// once but is not applied to Badger with N, so an abort of N+1 gets them
// back.
func TestLayeredExpiryCut(t *testing.T) {
	db := openTestDB(t, Options{})
	p := &fakeProducer{}
	task := db.NewTaskState(TaskStateConfig{AppID: "app", Partition: 0, Producer: p})
	s, err := task.Open(store.Spec{Name: "w", Kind: store.KindWindow, Logged: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := s.(store.Window)
	ctx := context.Background()
	for _, start := range []int64{50, 150, 250} {
		if err := w.Put([]byte("k"), start, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	offs, _ := task.Flush(ctx)
	if err := task.ApplyAt(offs, nil); err != nil {
		t.Fatal(err)
	}
	starts := func() []int64 {
		var out []int64
		if err := w.FetchRange([]byte("k"), 0, 1000, func(start int64, _ []byte) bool { out = append(out, start); return true }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// N expires below 100; N+1 below 200.
	if err := w.ExpireBefore(100); err != nil {
		t.Fatal(err)
	}
	offs, _ = task.Flush(ctx)
	if err := task.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := w.ExpireBefore(200); err != nil {
		t.Fatal(err)
	}
	if got := starts(); !slices.Equal(got, []int64{250}) {
		t.Fatalf("reads under N+1's cut = %v, want [250]", got)
	}
	if err := task.ApplyAt(offs, nil); err != nil {
		t.Fatal(err)
	}
	if got := starts(); !slices.Equal(got, []int64{250}) {
		t.Fatalf("reads after N applied = %v, want [250]", got)
	}
	task.Discard() // N+1 aborts
	if got := starts(); !slices.Equal(got, []int64{150, 250}) {
		t.Fatalf("reads after N+1 aborted = %v, want N's state [150 250]", got)
	}
}
