package dsl_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/serde/srtest"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestGlobalTableRegistryOutageIsWaitedOut: a global table whose values
// are registry-framed Avro, with the registry down while the app starts
// (the global restore decodes every record) and again while it runs (the
// global thread decodes each new record). As for a stream source, the
// outage is waited out: the app does not stop, and once the registry
// answers, the stream records join with every global record.
func TestGlobalTableRegistryOutageIsWaitedOut(t *testing.T) {
	fake := srtest.NewRegistry(t)
	cl := fake.Client(t)
	global, in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	app := kafkatest.UniqueName(t, "global-outage")
	b := topology.NewBuilder(app, topology.RequireNamedState())
	devices := b.GlobalTable(global, serde.String(), mustAvroSerde[reading](t, readingSchema, serde.WithRegistry(cl, global+"-value")),
		topology.Named("devices"))
	b.Stream(in, serde.String(), serde.String()).
		JoinGlobal(devices, func(k, _ string) string { return k }, func(k, v string, r reading) string {
			return fmt.Sprintf("%s/%s#%d", k, v, r.Seq)
		}, topology.Named("enrich")).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	v1 := mustAvroSerde[readingV1](t, readingV1Schema, serde.WithRegistry(cl, global+"-value"))
	encode := func(seq int64) string {
		b, err := v1.Encode(nil, readingV1{Device: "d", Seq: seq, At: time.UnixMilli(0).UTC(), Tags: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	produce(t, global, 1, record{key: "a", value: encode(1), ts: time.Now().UnixMilli()})

	fake.SetDown(true)
	a, stop := runApp(t, topo, t.TempDir())
	time.Sleep(3 * time.Second) // the restore meets the outage
	fake.SetDown(false)
	produce(t, in, 1, record{key: "a", value: "x", ts: time.Now().UnixMilli()})
	readUntil(t, out, 40*time.Second, func(recs []*kgo.Record) bool { return len(recs) == 1 })

	// A writer schema the app has not seen, registered while the registry
	// is up, then read by the running global thread while it is down.
	v2 := mustAvroSerde[reading](t, readingSchema, serde.WithRegistry(cl, global+"-value"))
	enc, err := v2.Encode(nil, reading{Device: "d", Seq: 2, At: time.UnixMilli(0).UTC(), Tags: []string{}, Unit: "C"})
	if err != nil {
		t.Fatal(err)
	}
	fake.SetDown(true)
	produce(t, global, 1, record{key: "b", value: string(enc), ts: time.Now().UnixMilli()})
	time.Sleep(3 * time.Second)
	fake.SetDown(false)
	// The stream record must find the global one: wait for the store.
	deadline := time.Now().Add(40 * time.Second)
	for {
		res, err := a.Get(context.Background(), "devices", []byte("b"))
		if err == nil && res.Found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("global record b not in the store after the outage (last error %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	produce(t, in, 1, record{key: "b", value: "y", ts: time.Now().UnixMilli()})
	got := readUntil(t, out, 40*time.Second, func(recs []*kgo.Record) bool { return len(recs) == 2 })
	for i, want := range []string{"a/x#1", "b/y#2"} {
		if v := string(got[i].Value); v != want {
			t.Errorf("output %d = %q, want %q", i, v, want)
		}
	}
	stop()
}
