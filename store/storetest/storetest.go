// Package storetest is the conformance suite of the store contracts. Every
// backend runs it (the in-memory stores, the Badger stores of package
// changelog, with and without an uncommitted overlay), so operators see the
// same semantics wherever they run: a test that passes in the driver keeps
// passing in the service.
//
// Each Run function takes a constructor that returns a new, empty store; the
// suite closes the stores it opens. The property tests compare a store with
// a reference model after random operation sequences; their seeds are
// logged, and TIDEMARK_STORETEST_SEED reruns one.
package storetest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

func seed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("TIDEMARK_STORETEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TIDEMARK_STORETEST_SEED=%q: %v", s, err)
		}
		return v
	}
	v := uint64(time.Now().UnixNano())
	t.Logf("seed %d (rerun with TIDEMARK_STORETEST_SEED=%d)", v, v)
	return v
}

func newRand(t *testing.T) *rand.Rand {
	s := seed(t)
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

// randKey draws from a small key space with shared prefixes ("k1", "k10",
// "k1\x00"), which is where prefix-encoded backends go wrong.
func randKey(r *rand.Rand) []byte {
	k := []byte("k" + strconv.Itoa(r.IntN(40)))
	if r.IntN(8) == 0 {
		k = append(k, 0)
	}
	if r.IntN(16) == 0 {
		k = append(k, 0xff)
	}
	return k
}

func randValue(r *rand.Rand) []byte {
	v := make([]byte, r.IntN(12))
	for i := range v {
		v[i] = byte(r.IntN(256))
	}
	return v
}

// startSuite runs the subtest every store contract shares (the store
// reports its kind) and returns the opener the suite's subtests use: it
// closes each store when the subtest that opened it ends. The subtests of
// a suite then read as the rules of that contract alone.
func startSuite[S store.Store](t *testing.T, open func(t *testing.T) S, kind store.Kind) func(t *testing.T) S {
	mk := func(t *testing.T) S {
		s := open(t)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	t.Run("kind is "+kind.String(), func(t *testing.T) {
		if k := mk(t).Kind(); k != kind {
			t.Fatalf("Kind() = %v", k)
		}
	})
	return mk
}

func mustNoErr(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func equalBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
}

type kvPair struct{ k, v string }

func fmtPairs(p []kvPair) string { return fmt.Sprintf("%q", p) }
