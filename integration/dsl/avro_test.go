package dsl_test

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/serde/srtest"
	"github.com/tidemark-streams/tidemark/topology"
)

// Sensor readings in Avro through a Schema Registry (the in-process fake),
// aggregated per device into Avro stats: the first half of the input is
// written by a v1 producer, the second by a v2 producer that added an
// optional site and a unit enum with a default; the application reads
// both with the v2 schema, keeps its aggregates in a store whose changelog
// holds registry-framed Avro, and writes registry-framed Avro. Across the
// restart onto a fresh state directory, new serdes (empty caches) must
// fetch the changelog's writer schema by id to restore the aggregates.

const readingV1Schema = `{"type":"record","name":"Reading","namespace":"acme.sensors","fields":[
	{"name":"device","type":"string"},
	{"name":"seq","type":"long"},
	{"name":"celsius","type":"double"},
	{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
	{"name":"tags","type":{"type":"array","items":"string"}}]}`

const readingSchema = `{"type":"record","name":"Reading","namespace":"acme.sensors","fields":[
	{"name":"device","type":"string"},
	{"name":"seq","type":"long"},
	{"name":"celsius","type":"double"},
	{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
	{"name":"tags","type":{"type":"array","items":"string"}},
	{"name":"site","type":["null","string"],"default":null},
	{"name":"unit","type":{"type":"enum","name":"Unit","symbols":["C","F"]},"default":"C"}]}`

const deviceStatsSchema = `{"type":"record","name":"DeviceStats","namespace":"acme.sensors","fields":[
	{"name":"count","type":"long"},
	{"name":"sum","type":"double"},
	{"name":"units","type":{"type":"map","values":"long"}},
	{"name":"last","type":["null",` + readingSchema + `],"default":null}]}`

type readingV1 struct {
	Device  string    `avro:"device"`
	Seq     int64     `avro:"seq"`
	Celsius float64   `avro:"celsius"`
	At      time.Time `avro:"at"`
	Tags    []string  `avro:"tags"`
}

type unit string

type reading struct {
	Device  string    `avro:"device"`
	Seq     int64     `avro:"seq"`
	Celsius float64   `avro:"celsius"`
	At      time.Time `avro:"at"`
	Tags    []string  `avro:"tags"`
	Site    *string   `avro:"site"`
	Unit    unit      `avro:"unit"`
}

type deviceStats struct {
	Count int64            `avro:"count"`
	Sum   float64          `avro:"sum"`
	Units map[string]int64 `avro:"units"`
	Last  *reading         `avro:"last"`
}

func addReading(_ string, r reading, s deviceStats) deviceStats {
	units := make(map[string]int64, len(s.Units)+1)
	for k, v := range s.Units {
		units[k] = v
	}
	units[string(r.Unit)]++
	return deviceStats{Count: s.Count + 1, Sum: s.Sum + r.Celsius, Units: units, Last: &r}
}

func mustAvroSerde[T any](t *testing.T, schema string, opts ...serde.AvroOption) serde.Serde[T] {
	t.Helper()
	s, err := serde.Avro[T](schema, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// avroTopo builds the topology with new serdes, as a new process would.
func avroTopo(t *testing.T, cl *sr.Client, app, in, out string) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder(app, topology.RequireNamedState())
	b.Stream(in, serde.String(), mustAvroSerde[reading](t, readingSchema, serde.WithRegistry(cl, in+"-value"))).
		GroupByKey().
		Aggregate(func() deviceStats { return deviceStats{Units: map[string]int64{}} }, addReading,
			mustAvroSerde[deviceStats](t, deviceStatsSchema, serde.WithRegistry(cl, out+"-value")), topology.Named("device-stats")).
		ToStream().To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestAvroRegistrySerdesAcrossRestart(t *testing.T) {
	rng := seeded(t)
	fake := srtest.NewRegistry(t)
	cl := fake.Client(t)
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	app := kafkatest.UniqueName(t, "avro")

	v1 := mustAvroSerde[readingV1](t, readingV1Schema, serde.WithRegistry(cl, in+"-value"))
	v2 := mustAvroSerde[reading](t, readingSchema, serde.WithRegistry(cl, in+"-value"))
	model := map[string]deviceStats{}
	var halves [2][]record
	ts := time.Now().Add(-time.Hour).UnixMilli()
	seq := int64(0)
	for h := range 2 {
		for range 120 {
			ts += rng.Int64N(1000)
			rts := ts - rng.Int64N(3000) // out of order
			dev := fmt.Sprintf("dev-%d", rng.IntN(12))
			if rng.IntN(12) == 0 {
				// Aggregations skip tombstones.
				halves[h] = append(halves[h], record{key: dev, tombstone: true, ts: rts})
				continue
			}
			seq++
			r := reading{Device: dev, Seq: seq, Celsius: float64(rng.IntN(400)-100) / 4,
				At: time.UnixMilli(rts).UTC(), Tags: []string{}, Unit: "C"}
			for range rng.IntN(3) {
				r.Tags = append(r.Tags, fmt.Sprintf("t%d", rng.IntN(5)))
			}
			var b []byte
			var err error
			if h == 0 {
				b, err = v1.Encode(nil, readingV1{r.Device, r.Seq, r.Celsius, r.At, r.Tags})
			} else {
				if rng.IntN(2) == 0 {
					site := fmt.Sprintf("site-%d", rng.IntN(3))
					r.Site = &site
				}
				if rng.IntN(3) == 0 {
					r.Unit = "F"
				}
				b, err = v2.Encode(nil, r)
			}
			if err != nil {
				t.Fatal(err)
			}
			halves[h] = append(halves[h], record{key: dev, value: string(b), ts: rts})
			old, ok := model[dev]
			if !ok {
				old = deviceStats{Units: map[string]int64{}}
			}
			model[dev] = addReading(dev, r, old)
		}
		if h == 0 {
			produce(t, in, 2, halves[0]...)
			want := copyStats(model)
			stop := startApp(t, avroTopo(t, cl, app, in, out), t.TempDir())
			readUntil(t, out, 40*time.Second, func(recs []*kgo.Record) bool {
				return reflect.DeepEqual(decodeLatest(t, cl, out, recs), want)
			})
			stop()
		}
	}
	produce(t, in, 2, halves[1]...)
	startApp(t, avroTopo(t, cl, app, in, out), t.TempDir())
	var got map[string]deviceStats
	recs := readUntil(t, out, 40*time.Second, func(recs []*kgo.Record) bool {
		got = decodeLatest(t, cl, out, recs)
		return reflect.DeepEqual(got, model)
	})
	outIDs := fake.Subjects(out + "-value")
	if len(outIDs) != 1 {
		t.Fatalf("subject %s-value holds %v, want the stats schema once", out, outIDs)
	}
	for _, r := range recs {
		if r.Value[0] != 0 || int(binary.BigEndian.Uint32(r.Value[1:5])) != outIDs[0] {
			t.Fatalf("output %x is not framed with magic byte 0 and schema id %d", r.Value[:5], outIDs[0])
		}
	}
	if len(fake.Subjects(in+"-value")) != 2 {
		t.Errorf("subject %s-value holds %v, want the v1 and v2 reading schemas", in, fake.Subjects(in+"-value"))
	}
}

func copyStats(m map[string]deviceStats) map[string]deviceStats {
	out := make(map[string]deviceStats, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// decodeLatest decodes an output topic's records with a serde of its own
// (fetching the writer schema by id) and folds them into the final table.
func decodeLatest(t *testing.T, cl *sr.Client, topic string, recs []*kgo.Record) map[string]deviceStats {
	t.Helper()
	s := mustAvroSerde[deviceStats](t, deviceStatsSchema, serde.WithRegistry(cl, topic+"-value"))
	out := map[string]deviceStats{}
	for _, r := range recs {
		if r.Value == nil {
			delete(out, string(r.Key))
			continue
		}
		v, err := s.Decode(r.Value)
		if err != nil {
			t.Fatalf("decode output %s: %v", r.Key, err)
		}
		out[string(r.Key)] = v
	}
	return out
}

// A registry outage is not a bad record: even with a dead-letter topic and
// a processing-error handler that dead-letters, the records it could not
// decode are neither dead-lettered (and so lost) nor skipped. The app
// waits the outage out, redoing the transaction after a growing pause, and
// processes them once the registry is back, without a restart.
func TestAvroRegistryOutageIsWaitedOutNotDeadLettered(t *testing.T) {
	fake := srtest.NewRegistry(t)
	cl := fake.Client(t)
	in, out, dlq := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	app := kafkatest.UniqueName(t, "avro-outage")
	topo := func() *topology.Topology {
		b := topology.NewBuilder(app)
		b.Stream(in, serde.String(), mustAvroSerde[reading](t, readingSchema, serde.WithRegistry(cl, in+"-value"))).
			MapValues(func(_ string, r reading) string { return fmt.Sprintf("%s#%d", r.Device, r.Seq) }).
			WithSerdes(serde.String(), serde.String()).To(out)
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}
	v1 := mustAvroSerde[readingV1](t, readingV1Schema, serde.WithRegistry(cl, in+"-value"))
	var recs []record
	for i := range 3 {
		b, err := v1.Encode(nil, readingV1{Device: "d", Seq: int64(i), At: time.UnixMilli(0).UTC(), Tags: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, record{key: "d", value: string(b), ts: time.Now().UnixMilli()})
	}
	produce(t, in, 1, recs...)

	fake.SetDown(true)
	startApp(t, topo(), t.TempDir(), processor.WithDeadLetterTopic(dlq), processor.WithProcessingErrorHandler(processor.DeadLetterOnError))
	kafkatest.ConsumeExactly(t, out, 0, 4*time.Second, 4*time.Second) // held back while the registry is down
	fake.SetDown(false)
	readUntil(t, out, 40*time.Second, func(recs []*kgo.Record) bool { return len(recs) == 3 })
	kafkatest.ConsumeExactly(t, dlq, 0, 5*time.Second, 2*time.Second) // nothing dead-lettered
}
