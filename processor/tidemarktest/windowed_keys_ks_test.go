package tidemarktest_test

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// ksTimeWindowed decodes a key as Kafka Streams'
// TimeWindowedDeserializer(StringDeserializer, size) does
// (WindowKeySchema.from): the key is all but the last 8 bytes, the start
// the last 8 (big-endian), the end start + size.
func ksTimeWindowed(t *testing.T, b []byte, size int64) (string, int64, int64) {
	t.Helper()
	if len(b) < 8 {
		t.Fatalf("time-windowed key of %d bytes", len(b))
	}
	n := len(b) - 8
	start := int64(binary.BigEndian.Uint64(b[n:]))
	return string(b[:n]), start, start + size
}

// ksSessionWindowed decodes a key as Kafka Streams'
// SessionWindowedDeserializer(StringDeserializer) does
// (SessionKeySchema.from): key, then the 8-byte end, then the start.
func ksSessionWindowed(t *testing.T, b []byte) (string, int64, int64) {
	t.Helper()
	if len(b) < 16 {
		t.Fatalf("session-windowed key of %d bytes", len(b))
	}
	n := len(b) - 16
	return string(b[:n]), int64(binary.BigEndian.Uint64(b[n+8:])), int64(binary.BigEndian.Uint64(b[n:]))
}

// ksPartition is Kafka Streams' WindowedStreamPartitioner: the murmur2 of
// the key inside the window.
func ksPartition(key string, n int32) int32 { return topology.DefaultPartition([]byte(key), n) }

type ksWindow struct {
	key        string
	start, end int64
	count      int64
}

// TestWindowedOutputKeysDecodeWithKafkaStreamsDeserializers runs each
// window kind's count to an output topic and reads the raw keys the way a
// Kafka Streams consumer with WindowedSerdes would: each must decode to the
// window tidemark emitted, and sit in the partition of its key.
func TestWindowedOutputKeysDecodeWithKafkaStreamsDeserializers(t *testing.T) {
	type pipeRec struct {
		key string
		ts  int64
	}
	in := []pipeRec{{"alice", 1000}, {"bob", 2000}, {"alice", 4000}, {"alice", 12000}}
	cases := []struct {
		name   string
		count  func(topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64]
		decode func(t *testing.T, b []byte) (string, int64, int64)
		want   []ksWindow
	}{
		{"tumbling", func(g topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64] {
			return topology.WindowedBy(g, topology.TumblingWindows(10*time.Second, time.Minute)).Count()
		}, func(t *testing.T, b []byte) (string, int64, int64) { return ksTimeWindowed(t, b, 10000) },
			[]ksWindow{{"alice", 0, 10000, 1}, {"bob", 0, 10000, 1}, {"alice", 0, 10000, 2}, {"alice", 10000, 20000, 1}}},
		{"hopping", func(g topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64] {
			return topology.WindowedBy(g, topology.HoppingWindows(10*time.Second, 5*time.Second, time.Minute)).Count()
		}, func(t *testing.T, b []byte) (string, int64, int64) { return ksTimeWindowed(t, b, 10000) },
			[]ksWindow{{"alice", 0, 10000, 1}, {"bob", 0, 10000, 1}, {"alice", 0, 10000, 2},
				{"alice", 5000, 15000, 1}, {"alice", 10000, 20000, 1}}},
		{"sliding", func(g topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64] {
			return topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(5*time.Second, time.Minute)).Count()
		}, func(t *testing.T, b []byte) (string, int64, int64) { return ksTimeWindowed(t, b, 5000) },
			nil}, // checked against the Windowed keys tidemark emitted, below
		{"session", func(g topology.GroupedStream[string, string]) topology.Table[topology.Windowed[string], int64] {
			return topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(5*time.Second, time.Minute)).Count()
		}, ksSessionWindowed,
			[]ksWindow{{"alice", 1000, 1000, 1}, {"bob", 2000, 2000, 1}, {"alice", 1000, 1000, -1},
				{"alice", 1000, 4000, 2}, {"alice", 12000, 12000, 1}}},
	}
	const parts = 4
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := topology.NewBuilder("app")
			table := c.count(b.Stream("clicks", serde.String(), serde.String()).GroupByKey())
			table.ToStream().To("counts")
			// The same stream through a peek: what tidemark's
			// own Windowed keys were, to compare the decoded ones with.
			var emitted []topology.Windowed[string]
			table.ToStream().Peek(func(k topology.Windowed[string], _ int64) { emitted = append(emitted, k) })
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			d, err := tidemarktest.New(topo, tidemarktest.WithPartitions("counts", parts))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			input := tidemarktest.Input(d, "clicks", serde.String(), serde.String())
			for _, r := range in {
				if err := input.Pipe(r.key, "x", r.ts); err != nil {
					t.Fatal(err)
				}
			}
			recs, err := tidemarktest.Output(d, "counts", serde.Bytes(), serde.Bytes()).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(emitted) {
				t.Fatalf("%d output records, %d emitted windows", len(recs), len(emitted))
			}
			for i, r := range recs {
				key, start, end := c.decode(t, r.Key)
				count := int64(-1)
				if !r.Tombstone {
					count = int64(binary.BigEndian.Uint64(r.Value))
				}
				got := ksWindow{key, start, end, count}
				e := emitted[i]
				if key != e.Key || start != e.Start || end != e.End {
					t.Errorf("record %d: Kafka Streams reads [%s@%d/%d], tidemark emitted %v (raw key %x)", i, key, start, end, e, r.Key)
				}
				if c.want != nil && (i >= len(c.want) || got != c.want[i]) {
					t.Errorf("record %d: %+v", i, got)
				}
				if p := ksPartition(e.Key, parts); r.Partition != p {
					t.Errorf("record %d (%v) in partition %d, Kafka Streams' WindowedStreamPartitioner puts it in %d", i, e, r.Partition, p)
				}
			}
		})
	}
}

// TestWindowedKeysInStoresKeepTidemarksLayout: the stores downstream of a
// windowed table (a table materialized from it, a Suppress buffer) keep
// the layout their changelogs have always held, key + start + end, so
// state written before windowed topics took Kafka Streams' layouts still
// restores; only topics changed.
func TestWindowedKeysInStoresKeepTidemarksLayout(t *testing.T) {
	b := topology.NewBuilder("app")
	counts := topology.WindowedBy(b.Stream("clicks", serde.String(), serde.String()).GroupByKey(),
		topology.TumblingWindows(10*time.Second, time.Minute)).Count()
	counts.ToStream().ToTable(topology.Named("latest"))
	counts.Suppress(topology.UntilTimeLimit(time.Hour, topology.BufferConfig{}), topology.Named("held"))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := tidemarktest.New(topo)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := tidemarktest.Input(d, "clicks", serde.String(), serde.String()).Pipe("alice", "x", 12000); err != nil {
		t.Fatal(err)
	}
	legacy := append([]byte("alice"), 0, 0, 0, 0, 0, 0, 0x27, 0x10, 0, 0, 0, 0, 0, 0, 0x4e, 0x20) // start 10000, end 20000
	latest, err := tidemarktest.ReadStore(d, "latest", serde.Bytes(), serde.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(latest) != 1 || !bytes.Equal(latest[0].Key, legacy) {
		t.Fatalf("store latest holds %v, want the one key %x", latest, legacy)
	}
	held, err := tidemarktest.ReadStore(d, "held", serde.Bytes(), serde.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range held {
		if bytes.Contains(e.Key, legacy) {
			n++
		}
	}
	if n == 0 {
		t.Fatalf("the Suppress buffer holds no key in tidemark's layout %x: %v", legacy, held)
	}
}
