package processor_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestAtLeastOnceRestartRetriesAnInputWhoseOutputFailed makes the count's
// output of one key impossible to produce (its key is larger than the
// sink topic accepts) while its changelog record, position record
// included, goes through: at-least-once has no transaction to take them
// back when the commit aborts. After a restart, with the sink fixed, the
// input must be processed again and its output written: the position the
// changelog carries is no proof that the outputs were written, so
// at-least-once must not skip inputs below it.
func TestAtLeastOnceRestartRetriesAnInputWhoseOutputFailed(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, map[string]string{"max.message.bytes": "1024"})
	// Incompressible, so that the batch exceeds the limit after compression.
	raw := make([]byte, 4096)
	_, _ = rand.Read(raw)
	big := string(raw)
	topo := countTopology(t, kafkatest.UniqueName(t, "alos-restart"), in, out)
	var recs []*kgo.Record
	for _, k := range []string{"a", "b", big} {
		recs = append(recs, &kgo.Record{Topic: in, Partition: 0, Key: []byte(k), Value: []byte("v")})
	}
	kafkatest.Produce(t, recs...)

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	app, err := processor.NewApp(topo, processor.WithBrokers(kafkatest.Brokers(t)...), processor.WithStateDir(dir),
		processor.WithGuarantee(processor.AtLeastOnce))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	// The app flushes the changelog, fails to produce big's output and
	// aborts; after ProductionRetries isolated redos the default handler
	// fails Run (its error is not what this test is about).
	changelog := topo.Application() + "-counts-changelog"
	adm := kadm.NewClient(kafkatest.Client(t))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ends, err := adm.ListEndOffsets(context.Background(), changelog)
		if err == nil {
			if o, ok := ends.Lookup(changelog, 0); ok && o.Err == nil && o.Offset > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no changelog record written to %s within 20s", changelog)
		}
	}
	time.Sleep(time.Second)
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("app did not stop within 30s")
	}

	// The sink accepts the output now; a restart on the same state
	// directory must write it.
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	rs, err := adm.AlterTopicConfigs(cctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("1048576")}}, out)
	if err == nil {
		_, err = rs.On(out, nil)
	}
	if err != nil {
		t.Fatalf("raise max.message.bytes of %s: %v", out, err)
	}
	startApp(t, topo, processor.WithStateDir(dir), processor.WithGuarantee(processor.AtLeastOnce))
	kafkatest.ConsumeUntil(t, out, 20*time.Second, func(rs []*kgo.Record) bool {
		seen := map[string]bool{}
		for _, r := range rs {
			if binary.BigEndian.Uint64(r.Value) >= 1 {
				seen[string(r.Key)] = true
			}
		}
		return seen["a"] && seen["b"] && seen[big]
	})
}
