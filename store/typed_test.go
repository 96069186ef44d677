package store_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/store/memstore"
)

func TestTypedKeyValueRoundTripsAndRanges(t *testing.T) {
	kv := store.NewTypedKeyValue(memstore.NewKeyValue("counts"), serde.String(), serde.Int64())
	for k, v := range map[string]int64{"b": 2, "a": -1, "c": 3} {
		if err := kv.Put(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Delete("c"); err != nil {
		t.Fatal(err)
	}
	v, ok, err := kv.Get("a")
	if err != nil || !ok || v != -1 {
		t.Fatalf("Get(a) = %d, %v, %v", v, ok, err)
	}
	if _, ok, _ := kv.Get("c"); ok {
		t.Fatal("deleted key c found")
	}
	var keys []string
	if err := kv.Range("a", "b", func(k string, _ int64) bool { keys = append(keys, k); return true }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"a"}) {
		t.Fatalf("Range(a, b) keys = %q", keys)
	}
	keys = nil
	if err := kv.All(func(k string, _ int64) bool { keys = append(keys, k); return true }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"a", "b"}) {
		t.Fatalf("All keys = %q", keys)
	}
}

func TestTypedEmptyEncodingIsStoredNotDeleted(t *testing.T) {
	kv := store.NewTypedKeyValue(memstore.NewKeyValue("s"), serde.String(), serde.String())
	if err := kv.Put("", ""); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := kv.Get(""); err != nil || !ok || v != "" {
		t.Fatalf(`Get("") = %q, %v, %v; want "", true`, v, ok, err)
	}
}

func TestTypedDecodeErrorNamesTheStore(t *testing.T) {
	raw := memstore.NewKeyValue("prices")
	if err := raw.Put([]byte("x"), []byte("not8")); err != nil {
		t.Fatal(err)
	}
	kv := store.NewTypedKeyValue(raw, serde.String(), serde.Float64())
	_, _, err := kv.Get("x")
	if !errors.Is(err, serde.ErrDecode) {
		t.Fatalf("Get of a bad value = %v, want serde.ErrDecode", err)
	}
	if err := kv.All(func(string, float64) bool { return true }); !errors.Is(err, serde.ErrDecode) {
		t.Fatalf("All over a bad value = %v, want serde.ErrDecode", err)
	}
}

func TestTypedWindowAndSession(t *testing.T) {
	w := store.NewTypedWindow(memstore.NewWindow("w"), serde.String(), serde.Int64())
	for _, start := range []int64{0, 60_000, 120_000} {
		if err := w.Put("sku-1", start, start/1000); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Delete("sku-1", 60_000); err != nil {
		t.Fatal(err)
	}
	var got []int64
	if err := w.FetchRange("sku-1", 0, 120_000, func(_ int64, v int64) bool { got = append(got, v); return true }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int64{0, 120}) {
		t.Fatalf("FetchRange = %v", got)
	}
	if v, ok, err := w.Fetch("sku-1", 120_000); err != nil || !ok || v != 120 {
		t.Fatalf("Fetch = %d, %v, %v", v, ok, err)
	}

	s := store.NewTypedSession(memstore.NewSession("s"), serde.String(), serde.Int64())
	if err := s.Put("u", 10, 20, 2); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.FindSessions("u", 15, 25, func(start, end int64, v int64) bool {
		n++
		if start != 10 || end != 20 || v != 2 {
			t.Errorf("session [%d,%d]=%d", start, end, v)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("found %d sessions, want 1", n)
	}
}

// BenchmarkTypedWindowCount is the store's share of the windowed count:
// fetch, increment, put, over 10k keys and a sliding set of windows.
func BenchmarkTypedWindowCount(b *testing.B) {
	w := store.NewTypedWindow(memstore.NewWindow("w"), serde.Int64(), serde.Int64())
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := int64(i % 10_000)
		start := int64(i/100_000) * 60_000
		n, _, err := w.Fetch(k, start)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Put(k, start, n+1); err != nil {
			b.Fatal(err)
		}
	}
}
