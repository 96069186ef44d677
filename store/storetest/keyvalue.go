package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/tidemark-streams/tidemark/store"
)

// RunKeyValue runs the key-value conformance suite. open returns a new,
// empty store on every call.
func RunKeyValue(t *testing.T, open func(t *testing.T) store.KeyValue) {
	mk := startSuite(t, open, store.KindKeyValue)
	t.Run("missing key is not found", func(t *testing.T) {
		s := mk(t)
		v, ok, err := s.Get([]byte("nope"))
		mustNoErr(t, err, "get")
		if ok || v != nil {
			t.Fatalf("Get(missing) = %q, %v", v, ok)
		}
	})
	t.Run("put then get returns the latest value", func(t *testing.T) {
		s := mk(t)
		mustNoErr(t, s.Put([]byte("a"), []byte("1")), "put")
		mustNoErr(t, s.Put([]byte("a"), []byte("2")), "put")
		v, ok, err := s.Get([]byte("a"))
		mustNoErr(t, err, "get")
		if !ok {
			t.Fatal("a not found")
		}
		equalBytes(t, "Get(a)", v, []byte("2"))
	})
	t.Run("empty value is a value, not a delete", func(t *testing.T) {
		s := mk(t)
		mustNoErr(t, s.Put([]byte("a"), []byte{}), "put")
		v, ok, err := s.Get([]byte("a"))
		mustNoErr(t, err, "get")
		if !ok || len(v) != 0 {
			t.Fatalf("Get(a) = %q, %v; want empty, true", v, ok)
		}
	})
	t.Run("nil value and Delete remove the key", func(t *testing.T) {
		s := mk(t)
		mustNoErr(t, s.Put([]byte("a"), []byte("1")), "put")
		mustNoErr(t, s.Put([]byte("b"), []byte("1")), "put")
		mustNoErr(t, s.Put([]byte("a"), nil), "put nil")
		mustNoErr(t, s.Delete([]byte("b")), "delete")
		mustNoErr(t, s.Delete([]byte("never")), "delete of an absent key")
		for _, k := range []string{"a", "b"} {
			if _, ok, _ := s.Get([]byte(k)); ok {
				t.Fatalf("%s still present", k)
			}
		}
		if got := collectKV(t, s, nil, nil); len(got) != 0 {
			t.Fatalf("range after deletes = %s", fmtPairs(got))
		}
	})
	t.Run("store copies keys and values that callers reuse", func(t *testing.T) {
		s := mk(t)
		k, v := []byte("key1"), []byte("val1")
		mustNoErr(t, s.Put(k, v), "put")
		copy(k, "key2")
		copy(v, "val2")
		mustNoErr(t, s.Put(k, v), "put")
		copy(k, "XXXX")
		copy(v, "YYYY")
		want := []kvPair{{"key1", "val1"}, {"key2", "val2"}}
		if got := collectKV(t, s, nil, nil); !slices.Equal(got, want) {
			t.Fatalf("contents = %s, want %s", fmtPairs(got), fmtPairs(want))
		}
	})
	t.Run("range is ascending over [from, to)", func(t *testing.T) {
		s := mk(t)
		for _, k := range []string{"b", "a", "c\x00", "c", "d", "ab"} {
			mustNoErr(t, s.Put([]byte(k), []byte("v"+k)), "put")
		}
		cases := []struct {
			name     string
			from, to []byte
			want     []string
		}{
			{"unbounded", nil, nil, []string{"a", "ab", "b", "c", "c\x00", "d"}},
			{"from is inclusive", []byte("ab"), nil, []string{"ab", "b", "c", "c\x00", "d"}},
			{"to is exclusive", nil, []byte("c"), []string{"a", "ab", "b"}},
			{"both bounds", []byte("b"), []byte("d"), []string{"b", "c", "c\x00"}},
			{"from between keys", []byte("aa"), []byte("bb"), []string{"ab", "b"}},
			{"empty when from == to", []byte("b"), []byte("b"), nil},
			{"empty when from > to", []byte("d"), []byte("a"), nil},
			{"empty from is the first key", []byte{}, []byte("ab"), []string{"a"}},
		}
		for _, c := range cases {
			var got []string
			for _, p := range collectKV(t, s, c.from, c.to) {
				if p.v != "v"+p.k {
					t.Fatalf("%s: key %q has value %q", c.name, p.k, p.v)
				}
				got = append(got, p.k)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("%s: Range(%q, %q) = %q, want %q", c.name, c.from, c.to, got, c.want)
			}
		}
	})
	t.Run("range stops when fn returns false", func(t *testing.T) {
		s := mk(t)
		for _, k := range []string{"a", "b", "c"} {
			mustNoErr(t, s.Put([]byte(k), []byte("v")), "put")
		}
		n := 0
		mustNoErr(t, s.Range(nil, nil, func(k, v []byte) bool { n++; return n < 2 }), "range")
		if n != 2 {
			t.Fatalf("fn called %d times after returning false at 2", n)
		}
	})
	t.Run("operations after Close return ErrClosed", func(t *testing.T) {
		s := open(t)
		mustNoErr(t, s.Close(), "close")
		if err := s.Put([]byte("a"), []byte("1")); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("Put after Close = %v", err)
		}
		if _, _, err := s.Get([]byte("a")); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("Get after Close = %v", err)
		}
	})
	t.Run("property: random puts, deletes and ranges match a map", func(t *testing.T) {
		s := mk(t)
		r := newRand(t)
		model := map[string]string{}
		for i := range 3000 {
			k := randKey(r)
			switch op := r.IntN(10); {
			case op < 5:
				v := randValue(r)
				mustNoErr(t, s.Put(k, v), "put")
				model[string(k)] = string(v)
			case op < 7:
				if r.IntN(2) == 0 {
					mustNoErr(t, s.Delete(k), "delete")
				} else {
					mustNoErr(t, s.Put(k, nil), "put nil")
				}
				delete(model, string(k))
			case op < 9:
				v, ok, err := s.Get(k)
				mustNoErr(t, err, "get")
				mv, mok := model[string(k)]
				if ok != mok || string(v) != mv {
					t.Fatalf("op %d: Get(%q) = %q,%v; model %q,%v", i, k, v, ok, mv, mok)
				}
			default:
				from, to := randKey(r), randKey(r)
				if r.IntN(4) == 0 {
					from = nil
				}
				if r.IntN(4) == 0 {
					to = nil
				}
				CheckKeyValue(t, s, model, from, to)
			}
		}
		CheckKeyValue(t, s, model, nil, nil)
	})
}

// CheckKeyValue fails t unless s.Range(from, to) yields exactly the entries
// of model in [from, to). Backends with extra lifecycle (commit, abort,
// restore) use it in their own property tests.
func CheckKeyValue(t *testing.T, s store.KeyValue, model map[string]string, from, to []byte) {
	t.Helper()
	var want []kvPair
	for k, v := range model {
		if from != nil && k < string(from) || to != nil && k >= string(to) {
			continue
		}
		want = append(want, kvPair{k, v})
	}
	slices.SortFunc(want, func(a, b kvPair) int {
		switch {
		case a.k < b.k:
			return -1
		case a.k > b.k:
			return 1
		}
		return 0
	})
	if got := collectKV(t, s, from, to); !slices.Equal(got, want) {
		t.Fatalf("Range(%q, %q):\n got  %s\n want %s", from, to, fmtPairs(got), fmtPairs(want))
	}
}

func collectKV(t *testing.T, s store.KeyValue, from, to []byte) []kvPair {
	t.Helper()
	var got []kvPair
	mustNoErr(t, s.Range(from, to, func(k, v []byte) bool {
		got = append(got, kvPair{string(k), string(v)})
		return true
	}), "range")
	return got
}
