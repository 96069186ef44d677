package dsl_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// suppressModel is Table.Suppress(UntilTimeLimit(limit, unbounded buffer))
// for one task (one partition), from the specification: the upstream
// table, the buffer of pending updates per key, and the updates emitted.
// Unlike the test driver, the service keeps the operator's stream time
// across a restart, so the model does too.
type suppressModel struct {
	limit    int64
	observed int64
	table    map[string]string
	buf      map[string]*suppressPending
	out      []string // "key=value@ts" or "key=<delete>@ts"
}

type suppressPending struct {
	entered, ts int64
	value       *string
}

func (m *suppressModel) update(r record) {
	// A tombstone for a key the table does not hold is buffered too
	// (Kafka Streams' KTableSource forwards Change(null, null)).
	if r.tombstone {
		delete(m.table, r.key)
	} else {
		m.table[r.key] = r.value
	}
	m.observed = max(m.observed, r.ts)
	p, ok := m.buf[r.key]
	if !ok {
		p = &suppressPending{entered: r.ts}
		m.buf[r.key] = p
	}
	p.ts, p.value = r.ts, nil
	if !r.tombstone {
		p.value = &r.value
	}
	var due []string
	for k, p := range m.buf {
		if p.entered <= m.observed-m.limit {
			due = append(due, k)
		}
	}
	slices.SortFunc(due, func(a, b string) int {
		return cmp.Or(cmp.Compare(m.buf[a].entered, m.buf[b].entered), strings.Compare(a, b))
	})
	for _, k := range due {
		p := m.buf[k]
		delete(m.buf, k)
		v := "<delete>"
		if p.value != nil {
			v = *p.value
		}
		m.out = append(m.out, fmt.Sprintf("%s=%s@%d", k, v, p.ts))
	}
}

// The buffer and the operator's stream time survive a restart with a
// fresh state dir: updates buffered before it are emitted after it,
// exactly once, and records late by the stream time reached before it are
// late after it too.
func TestSuppressAcrossRestart(t *testing.T) {
	const partitions = 2
	const limit = 2 * time.Second
	rng := seeded(t)
	in := kafkatest.NewTopic(t, partitions, nil)
	out := kafkatest.NewTopic(t, partitions, nil)
	app := kafkatest.UniqueName(t, "app")
	build := func() *topology.Topology {
		b := topology.NewBuilder(app, topology.RequireNamedState())
		b.Table(in, serde.String(), serde.String(), topology.Named("stock")).
			Suppress(topology.UntilTimeLimit(limit, topology.BufferConfig{}), topology.Named("stock-2s")).
			ToStream().To(out)
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}

	models := make([]*suppressModel, partitions)
	for p := range models {
		models[p] = &suppressModel{limit: limit.Milliseconds(), observed: -1, table: map[string]string{}, buf: map[string]*suppressPending{}}
	}
	keys := []string{"sku-1", "sku-2", "sku-3", "sku-4", "sku-5", "sku-6", "sku-7", "sku-8", "sku-9", "sku-10", "sku-11", "sku-12"}
	base := time.Now().Add(-time.Hour).UnixMilli()
	half := func(n int) []record {
		recs := make([]record, 0, n)
		for range n {
			base += rng.Int64N(150)
			r := record{key: keys[rng.IntN(len(keys))], ts: base}
			if rng.IntN(5) == 0 { // out of order, some beyond the limit
				r.ts -= rng.Int64N(4000)
			}
			if rng.IntN(6) == 0 {
				r.tombstone = true
			} else {
				r.value = fmt.Sprintf("%d", rng.IntN(20))
			}
			recs = append(recs, r)
			models[processor.DefaultPartition([]byte(r.key), partitions)].update(r)
		}
		return recs
	}
	emitted := func() int {
		n := 0
		for _, m := range models {
			n += len(m.out)
		}
		return n
	}

	first := half(150)
	n1 := emitted()
	produce(t, in, partitions, first...)
	stop := startApp(t, build(), t.TempDir())
	readUntil(t, out, 45*time.Second, func(rs []*kgo.Record) bool { return len(rs) >= n1 })
	stop()
	buffered := 0
	for _, m := range models {
		buffered += len(m.buf)
	}
	t.Logf("first half: %d updates emitted, %d keys buffered at the restart", n1, buffered)

	// The second half starts, in each partition, with two updates of one
	// key, both late by the stream time reached before the restart: each
	// goes out at once. An operator that lost its stream time would buffer
	// the first and emit only the second.
	var second []record
	for p, m := range models {
		for _, k := range keys {
			if processor.DefaultPartition([]byte(k), partitions) != int32(p) {
				continue
			}
			for i := range int64(2) {
				r := record{key: k, value: fmt.Sprintf("late-%d", i), ts: m.observed - 3*limit.Milliseconds() + i}
				m.update(r)
				second = append(second, r)
			}
			break
		}
	}
	second = append(second, half(150)...)
	n := emitted()
	produce(t, in, partitions, second...)
	startApp(t, build(), t.TempDir()) // a fresh state dir: restore from the changelogs
	got := kafkatest.ConsumeExactly(t, out, n, 45*time.Second, 3*time.Second)

	perPartition := make([][]string, partitions)
	for _, r := range got {
		v := "<delete>"
		if r.Value != nil {
			v = string(r.Value)
		}
		perPartition[r.Partition] = append(perPartition[r.Partition], fmt.Sprintf("%s=%s@%d", r.Key, v, r.Timestamp.UnixMilli()))
	}
	for p, m := range models {
		if !slices.Equal(perPartition[p], m.out) {
			t.Errorf("partition %d: emitted %d updates, model %d\n got:   %v\n model: %v", p, len(perPartition[p]), len(m.out), perPartition[p], m.out)
		}
	}
	if buffered == 0 || n == n1 {
		t.Errorf("%d keys buffered at the restart, %d updates emitted after it: the input does not exercise the restart", buffered, n-n1)
	}
}
