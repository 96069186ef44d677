package processor_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/serde/srtest"
	"github.com/tidemark-streams/tidemark/topology"
)

type regOrder struct {
	ID  string `avro:"id"`
	Qty int64  `avro:"qty"`
}

const regOrderSchema = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"qty","type":"long"}]}`

// A schema registry that is down (a redeploy, say) when the app meets a
// schema id it has not cached holds the records back, with the
// transaction redone after a growing pause, until the registry answers:
// no record is skipped or dead-lettered, and the app does not stop.
func TestRegistryOutageIsWaitedOut(t *testing.T) {
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	reg := srtest.NewRegistry(t)
	writer, err := serde.Avro[regOrder](regOrderSchema, serde.WithRegistry(reg.Client(t), in+"-value"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	var recs []*kgo.Record
	for i := range n {
		v, err := writer.Encode(nil, regOrder{ID: fmt.Sprint(i), Qty: int64(i)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: in, Partition: int32(i % 2), Key: fmt.Appendf(nil, "k%d", i), Value: v})
	}
	kafkatest.Produce(t, recs...)

	// The app's serde has not seen the schema id: its first decode asks
	// the registry, which is down.
	reader, err := serde.Avro[regOrder](regOrderSchema, serde.WithRegistry(reg.Client(t), in+"-value"))
	if err != nil {
		t.Fatal(err)
	}
	reg.SetDown(true)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	b.Stream(in, serde.String(), reader).MapValues(func(_ string, o regOrder) int64 { return o.Qty * 10 }).WithSerdes(serde.String(), quantity).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, done := startApp(t, topo)
	kafkatest.ConsumeExactly(t, out, 0, 3*time.Second, 3*time.Second)
	select {
	case err := <-done:
		t.Fatalf("Run stopped while the registry was down: %v", err)
	default:
	}
	reg.SetDown(false)
	got := map[string]int64{}
	for _, r := range kafkatest.ConsumeExactly(t, out, n, 30*time.Second, 2*time.Second) {
		got[string(r.Key)] = int64(binary.BigEndian.Uint64(r.Value))
	}
	for i := range n {
		if k := fmt.Sprintf("k%d", i); got[k] != int64(i*10) {
			t.Fatalf("output %s = %d, want %d: every record once, after the registry came back (got %v)", k, got[k], i*10, got)
		}
	}
}
