package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
)

// Parity stops a system only once its group has committed the end of its
// repartition topics too: stopped when the input was committed, tidemark
// left the table aggregation's last updates in its repartition topic (67
// of 109 categories differed at seed 42).
func TestParityDrainWaitsForRepartitionTopics(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	app := fmt.Sprintf("parity-drain-%d", time.Now().UnixNano())
	rep, other := app+"-by-category-repartition", app+"-rows-changelog"
	if _, err := adm.CreateTopics(ctx, 2, 1, nil, rep, other); err != nil {
		t.Fatal(err)
	}
	defer adm.DeleteTopics(context.Background(), rep, other) //nolint:errcheck // best effort
	for i := range 10 {
		for _, topic := range []string{rep, other} {
			r := &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: []byte("k"), Value: []byte("v")}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit := func(at int64) {
		t.Helper()
		var offs kadm.Offsets
		for p := range int32(2) {
			offs.Add(kadm.Offset{Topic: rep, Partition: p, At: at, LeaderEpoch: -1})
		}
		if err := adm.CommitAllOffsets(ctx, app, offs); err != nil {
			t.Fatal(err)
		}
	}
	h := &harness{cl: cl, adm: adm}
	commit(3)
	if err := h.drainRepartitions(ctx, app, 2*time.Second); err == nil || !strings.Contains(err.Error(), rep) {
		t.Fatalf("3 of 5 records committed per partition: drain = %v, want it to time out on %s", err, rep)
	}
	commit(5) // the changelog is not the group's to consume: not waited for
	if err := h.drainRepartitions(ctx, app, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}
