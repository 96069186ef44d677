package topology_test

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// The expected bytes are what Kafka Streams' serializers write, worked out
// from their code: TimeWindowedSerializer → WindowKeySchema.toBinary (key
// bytes, then the 8-byte big-endian start) and SessionWindowedSerializer →
// SessionKeySchema.toBinary (key bytes, then the end, then the start).

func TestTimeWindowedSerdeIsKafkaStreamsLayout(t *testing.T) {
	s := topology.TimeWindowedSerde(serde.String(), 10*time.Second)
	w := topology.Windowed[string]{Key: "ab", Start: 0x0102030405060708, End: 0x0102030405060708 + 10000}
	got, err := s.Encode(nil, w)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{'a', 'b', 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded %x, Kafka Streams writes %x", got, want)
	}
	back, err := s.Decode(want)
	if err != nil || back != w {
		t.Fatalf("decoded %v, %v; want %v (end = start + size, as TimeWindowedDeserializer)", back, err, w)
	}
	// An empty key: the start alone.
	if back, err := s.Decode([]byte{0, 0, 0, 0, 0, 0, 0x27, 0x10}); err != nil || back != (topology.Windowed[string]{Start: 10000, End: 20000}) {
		t.Fatalf("empty key: %v, %v", back, err)
	}
}

func TestTimeWindowedSerdeEndSaturates(t *testing.T) {
	// WindowKeySchema.timeWindowForSize: an end past Long.MAX_VALUE is Long.MAX_VALUE.
	s := topology.TimeWindowedSerde(serde.String(), 10*time.Millisecond)
	b, err := s.Encode(nil, topology.Windowed[string]{Key: "k", Start: math.MaxInt64 - 5})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Decode(b)
	if err != nil || w.Start != math.MaxInt64-5 || w.End != math.MaxInt64 {
		t.Fatalf("decoded %v, %v", w, err)
	}
}

func TestSessionWindowedSerdeIsKafkaStreamsLayout(t *testing.T) {
	s := topology.SessionWindowedSerde(serde.String())
	w := topology.Windowed[string]{Key: "ab", Start: 1000, End: 5000}
	got, err := s.Encode(nil, w)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{'a', 'b',
		0, 0, 0, 0, 0, 0, 0x13, 0x88, // end 5000
		0, 0, 0, 0, 0, 0, 0x03, 0xe8} // start 1000
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded %x, Kafka Streams writes %x", got, want)
	}
	if back, err := s.Decode(want); err != nil || back != w {
		t.Fatalf("decoded %v, %v; want %v", back, err, w)
	}
}

func TestWindowedSerdesRejectShortKeys(t *testing.T) {
	if _, err := topology.TimeWindowedSerde(serde.String(), time.Second).Decode(make([]byte, 7)); !errors.Is(err, serde.ErrDecode) {
		t.Errorf("time-windowed key of 7 bytes: %v", err)
	}
	if _, err := topology.SessionWindowedSerde(serde.String()).Decode(make([]byte, 15)); !errors.Is(err, serde.ErrDecode) {
		t.Errorf("session-windowed key of 15 bytes: %v", err)
	}
}

// A sink of windowed keys partitions by the key inside the window, which a
// key query cannot compute from the serialized key: PartitionedTopics names
// its topic. A repartition of them partitions by the serialized store
// layout, which it can.
func TestPartitionedTopicsNameWindowedSinks(t *testing.T) {
	b := topology.NewBuilder("app")
	w := topology.WindowedBy(b.Stream("in", serde.String(), serde.String()).GroupByKey(),
		topology.TumblingWindows(time.Second, 0)).Count().ToStream()
	w.To("out")
	w.Repartition(topology.Named("through")).To("out2")
	b.Stream("other", serde.String(), serde.String()).To("plain")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	got := topo.PartitionedTopics()
	if !got["out"] || !got["out2"] || got["app-through-repartition"] || got["plain"] || len(got) != 2 {
		t.Fatalf("PartitionedTopics() = %v, want out and out2", got)
	}
}
