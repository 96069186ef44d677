package dsl_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// asOfModel is the reference of a versioned table and the as-of join:
// every version is kept, the table's stream time is per partition (per
// task), and the documented rules decide what is answered.
type asOfModel struct {
	history    int64
	partitions int32
	st         map[int32]int64
	versions   map[string][]record // per key, ascending timestamps
}

func (m *asOfModel) cutoff(key string) int64 {
	st, ok := m.st[processor.DefaultPartition([]byte(key), m.partitions)]
	if !ok {
		return math.MinInt64
	}
	return st - m.history
}

// update applies a table update and returns what the table forwards, if
// anything.
func (m *asOfModel) update(r record) (fwd record, ok bool) {
	if r.ts < m.cutoff(r.key) {
		return fwd, false // late: dropped
	}
	p := processor.DefaultPartition([]byte(r.key), m.partitions)
	if st, seen := m.st[p]; !seen || r.ts > st {
		m.st[p] = r.ts
	}
	vers := m.versions[r.key]
	latest := len(vers) == 0 || r.ts >= vers[len(vers)-1].ts
	vers = slices.DeleteFunc(vers, func(o record) bool { return o.ts == r.ts })
	i := 0
	for i < len(vers) && vers[i].ts < r.ts {
		i++
	}
	m.versions[r.key] = slices.Insert(vers, i, r)
	// A delete of a key without a value is forwarded too, as Kafka
	// Streams' KTableSource forwards Change(null, null).
	return r, latest
}

func (m *asOfModel) asOf(key string, ts int64) (string, bool) {
	vers := m.versions[key]
	if ts < m.cutoff(key) {
		// Before the cutoff only the latest version is answered (Kafka
		// Streams' RocksDBVersionedStore.get).
		if n := len(vers); n > 0 && vers[n-1].ts <= ts {
			return vers[n-1].value, !vers[n-1].tombstone
		}
		return "", false
	}
	for i := len(vers) - 1; i >= 0; i-- {
		if vers[i].ts <= ts {
			return vers[i].value, !vers[i].tombstone
		}
	}
	return "", false
}

// TestVersionedJoinAcrossRestart runs an as-of join of cart adds with a
// versioned price table on the broker: half of the input, a stop, a new
// app with the same application id and a fresh state dir (the versions and
// the table's stream time come back from the changelog), the other half.
// Every join output and every forwarded table update is checked against
// the model. Price updates are out of order, some older than the history
// (dropped), some deletes; cart adds look up times before, between and
// after them, some older than the history.
func TestVersionedJoinAcrossRestart(t *testing.T) {
	r := seeded(t)
	const parts = 2
	const history = 5000
	prices := kafkatest.NewTopic(t, parts, nil)
	adds := kafkatest.NewTopic(t, parts, nil)
	priced := kafkatest.NewTopic(t, parts, nil)
	updates := kafkatest.NewTopic(t, parts, nil)
	appID := kafkatest.UniqueName(t, "app")
	build := func() *topology.Topology {
		b := topology.NewBuilder(appID)
		table := b.Table(prices, serde.String(), serde.String(), topology.Named("prices"), topology.Versioned(history*time.Millisecond))
		b.Stream(adds, serde.String(), serde.String()).
			LeftJoinTable(table, func(_ string, add, price string, ok bool) string {
				if !ok {
					return add + "=unknown"
				}
				return add + "=" + price
			}).To(priced)
		table.ToStream().To(updates)
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}
	// One marker key per partition: its update, produced last in a phase
	// at the partition's stream time, is forwarded once the partition's
	// earlier updates have been processed.
	markers := map[int32]string{}
	for i := 0; len(markers) < parts; i++ {
		k := "marker-" + strconv.Itoa(i)
		if p := processor.DefaultPartition([]byte(k), parts); markers[p] == "" {
			markers[p] = k
		}
	}

	m := &asOfModel{history: history, partitions: parts, st: map[int32]int64{}, versions: map[string][]record{}}
	base := time.Now().Add(-time.Hour).UnixMilli()
	clock := base
	var wantUpdates []record
	wantPriced := map[string]string{} // cart add → joined value
	nAdds := 0
	// updatesStep produces n price updates and waits until they are
	// processed, so the model knows what the table holds when cart adds
	// follow: the as-of join makes the result independent of how the two
	// topics interleave after that.
	updatesStep := func(n int) {
		t.Helper()
		var ups []record
		for range n {
			clock += int64(r.IntN(100))
			key := "sku-" + strconv.Itoa(r.IntN(6))
			u := record{key: key, ts: clock - int64(r.IntN(8000)), value: "p" + strconv.Itoa(r.IntN(1000))}
			if r.IntN(6) == 0 {
				u.tombstone, u.value = true, ""
			}
			ups = append(ups, u)
		}
		for p, k := range markers {
			st, ok := m.st[p]
			for _, u := range ups {
				if processor.DefaultPartition([]byte(u.key), parts) == p && (!ok || u.ts > st) {
					st, ok = u.ts, true
				}
			}
			ups = append(ups, record{key: k, value: fmt.Sprintf("at-%d", len(wantUpdates)+len(ups)), ts: st})
		}
		for _, u := range ups {
			if fwd, ok := m.update(u); ok {
				wantUpdates = append(wantUpdates, fwd)
			}
		}
		produce(t, prices, parts, ups...)
		readUntil(t, updates, 45*time.Second, func(got []*kgo.Record) bool { return len(got) >= len(wantUpdates) })
	}
	// addsStep produces n cart adds, some older than the history (the
	// table's stream time − 5s), and waits for their join outputs.
	addsStep := func(n int) {
		t.Helper()
		var cart []record
		for range n {
			key := "sku-" + strconv.Itoa(r.IntN(7)) // sku-6 has no price
			add := record{key: key, value: "add" + strconv.Itoa(nAdds), ts: clock - int64(r.IntN(9000)) + 500}
			nAdds++
			v, ok := m.asOf(key, add.ts)
			if !ok {
				v = "unknown"
			}
			wantPriced[add.value] = add.value + "=" + v
			cart = append(cart, add)
		}
		produce(t, adds, parts, cart...)
		readUntil(t, priced, 45*time.Second, func(got []*kgo.Record) bool { return len(got) >= len(wantPriced) })
	}

	stop := startApp(t, build(), t.TempDir())
	updatesStep(150)
	addsStep(150)
	stop()
	// A fresh state dir: the versions and the table's stream time (hence
	// its cutoff) come back from the changelog. Cart adds first, so they
	// see exactly the restored table.
	app, _ := runApp(t, build(), t.TempDir())
	addsStep(100)
	updatesStep(150)
	addsStep(100)

	// Interactive queries of the table's store answer each key's latest
	// value (not the raw versions).
	var wantLatest []string
	for _, k := range slices.Sorted(maps.Keys(m.versions)) {
		if vers := m.versions[k]; !vers[len(vers)-1].tombstone {
			wantLatest = append(wantLatest, k+"="+vers[len(vers)-1].value)
		}
	}
	var gotLatest []string
	for deadline := time.Now().Add(20 * time.Second); ; {
		gotLatest = gotLatest[:0]
		res, err := app.Range(context.Background(), "prices", nil, nil, 0)
		if errors.Is(err, processor.ErrNoOwner) && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond) // a session restarting: its partitions answer again soon
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range res.Entries {
			gotLatest = append(gotLatest, string(e.Key)+"="+string(e.Value))
		}
		slices.Sort(gotLatest)
		if slices.Equal(gotLatest, wantLatest) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !slices.Equal(gotLatest, wantLatest) {
		t.Errorf("Range over the versioned table's store = %v, model %v", gotLatest, wantLatest)
	}
	for _, k := range []string{"sku-0", "sku-1", "sku-6"} {
		res, err := app.Get(context.Background(), "prices", []byte(k))
		if err != nil {
			t.Fatal(err)
		}
		vers := m.versions[k]
		want := len(vers) > 0 && !vers[len(vers)-1].tombstone
		if res.Found != want || (want && (len(res.Entries) != 1 || string(res.Entries[0].Value) != vers[len(vers)-1].value)) {
			t.Errorf("Get(%s) = %+v, model %v", k, res.Entries, vers)
		}
	}

	got := readUntil(t, priced, 30*time.Second, func(got []*kgo.Record) bool { return len(got) >= len(wantPriced) })
	joined, unknown := 0, 0
	seen := map[string]bool{}
	for _, rec := range got {
		add, _, _ := strings.Cut(string(rec.Value), "=")
		if seen[add] {
			t.Errorf("cart add %s joined twice (exactly-once broken?)", add)
		}
		seen[add] = true
		if want := wantPriced[add]; string(rec.Value) != want {
			t.Errorf("cart add %s: joined %q, model %q", add, rec.Value, want)
		}
		if strings.HasSuffix(string(rec.Value), "=unknown") {
			unknown++
		} else {
			joined++
		}
	}
	if len(got) != len(wantPriced) {
		t.Errorf("%d join outputs, want %d", len(got), len(wantPriced))
	}
	t.Logf("%d cart adds joined a price, %d did not; %d table updates forwarded", joined, unknown, len(wantUpdates))

	// The forwarded table updates, in order per key.
	gotUpdates := readUntil(t, updates, 30*time.Second, func(got []*kgo.Record) bool { return len(got) >= len(wantUpdates) })
	perKey := func(rs []record) map[string][]string {
		out := map[string][]string{}
		for _, u := range rs {
			v := u.value
			if u.tombstone {
				v = "<delete>"
			}
			out[u.key] = append(out[u.key], fmt.Sprintf("%s@%d", v, u.ts))
		}
		return out
	}
	var gotRecs []record
	for _, rec := range gotUpdates {
		gotRecs = append(gotRecs, record{key: string(rec.Key), value: string(rec.Value), tombstone: rec.Value == nil, ts: rec.Timestamp.UnixMilli()})
	}
	want, have := perKey(wantUpdates), perKey(gotRecs)
	for k := range want {
		if !slices.Equal(have[k], want[k]) {
			t.Errorf("table updates of %s: %v, model %v", k, have[k], want[k])
		}
	}
	if len(gotRecs) != len(wantUpdates) {
		t.Errorf("%d table updates forwarded, model %d", len(gotRecs), len(wantUpdates))
	}
}
