package processor_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// initReader counts records in its store, and reads the total in Init: the
// first record after Init is forwarded with what Init saw.
type initReader struct {
	ctx    topology.ProcessorContext[string, int64]
	st     store.KeyValue
	atInit int64
	told   bool
}

func (p *initReader) Init(ctx topology.ProcessorContext[string, int64]) error {
	p.ctx = ctx
	s, err := ctx.Store("totals")
	if err != nil {
		return err
	}
	p.st = s.(store.KeyValue)
	v, found, err := p.st.Get([]byte("all"))
	if found {
		p.atInit = int64(binary.BigEndian.Uint64(v))
	}
	return err
}

func (p *initReader) Process(r topology.Record[string, string]) error {
	v, found, err := p.st.Get([]byte("all"))
	if err != nil {
		return err
	}
	var n int64
	if found {
		n = int64(binary.BigEndian.Uint64(v))
	}
	if err := p.st.Put([]byte("all"), binary.BigEndian.AppendUint64(nil, uint64(n+1))); err != nil {
		return err
	}
	if p.told {
		return nil
	}
	p.told = true
	return p.ctx.Forward(topology.Record[string, int64]{Key: "init", Value: p.atInit, Timestamp: r.Timestamp})
}

func (p *initReader) Close() error { return nil }

// TestInitReadsRestoredState: a processor that reads its store in Init
// must see the state restored from the changelog, as in the test driver,
// not an empty store the restore fills afterwards.
func TestInitReadsRestoredState(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "init"))
	b.AddStore(store.Spec{Name: "totals", Kind: store.KindKeyValue, Logged: true})
	b.Stream(in, serde.String(), serde.String()).
		Process(func() topology.Processor[string, string, string, int64] { return &initReader{} }, topology.WithStores("totals")).
		WithSerdes(serde.String(), serde.Int64()).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rec := func() *kgo.Record { return &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte("v")} }
	kafkatest.Produce(t, rec(), rec(), rec())
	_, stop := runApp(t, topo)
	kafkatest.ConsumeExactly(t, out, 1, kafkatest.Timeout, time.Second)
	stop()
	// A new instance with no local state restores "all"=3 from the changelog.
	kafkatest.Produce(t, rec())
	runApp(t, topo)
	got := kafkatest.ConsumeExactly(t, out, 2, kafkatest.Timeout, time.Second)
	if v, _ := serde.Int64().Decode(got[1].Value); v != 3 {
		t.Fatalf("Init of the restarted task read %d, want the restored 3", v)
	}
}
