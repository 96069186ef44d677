package store_test

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/store/memstore"
)

func newVersioned(t *testing.T, kv store.KeyValue, history time.Duration) *store.VersionedKeyValue {
	t.Helper()
	vs, err := store.NewVersioned(kv, history)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// The data keys sort by key, then newest first, whatever the sign of the
// timestamps, and no key's versions fall inside another key's range, even
// when one key is a prefix of the other.
func TestVersionedKeyEncodingOrders(t *testing.T) {
	keys := [][]byte{{}, {0}, {0, 0}, {0, 1}, {0, 0xFF}, []byte("a"), []byte("a\x00"), []byte("a\x00b"), []byte("a\x01"), []byte("ab"), []byte("a\xff")}
	tss := []int64{math.MaxInt64, 1 << 40, 1, 0, -1, -1000, math.MinInt64}
	var enc [][]byte
	for _, k := range keys {
		for _, ts := range tss {
			b := store.AppendVersionedKey(nil, k, ts)
			gk, gts, err := store.ParseVersionedKey(b)
			if err != nil || !bytes.Equal(gk, k) || gts != ts {
				t.Errorf("ParseVersionedKey(AppendVersionedKey(%q, %d)) = %q, %d, %v", k, ts, gk, gts, err)
			}
			enc = append(enc, b)
		}
	}
	// keys are listed in byte order and tss newest first: the encodings
	// must already be sorted.
	if !slices.IsSortedFunc(enc, bytes.Compare) {
		for i := 1; i < len(enc); i++ {
			if bytes.Compare(enc[i-1], enc[i]) >= 0 {
				t.Errorf("encoding out of order at %d: %x ≥ %x", i, enc[i-1], enc[i])
			}
		}
	}

	vs := newVersioned(t, memstore.NewKeyValue("v"), time.Hour)
	for i, k := range keys {
		if err := vs.Put(k, -5, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, k := range keys {
		v, ts, ok, err := vs.Get(k)
		if err != nil || !ok || ts != -5 || !bytes.Equal(v, []byte{byte(i)}) {
			t.Errorf("Get(%q) = %v, %d, %v, %v, want [%d] at -5", k, v, ts, ok, err, i)
		}
		if _, _, ok, _ := vs.GetAsOf(k, -6); ok {
			t.Errorf("GetAsOf(%q, -6) found a version before the first (-5)", k)
		}
	}
	if _, _, ok, _ := vs.Get([]byte("a\x00\x00")); ok {
		t.Errorf("Get of a key never put found another key's version")
	}
}

// Retention at the boundary: history 100, stream time 1000, cutoff 900.
func TestVersionedRetentionBoundary(t *testing.T) {
	kv := memstore.NewKeyValue("v")
	vs := newVersioned(t, kv, 100*time.Millisecond)
	k := []byte("k")
	put := func(ts int64, v string) {
		t.Helper()
		var b []byte
		if v != "" {
			b = []byte(v)
		}
		if err := vs.Put(k, ts, b); err != nil {
			t.Fatal(err)
		}
	}
	asOf := func(at int64) string {
		t.Helper()
		v, _, ok, err := vs.GetAsOf(k, at)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return "-"
		}
		return string(v)
	}
	put(800, "v800")
	put(850, "v850")
	put(900, "v900")
	put(1000, "v1000") // cutoff 900: v800 (valid to 850) and v850 (to 900) expire
	if got, _ := vs.Cutoff(); got != 900 {
		t.Fatalf("Cutoff = %d, want 900", got)
	}
	for at, want := range map[int64]string{899: "-", 900: "v900", 999: "v900", 1000: "v1000", 5000: "v1000"} {
		if got := asOf(at); got != want {
			t.Errorf("GetAsOf(%d) = %s, want %s", at, got, want)
		}
	}
	if n := countVersions(t, kv); n != 2 {
		t.Errorf("%d versions stored, want 2 (v900, valid at the cutoff, and v1000)", n)
	}
	put(899, "late")  // older than the cutoff: dropped
	put(900, "v900b") // at the cutoff: replaces v900
	if got := asOf(950); got != "v900b" {
		t.Errorf("GetAsOf(950) = %s, want v900b (a put at the cutoff is kept)", got)
	}

	// The newest version at or before the cutoff stays while it is the
	// latest: another key moves stream time far ahead.
	if err := vs.Put([]byte("other"), 10_000, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if v, ts, ok, _ := vs.Get(k); !ok || string(v) != "v1000" || ts != 1000 {
		t.Errorf("Get after stream time 10000 = %s@%d %v, want v1000@1000 kept as the latest", v, ts, ok)
	}
	if got := asOf(9_950); got != "v1000" {
		t.Errorf("GetAsOf(9950) = %s, want v1000", got)
	}
	if got := asOf(9_899); got != "v1000" {
		t.Errorf("GetAsOf(9899) = %s, want v1000 (before the cutoff 9900, but the latest version, valid since 1000)", got)
	}
	if got := asOf(999); got != "-" {
		t.Errorf("GetAsOf(999) = %s, want not found (before the cutoff, before the latest version)", got)
	}
	if n := countVersions(t, kv); n != 2 {
		t.Errorf("%d versions stored, want 2 (k's and other's latest)", n)
	}
	// A delete at or before the cutoff removes the key entirely.
	put(9_900, "")
	if _, _, ok, _ := vs.Get(k); ok {
		t.Errorf("k found after its delete")
	}
	if _, found, _ := vs.LatestTimestamp(k); found {
		t.Errorf("k still has versions after a delete at the cutoff")
	}
	if n := countVersions(t, kv); n != 1 {
		t.Errorf("%d versions stored, want 1 (other's)", n)
	}

	// The observed stream time is in the store: a store reopened on the
	// same entries (a restore) has the same cutoff.
	if got, err := newVersioned(t, kv, 100*time.Millisecond).Cutoff(); err != nil || got != 9_900 {
		t.Errorf("reopened Cutoff = %d, want 9900", got)
	}
}

func countVersions(t *testing.T, kv store.KeyValue) int {
	t.Helper()
	n := 0
	if err := kv.Range([]byte{1}, []byte{2}, func(_, _ []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	return n
}

// modelVersion is the reference model's version: every put not dropped is
// kept forever; retention only shows in what the store answers and keeps.
type modelVersion struct {
	ts    int64
	value string
	del   bool
}

// TestVersionedMatchesModel drives random puts (out of order, deletes,
// negative timestamps, prefix-sharing keys) and compares every lookup with
// a model that keeps all history and applies the documented rules; it also
// checks that the store keeps no version it no longer needs.
func TestVersionedMatchesModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TIDEMARK_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (replay: TIDEMARK_SEED=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	keys := []string{"", "\x00", "a", "a\x00", "a\x00\x01", "ab", "b"}
	const history = 300

	for round := range 20 {
		kv := memstore.NewKeyValue("v")
		vs := newVersioned(t, kv, history*time.Millisecond)
		model := map[string][]modelVersion{} // newest first
		st := int64(math.MinInt64)
		cutoff := func() int64 {
			if st == math.MinInt64 {
				return st
			}
			return st - history
		}
		asOf := func(k string, at int64) (modelVersion, bool) {
			if at < cutoff() {
				// Only the latest version is answered before the cutoff
				// (Kafka Streams' RocksDBVersionedStore.get).
				if vers := model[k]; len(vers) > 0 && vers[0].ts <= at {
					return vers[0], !vers[0].del
				}
				return modelVersion{}, false
			}
			for _, v := range model[k] {
				if v.ts <= at {
					return v, !v.del
				}
			}
			return modelVersion{}, false
		}
		base := int64(r.IntN(2000) - 1000)
		for op := range 400 {
			k := keys[r.IntN(len(keys))]
			ts := base + int64(op)*5 + int64(r.IntN(600)) - 400
			v := modelVersion{ts: ts, value: fmt.Sprintf("v%d", op), del: r.IntN(5) == 0}
			var b []byte
			if !v.del {
				b = []byte(v.value)
			}
			if err := vs.Put([]byte(k), ts, b); err != nil {
				t.Fatal(err)
			}
			if ts >= cutoff() {
				st = max(st, ts)
				vers := slices.DeleteFunc(model[k], func(o modelVersion) bool { return o.ts == ts })
				i, _ := slices.BinarySearchFunc(vers, ts, func(o modelVersion, ts int64) int { return -cmp.Compare(o.ts, ts) })
				model[k] = slices.Insert(vers, i, v)
			}
			for range 3 {
				qk := keys[r.IntN(len(keys))]
				at := ts + int64(r.IntN(800)) - 500
				want, wok := asOf(qk, at)
				got, from, ok, err := vs.GetAsOf([]byte(qk), at)
				if err != nil || ok != wok || (ok && (string(got) != want.value || from != want.ts)) {
					t.Fatalf("round %d op %d: GetAsOf(%q, %d) = %q@%d %v %v, want %q@%d %v (cutoff %d, model %v)",
						round, op, qk, at, got, from, ok, err, want.value, want.ts, wok, cutoff(), model[qk])
				}
			}
			for _, qk := range keys {
				got, gts, ok, err := vs.Get([]byte(qk))
				vers := model[qk]
				wok := len(vers) > 0 && !vers[0].del
				if err != nil || ok != wok || (ok && (string(got) != vers[0].value || gts != vers[0].ts)) {
					t.Fatalf("round %d op %d: Get(%q) = %q@%d %v %v, want latest of %v", round, op, qk, got, gts, ok, err, vers)
				}
			}
		}
		// Range lists the latest values in key order, bounds on keys that
		// share prefixes included.
		bounds := append([][]byte{nil}, func() (bs [][]byte) {
			for _, k := range keys {
				bs = append(bs, []byte(k))
			}
			return bs
		}()...)
		for range 10 {
			from, to := bounds[r.IntN(len(bounds))], bounds[r.IntN(len(bounds))]
			var want, got []string
			for _, k := range slices.Sorted(maps.Keys(model)) {
				vers := model[k]
				if (from == nil || k >= string(from)) && (to == nil || k < string(to)) && !vers[0].del {
					want = append(want, fmt.Sprintf("%q=%s@%d", k, vers[0].value, vers[0].ts))
				}
			}
			if err := vs.Range(from, to, func(k, v []byte, ts int64) bool {
				got = append(got, fmt.Sprintf("%q=%s@%d", k, v, ts))
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: Range(%q, %q) = %v, want %v", round, from, to, got, want)
			}
		}
		// Nothing kept that no answer needs: each stored version is the
		// latest, or is still valid at the cutoff or later; deletes only
		// after the cutoff.
		err := kv.Range([]byte{1}, []byte{2}, func(kb, vb []byte) bool {
			k, ts, err := store.ParseVersionedKey(kb)
			if err != nil {
				t.Fatal(err)
			}
			vers := model[string(k)]
			i := slices.IndexFunc(vers, func(v modelVersion) bool { return v.ts == ts })
			switch {
			case i < 0:
				t.Errorf("round %d: stored version %q@%d is not in the model", round, k, ts)
			case vers[i].del && ts <= cutoff():
				t.Errorf("round %d: delete %q@%d kept at cutoff %d", round, k, ts, cutoff())
			case i > 0 && vers[i-1].ts <= cutoff():
				t.Errorf("round %d: version %q@%d valid to %d kept at cutoff %d", round, k, ts, vers[i-1].ts, cutoff())
			}
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestTypedVersioned(t *testing.T) {
	vs := store.NewTypedVersioned(newVersioned(t, memstore.NewKeyValue("prices"), time.Hour), serde.String(), serde.Int64())
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(vs.Put("apple", 5000, 120))
	must(vs.Put("apple", 1000, 100))
	must(vs.Delete("apple", 7000))
	if v, from, ok, err := vs.GetAsOf("apple", 2000); err != nil || !ok || v != 100 || from != 1000 {
		t.Errorf("GetAsOf(apple, 2000) = %d@%d %v %v, want 100@1000", v, from, ok, err)
	}
	if v, from, ok, err := vs.GetAsOf("apple", 6999); err != nil || !ok || v != 120 || from != 5000 {
		t.Errorf("GetAsOf(apple, 6999) = %d@%d %v %v, want 120@5000", v, from, ok, err)
	}
	if _, _, ok, err := vs.Get("apple"); err != nil || ok {
		t.Errorf("Get(apple) after the delete: found %v %v", ok, err)
	}
	if vs.Store().Name() != "prices" {
		t.Errorf("Store().Name() = %q", vs.Store().Name())
	}
}

// TestVersionedGetAsOfBeforeCutoff checks lookups older than the history
// against Kafka Streams' RocksDBVersionedStore.get(key, asOf): before the
// cutoff the latest version is still answered when it was valid at asOf
// (the latest never expires), nothing else is.
func TestVersionedGetAsOfBeforeCutoff(t *testing.T) {
	type put struct {
		key string
		ts  int64
		val string // "" is a delete
	}
	// History 100; "clock" moves stream time to 10000: cutoff 9900.
	puts := []put{
		{"old", 1000, "o1000"},                           // latest since 1000
		{"hist", 1000, "h1000"}, {"hist", 9950, "h9950"}, // latest after the cutoff
		{"gone", 1000, "g1000"}, {"gone", 2000, ""}, // latest is a delete
		{"clock", 10_000, "x"},
	}
	cases := []struct {
		key   string
		asOf  int64
		want  string // "-": not found
		valid int64
	}{
		{"old", 5000, "o1000", 1000}, // before the cutoff, the latest valid since 1000
		{"old", 1000, "o1000", 1000},
		{"old", 999, "-", 0}, // before the latest version
		{"old", 9900, "o1000", 1000},
		{"hist", 5000, "-", 0}, // h1000 was valid then, but is history older than the cutoff
		{"hist", 9899, "-", 0},
		{"hist", 9900, "h1000", 1000}, // at the cutoff: history answered
		{"hist", 9950, "h9950", 9950},
		{"gone", 1500, "-", 0}, // the latest is a delete
		{"gone", 5000, "-", 0},
		{"none", 5000, "-", 0},
	}
	kv := memstore.NewKeyValue("v")
	vs := newVersioned(t, kv, 100*time.Millisecond)
	for _, p := range puts {
		var b []byte
		if p.val != "" {
			b = []byte(p.val)
		}
		if err := vs.Put([]byte(p.key), p.ts, b); err != nil {
			t.Fatal(err)
		}
	}
	check := func(vs *store.VersionedKeyValue, what string) {
		t.Helper()
		for _, c := range cases {
			v, from, ok, err := vs.GetAsOf([]byte(c.key), c.asOf)
			if err != nil {
				t.Fatal(err)
			}
			got, gotFrom := "-", int64(0)
			if ok {
				got, gotFrom = string(v), from
			}
			if got != c.want || gotFrom != c.valid {
				t.Errorf("%s: GetAsOf(%s, %d) = %s@%d, want %s@%d", what, c.key, c.asOf, got, gotFrom, c.want, c.valid)
			}
		}
	}
	check(vs, "live")
	check(newVersioned(t, kv, 100*time.Millisecond), "reopened")
}
