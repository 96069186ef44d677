package processor_test

import (
	"cmp"
	"context"
	"encoding/binary"
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

// ksWindowedRecord is a record of a windowed count as a Kafka Streams
// consumer reads it: key, window, count (-1: a tombstone), partition.
type ksWindowedRecord struct {
	key        string
	start, end int64
	count      int64
	partition  int32
}

func (r ksWindowedRecord) String() string {
	return fmt.Sprintf("p%d [%s@%d/%d]=%d", r.partition, r.key, r.start, r.end, r.count)
}

// decodeKS decodes recs as Kafka Streams' deserializers would, written out
// here from its code: TimeWindowedDeserializer(StringDeserializer, size)
// takes all but the last 8 bytes as the key and the last 8 as the start
// (end = start + size); SessionWindowedDeserializer takes the last 16 as
// end, then start. It also checks each record sits in partition(record).
func decodeKS(t *testing.T, recs []*kgo.Record, session bool, size int64, partition func(ksWindowedRecord) int32) []ksWindowedRecord {
	t.Helper()
	var out []ksWindowedRecord
	for _, r := range recs {
		var w ksWindowedRecord
		if session {
			if len(r.Key) < 16 {
				t.Fatalf("session-windowed key %x: under 16 bytes", r.Key)
			}
			n := len(r.Key) - 16
			w = ksWindowedRecord{key: string(r.Key[:n]), end: int64(binary.BigEndian.Uint64(r.Key[n:])), start: int64(binary.BigEndian.Uint64(r.Key[n+8:]))}
		} else {
			if len(r.Key) < 8 {
				t.Fatalf("time-windowed key %x: under 8 bytes", r.Key)
			}
			n := len(r.Key) - 8
			w = ksWindowedRecord{key: string(r.Key[:n]), start: int64(binary.BigEndian.Uint64(r.Key[n:]))}
			w.end = w.start + size
		}
		w.count, w.partition = -1, r.Partition
		if r.Value != nil {
			w.count = int64(binary.BigEndian.Uint64(r.Value))
		}
		if want := partition(w); r.Partition != want {
			t.Errorf("%s: want partition %d", w, want)
		}
		out = append(out, w)
	}
	// By key and window; a window's records keep their order (one
	// partition holds them), while a key's windows may come from tasks
	// of different partitions upstream, in any order.
	slices.SortStableFunc(out, func(a, b ksWindowedRecord) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.start, b.start)
	})
	return out
}

// TestWindowedKeysOnTheBrokerAreKafkaStreams runs a tumbling and a session
// count on the broker, the tumbling one also through a repartition topic,
// and reads every topic holding windowed keys as a Kafka Streams consumer
// with WindowedSerdes would: keys, windows and partitions must be Kafka
// Streams'. Before, every key was written as key + start + end.
func TestWindowedKeysOnTheBrokerAreKafkaStreams(t *testing.T) {
	t.Parallel()
	const parts = 3
	in := kafkatest.NewTopic(t, parts, nil)
	tumblingOut, sessionOut, throughOut := kafkatest.NewTopic(t, parts, nil), kafkatest.NewTopic(t, parts, nil), kafkatest.NewTopic(t, parts, nil)
	app := kafkatest.UniqueName(t, "wk")
	b := topology.NewBuilder(app)
	g := b.Stream(in, serde.String(), serde.String()).GroupByKey()
	tumbling := topology.WindowedBy(g, topology.TumblingWindows(10*time.Second, time.Minute)).
		Count(topology.Named("tumbling")).ToStream()
	tumbling.To(tumblingOut)
	through := tumbling.Repartition(topology.Named("windowed-through"))
	through.To(throughOut)
	through.ToTable(topology.Named("latest"))
	topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(5*time.Second, time.Minute)).
		Count(topology.Named("sessions")).ToStream().To(sessionOut)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rec := func(k string, ms int64) *kgo.Record {
		return &kgo.Record{Topic: in, Partition: topology.DefaultPartition([]byte(k), parts), Key: []byte(k), Value: []byte("v"), Timestamp: time.UnixMilli(ms)}
	}
	kafkatest.Produce(t, rec("alice", 1000), rec("bob", 2000), rec("alice", 4000), rec("alice", 12000), rec("carol", 15000))
	a, _ := runApp(t, topo, processor.WithHTTP("127.0.0.1:0"))

	// An output topic's windowed keys are where Kafka Streams'
	// WindowedStreamPartitioner puts them: the murmur2 of the key inside
	// the window.
	p := func(k string) int32 { return topology.DefaultPartition([]byte(k), parts) }
	ksPartitioner := func(w ksWindowedRecord) int32 { return p(w.key) }
	// A repartition topic's are where they always were, by the layout of
	// the stores downstream, key + start + end: a key query of such a store
	// finds the key's partition from its bytes.
	storeLayout := func(w ksWindowedRecord) []byte {
		b := binary.BigEndian.AppendUint64([]byte(w.key), uint64(w.start))
		return binary.BigEndian.AppendUint64(b, uint64(w.end))
	}
	byStoreLayout := func(w ksWindowedRecord) int32 { return topology.DefaultPartition(storeLayout(w), parts) }
	wantTumbling := []ksWindowedRecord{
		{"alice", 0, 10000, 1, p("alice")}, {"alice", 0, 10000, 2, p("alice")}, {"alice", 10000, 20000, 1, p("alice")},
		{"bob", 0, 10000, 1, p("bob")}, {"carol", 10000, 20000, 1, p("carol")},
	}
	for _, topic := range []string{tumblingOut, throughOut} {
		got := decodeKS(t, kafkatest.ConsumeExactly(t, topic, len(wantTumbling), 2*time.Minute, 2*time.Second), false, 10000, ksPartitioner)
		if !slices.Equal(got, wantTumbling) {
			t.Errorf("%s as Kafka Streams reads it:\n got %v\nwant %v", topic, got, wantTumbling)
		}
	}
	repart := app + "-windowed-through-repartition"
	got := decodeKS(t, kafkatest.ConsumeExactly(t, repart, len(wantTumbling), 2*time.Minute, 2*time.Second), false, 10000, byStoreLayout)
	var want []ksWindowedRecord
	for _, w := range wantTumbling {
		w.partition = byStoreLayout(w)
		want = append(want, w)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s as Kafka Streams reads it:\n got %v\nwant %v", repart, got, want)
	}
	// The store the repartition feeds answers a key query for each window
	// without being told the partition.
	waitReady(t, a)
	for _, w := range wantTumbling[1:] {
		res, err := a.Get(context.Background(), "latest", storeLayout(w))
		if err != nil || !res.Found || res.Partition != byStoreLayout(w) {
			t.Errorf("Get %s from latest: found %v in partition %d, err %v", w, res.Found, res.Partition, err)
		}
	}
	wantSessions := []ksWindowedRecord{
		{"alice", 1000, 1000, 1, p("alice")}, {"alice", 1000, 1000, -1, p("alice")}, {"alice", 1000, 4000, 2, p("alice")},
		{"alice", 12000, 12000, 1, p("alice")}, {"bob", 2000, 2000, 1, p("bob")}, {"carol", 15000, 15000, 1, p("carol")},
	}
	got = decodeKS(t, kafkatest.ConsumeExactly(t, sessionOut, len(wantSessions), 2*time.Minute, 2*time.Second), true, 0, ksPartitioner)
	if !slices.Equal(got, wantSessions) {
		t.Errorf("%s as Kafka Streams reads it:\n got %v\nwant %v", sessionOut, got, wantSessions)
	}
}
