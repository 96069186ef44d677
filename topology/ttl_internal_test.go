package topology

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/store/memstore"
)

// TestExpiringKeyValueHidesExpiredRows: the view interactive queries read
// hides the rows the index store's stream time expires, before any sweep
// deleted them, in Get and Range alike.
func TestExpiringKeyValueHidesExpiredRows(t *testing.T) {
	open := func(name string) store.KeyValue {
		s, err := memstore.NewProvider().Open(store.Spec{Name: name, Kind: store.KindKeyValue}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return s.(store.KeyValue)
	}
	kv, index := open("s"), open("s-TTL-INDEX")
	for k, ts := range map[string]int64{"old": 899, "edge": 900, "new": 1500} {
		if err := kv.Put([]byte(k), EncodeTimestamped(nil, ts, []byte(k))); err != nil {
			t.Fatal(err)
		}
	}
	info := StoreInfo{Spec: store.Spec{Name: "s"}, Timestamped: true, TTL: 100 * time.Millisecond, TTLIndex: "s-TTL-INDEX"}
	view, err := ExpiringKeyValue(kv, index, info)
	if err != nil || view != kv {
		t.Fatalf("without a stream time: view %v, %v, want the store itself", view, err)
	}
	if err := index.Put(ttlClockKey, binary.BigEndian.AppendUint64(nil, 1000)); err != nil {
		t.Fatal(err)
	}
	if view, err = ExpiringKeyValue(kv, index, info); err != nil {
		t.Fatal(err)
	}
	// Stream time 1000, ttl 100: timestamps below 900 are expired.
	for k, want := range map[string]bool{"old": false, "edge": true, "new": true, "none": false} {
		if _, found, err := view.Get([]byte(k)); err != nil || found != want {
			t.Errorf("Get(%s) found=%v err=%v, want found=%v", k, found, err, want)
		}
	}
	var keys []string
	if err := view.Range(nil, nil, func(k, _ []byte) bool { keys = append(keys, string(k)); return true }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0] != "edge" || keys[1] != "new" {
		t.Errorf("Range = %q, want [edge new]", keys)
	}
	info.TTL = 0
	if view, _ := ExpiringKeyValue(kv, index, info); view != kv {
		t.Errorf("a store without TTL is not wrapped")
	}
}
