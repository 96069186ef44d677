package processor

import (
	"fmt"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/store/memstore"
)

// visitCountingKV counts the entries its Ranges hand to their callers.
type visitCountingKV struct {
	*memstore.KeyValue
	visited int
}

func (s *visitCountingKV) Range(from, to []byte, fn func(k, v []byte) bool) error {
	return s.KeyValue.Range(from, to, func(k, v []byte) bool {
		s.visited++
		return fn(k, v)
	})
}

// App.Get on a versioned table answers the key's latest value; it used to
// read every version the key holds to find it (the range [key, key+0x00]
// through versionedRange): a price updated every second under
// Versioned(24h) is 86,400 versions per lookup, read while the query
// holds the registry's read lock that the session waits on. It reads the
// latest version alone.
func TestVersionedGetReadsOnlyTheLatestVersion(t *testing.T) {
	t.Parallel()
	kv := &visitCountingKV{KeyValue: memstore.NewKeyValue("prices")}
	vs, err := store.NewVersioned(kv, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "sku", "sku\x00x", "t"} {
		for ts := range int64(500) {
			if err := vs.Put([]byte(k), ts*1000, fmt.Appendf(nil, "%s@%d", k, ts)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := vs.Put([]byte("gone"), 1, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := vs.Put([]byte("gone"), 2, nil); err != nil {
		t.Fatal(err)
	}
	r := storeReader{limit: queryLimit, versioned: true}
	for _, c := range []struct{ key, want string }{{"sku", "sku@499"}, {"sku\x00x", "sku\x00x@499"}, {"gone", ""}, {"none", ""}} {
		kv.visited = 0
		var res QueryResult
		if err := r.readKey(kv, []byte(c.key), &res); err != nil {
			t.Fatal(err)
		}
		switch {
		case c.want == "" && len(res.Entries) != 0:
			t.Fatalf("Get(%q) = %v, want nothing", c.key, res.Entries)
		case c.want != "" && (len(res.Entries) != 1 || string(res.Entries[0].Key) != c.key || string(res.Entries[0].Value) != c.want):
			t.Fatalf("Get(%q) = %v, want %q", c.key, res.Entries, c.want)
		}
		if kv.visited > 1 {
			t.Fatalf("Get(%q) read %d versions to answer the latest", c.key, kv.visited)
		}
	}
}
