package changelog

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

func openGlobalForTest(t *testing.T, dir, topic string) (*GlobalStore, string) {
	t.Helper()
	g, reload, err := OpenGlobalStore(dir, "g", topic, Options{MemoryBudget: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return g, reload
}

// TestGlobalStoreKeepsPositionAcrossReopen: a reopened store resumes from
// its recorded position with its data; a corrupt or foreign position
// means a full reload (empty store, position from the start).
func TestGlobalStoreKeepsPositionAcrossReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	g, reload := openGlobalForTest(t, dir, "merchants")
	if reload == "" {
		t.Fatal("a new store must report a full reload")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(g.Apply([]GlobalRecord{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}}, map[int32]int64{0: 5, 2: 7}))
	must(g.Apply([]GlobalRecord{{Key: []byte("a")}}, map[int32]int64{0: 6}))
	must(g.Close())

	g, reload = openGlobalForTest(t, dir, "merchants")
	if reload != "" {
		t.Fatalf("reopen reloads: %s", reload)
	}
	if pos := g.Position(); pos[0] != 6 || pos[2] != 7 || len(pos) != 2 {
		t.Fatalf("position %v, want 0:6 2:7", pos)
	}
	if _, found, _ := g.Get([]byte("a")); found {
		t.Fatal("deleted key a is back")
	}
	if v, found, _ := g.Get([]byte("b")); !found || string(v) != "2" {
		t.Fatalf("b = %q %v", v, found)
	}
	if err := g.Put([]byte("x"), []byte("y")); err == nil {
		t.Fatal("Put on a global store succeeded")
	}
	// Corrupt the position: the next open reloads from scratch.
	must(g.bdb.Update(func(txn *badger.Txn) error { return txn.Set(globalPositionKey, []byte{1, 2, 3}) }))
	must(g.Close())
	g, reload = openGlobalForTest(t, dir, "merchants")
	if reload == "" || len(g.Position()) != 0 {
		t.Fatalf("corrupt position: reload %q, position %v", reload, g.Position())
	}
	if _, found, _ := g.Get([]byte("b")); found {
		t.Fatal("a full reload must start empty")
	}
	must(g.Apply([]GlobalRecord{{Key: []byte("c"), Value: []byte("3")}}, map[int32]int64{0: 1}))
	must(g.Close())
	// Another topic's state is not reused.
	g, reload = openGlobalForTest(t, dir, "products")
	if reload == "" || len(g.Position()) != 0 {
		t.Fatalf("foreign topic: reload %q, position %v", reload, g.Position())
	}
	must(g.Close())
}

// TestGlobalStoreConcurrentReads runs readers against a writer under the
// race detector: every value a reader sees is one a batch wrote whole.
func TestGlobalStoreConcurrentReads(t *testing.T) {
	g, _ := openGlobalForTest(t, filepath.Join(t.TempDir(), "g"), "t")
	defer g.Close()
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				va, fa, err := g.Get([]byte("a"))
				if err != nil {
					errs <- err
					return
				}
				n := 0
				if err := g.Range(nil, nil, func(k, v []byte) bool { n++; return true }); err != nil {
					errs <- err
					return
				}
				if fa && len(va) == 0 {
					errs <- fmt.Errorf("empty value")
					return
				}
			}
		}()
	}
	for i := range 300 {
		v := []byte(fmt.Sprint(i))
		if err := g.Apply([]GlobalRecord{{Key: []byte("a"), Value: v}, {Key: []byte(fmt.Sprint("k", i%10)), Value: v}}, map[int32]int64{0: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if v, _, _ := g.Get([]byte("a")); string(v) != "299" {
		t.Fatalf("a = %q", v)
	}
}
