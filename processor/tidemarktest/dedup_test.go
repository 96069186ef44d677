package tidemarktest_test

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/store/memstore"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// dedupTopology reads "in" (values "<id>" or "<id>:<payload>") and writes
// "out", deduplicated by id within window; its store is "dedup".
func dedupTopology(t *testing.T, window time.Duration) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.String()).
		Deduplicate(func(_, v string) string { id, _, _ := strings.Cut(v, ":"); return id }, window, topology.Named("dedup")).
		To("out")
	topo, err := b.Build()
	must(t, err)
	return topo
}

type tsKV struct {
	Key, Value string
	TS         int64
	NullKey    bool
	Tombstone  bool
}

func readTS(t *testing.T, o *tidemarktest.OutputTopic[string, string]) []tsKV {
	t.Helper()
	var out []tsKV
	for _, r := range readAll(t, o) {
		out = append(out, tsKV{r.Key, r.Value, r.Timestamp, r.NullKey, r.Tombstone})
	}
	return out
}

// dedupIDs lists the ids the dedup store remembers with their first-seen
// times, read through the layout documented in topology/dedup.go (id
// entries start with byte 0, time-index entries with byte 1); it also
// returns the number of index entries.
func dedupIDs(t *testing.T, s store.Store) (ids map[string]int64, index int) {
	t.Helper()
	ids = map[string]int64{}
	err := s.(store.KeyValue).Range(nil, nil, func(k, v []byte) bool {
		switch k[0] {
		case 0:
			ids[string(k[1:])] = int64(binary.BigEndian.Uint64(v))
		case 1:
			index++
		default:
			t.Errorf("unexpected dedup store key %q", k)
		}
		return true
	})
	must(t, err)
	return ids, index
}

func TestDeduplicateDropsRepeatsWithinWindow(t *testing.T) {
	d, err := tidemarktest.New(dedupTopology(t, 10*time.Second))
	must(t, err)
	t.Cleanup(func() { must(t, d.Close()) })
	in := tidemarktest.Input(d, "in", serde.String(), serde.String())
	out := tidemarktest.Output(d, "out", serde.String(), serde.String())

	steps := []struct {
		key, value string
		ts         int64
		pass       bool
		why        string
	}{
		{"k", "e1:a", 1000, true, "first e1"},
		{"k", "e1:b", 5000, false, "e1 again 4s later"},
		{"k2", "e2", 8000, true, "first e2 (another key: dedup is by id)"},
		{"k", "e2", 3000, false, "e2 out of order, 5s before its first"},
		{"k", "e1:c", 11000, false, "e1 exactly window after its first (inclusive)"},
		{"k", "e3", 12000, true, "stream time 12000 forgets e1 (first seen 1000 < 12000-10000)"},
		{"k", "e1:d", 12500, true, "e1 passes again once forgotten"},
		{"k", "e1:e", 12600, false, "and is remembered from 12500"},
		{"k", "e9:late", 100, true, "late (before stream time - window), unknown id: passes unchecked"},
		{"k", "e9:late-again", 150, true, "and was not remembered"},
	}
	for _, s := range steps {
		must(t, in.Pipe(s.key, s.value, s.ts))
		got := readTS(t, out)
		if s.pass {
			if want := []tsKV{{Key: s.key, Value: s.value, TS: s.ts}}; !slices.Equal(got, want) {
				t.Errorf("%s: out = %v, want %v unchanged", s.why, got, want)
			}
		} else if len(got) != 0 {
			t.Errorf("%s: out = %v, want it dropped", s.why, got)
		}
	}

	// Null keys are deduplicated by id like any record; tombstones and
	// records with an empty id pass unchecked.
	must(t, in.PipeNullKey("e3", 13000, 0))
	must(t, in.PipeNullKey("e4", 13000, 0))
	must(t, in.PipeTombstone("k", 13000))
	must(t, in.PipeTombstone("k", 13000))
	must(t, in.Pipe("k", ":no-id", 13000))
	must(t, in.Pipe("k", ":no-id", 13000))
	want := []tsKV{{Value: "e4", TS: 13000, NullKey: true}, {Key: "k", TS: 13000, Tombstone: true}, {Key: "k", TS: 13000, Tombstone: true},
		{Key: "k", Value: ":no-id", TS: 13000}, {Key: "k", Value: ":no-id", TS: 13000}}
	if got := readTS(t, out); !slices.Equal(got, want) {
		t.Errorf("null key e3 (dup), e4; two tombstones; two empty ids: out = %v, want %v", got, want)
	}

	m := d.Metrics()
	if n := m.DroppedBy[task.DropKey{Node: "dedup", Reason: topology.DropDuplicate}]; n != 5 || m.TotalDropped() != 5 {
		t.Errorf("dropped = %v, want 5 by dedup with reason duplicate", m.DroppedBy)
	}
	if got := topology.DropDuplicate.String(); got != "duplicate" {
		t.Errorf("DropDuplicate.String() = %q, want duplicate (the metric's reason label)", got)
	}
}

func TestDeduplicateStoreIsBounded(t *testing.T) {
	topo := dedupTopology(t, time.Second)
	if info, ok := topo.Store("dedup"); !ok || info.Changelog != "app-dedup-changelog" || info.Spec.Kind != store.KindKeyValue {
		t.Fatalf("store info %+v %v, want key-value store dedup logged to app-dedup-changelog", info, ok)
	}
	d, err := tidemarktest.New(topo)
	must(t, err)
	t.Cleanup(func() { must(t, d.Close()) })
	in := tidemarktest.Input(d, "in", serde.String(), serde.String())
	for i := range 1000 {
		must(t, in.Pipe("k", "id"+string(rune('a'+i%26))+strings.Repeat("x", i/26), int64(i)*10))
	}
	s, err := d.Store("dedup", 0)
	must(t, err)
	ids, index := dedupIDs(t, s)
	// Stream time 9990, window 1000: ids first seen at 8990..9990 remain.
	if len(ids) != 101 || index != 101 {
		t.Errorf("after 1000 ids at 0..9990: %d ids, %d index entries, want 101 each (first seen ≥ 8990)", len(ids), index)
	}
	for id, ts := range ids {
		if ts < 8990 {
			t.Errorf("id %q first seen at %d is still remembered at stream time 9990", id, ts)
		}
	}
	must(t, in.Pipe("k", "far", 1_000_000))
	if ids, index := dedupIDs(t, s); len(ids) != 1 || ids["far"] != 1_000_000 || index != 1 {
		t.Errorf("after stream time jumps to 1000000: ids %v, %d index entries, want only far", ids, index)
	}
	if n := len(readAll(t, tidemarktest.Output(d, "out", serde.String(), serde.String()))); n != 1001 {
		t.Errorf("%d records out, want all 1001 (distinct ids)", n)
	}
}

// changelogProvider stands in for the service's logged stores: every write
// to a key-value store is appended to a per-store log (a nil value is a
// tombstone), and Open restores a fresh in-memory store by replaying the
// log, as the service restores from a changelog topic.
type changelogProvider struct {
	logs map[string][]logged
}

type logged struct{ key, value []byte }

func (p *changelogProvider) Open(spec store.Spec, partition int32) (store.Store, error) {
	s, err := memstore.NewProvider().Open(spec, partition)
	if err != nil {
		return nil, err
	}
	kv, ok := s.(store.KeyValue)
	if !ok {
		return s, nil
	}
	for _, l := range p.logs[spec.Name] {
		if err := kv.Put(l.key, l.value); err != nil {
			return nil, err
		}
	}
	return &loggedKV{KeyValue: kv, p: p, name: spec.Name}, nil
}

type loggedKV struct {
	store.KeyValue
	p    *changelogProvider
	name string
}

func (s *loggedKV) Put(k, v []byte) error {
	s.p.logs[s.name] = append(s.p.logs[s.name], logged{slices.Clone(k), slices.Clone(v)})
	return s.KeyValue.Put(k, v)
}

func (s *loggedKV) Delete(k []byte) error { return s.Put(k, nil) }

func TestDeduplicateStateSurvivesRestartFromChangelog(t *testing.T) {
	topo := dedupTopology(t, 10*time.Second)
	p := &changelogProvider{logs: map[string][]logged{}}
	d, err := tidemarktest.New(topo, tidemarktest.WithStoreProvider(p))
	must(t, err)
	in := tidemarktest.Input(d, "in", serde.String(), serde.String())
	must(t, in.Pipe("k", "e1", 1000))
	must(t, in.Pipe("k", "e2", 2000))
	must(t, d.Close())

	// A new driver restores the store from the log. (It restarts stream
	// time at -1: the test driver does not carry task clocks over.)
	d, err = tidemarktest.New(topo, tidemarktest.WithStoreProvider(p))
	must(t, err)
	t.Cleanup(func() { must(t, d.Close()) })
	in = tidemarktest.Input(d, "in", serde.String(), serde.String())
	out := tidemarktest.Output(d, "out", serde.String(), serde.String())
	must(t, in.Pipe("k", "e1", 3000))
	must(t, in.Pipe("k", "e3", 3000))
	if got := readKV(t, out); !slices.Equal(got, []kv{{"k", "e3"}}) {
		t.Errorf("after restart: out = %v, want e1 dropped (remembered from before), e3", got)
	}

	// Forgetting writes tombstones for both entries of each id.
	must(t, in.Pipe("k", "e4", 20000))
	var idTombs, indexTombs []string
	for _, l := range p.logs["dedup"] {
		switch {
		case l.value != nil:
		case l.key[0] == 0:
			idTombs = append(idTombs, string(l.key[1:]))
		case l.key[0] == 1 && len(l.key) >= 9:
			indexTombs = append(indexTombs, string(l.key[9:]))
		}
	}
	slices.Sort(idTombs)
	slices.Sort(indexTombs)
	if want := []string{"e1", "e2", "e3"}; !slices.Equal(idTombs, want) || !slices.Equal(indexTombs, want) {
		t.Errorf("changelog tombstones: ids %q, index entries of %q, want both for %q (forgotten at stream time 20000)", idTombs, indexTombs, want)
	}
	if s, err := d.Store("dedup", 0); err == nil {
		if ids, _ := dedupIDs(t, s); len(ids) != 1 || ids["e4"] != 20000 {
			t.Errorf("after forgetting: ids %v, want only e4", ids)
		}
	} else {
		t.Fatal(err)
	}
}
