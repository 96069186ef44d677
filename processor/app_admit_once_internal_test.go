package processor

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store/memstore"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// A tenant's Rate counts its records once, where they enter the App. A
// record read back from a repartition topic (it carries its tenant in the
// tidemark.tenant header) was charged to the tenant's bucket a second
// time, by the downstream sub-topology's task: an App with one GroupBy
// admitted half the tenant's Rate of its input, one with two repartitions
// a third, and the downstream partition (a hot tenant's dedicated one,
// with placement) was held too. Here the tenant's records wait on the
// repartition topic, already admitted at the input: none of them is held.
func TestAdmissionChargesARecordOnceAcrossARepartition(t *testing.T) {
	t.Parallel()
	b := topology.NewBuilder("app")
	b.Stream("in", serde.String(), serde.String(), topology.WithTenant(func(k, _ string) string { return k })).
		Repartition(topology.Named("rp"), topology.WithPartitions(1)).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rp := "app-rp-repartition"
	if !topo.IsRepartitionTopic(rp) {
		t.Fatalf("repartition topics %v, want %s", topo.RepartitionTopics(), rp)
	}
	ctrl, err := frontier.NewController(frontier.Options{Tenants: map[string]frontier.TenantOptions{"hot": {Rate: 10, Burst: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	app := &App{topo: topo, metrics: newAppMetrics("app"), log: slog.New(slog.DiscardHandler)}
	app.thm = newThreadMetrics(app.metrics.reg, "app")
	th := &appThread{app: app}
	app.threads = []*appThread{th}
	s := &session{app: app, th: th, fair: newFairQueues(500, 1000),
		tasks: map[topology.TaskID]*liveTask{}, byInput: map[changelog.TopicPartition]*liveTask{},
		ctrl: ctrl, admission: rateLimited(ctrl.Options()), now: func() time.Time { return now }}
	s.txn = &txnState{}
	s.txn.reset()
	out := map[topology.TaskID]int{}
	for sub := range 2 {
		tk, err := task.New(task.Params{Topology: topo, SubTopology: sub, Partition: 0, Stores: memstore.NewProvider(),
			PartitionCount: func(string) (int32, error) { return 1, nil },
			Output: task.CollectorFunc(func(id topology.TaskID, rec *topology.OutputRecord) error {
				if rec.Tenant != "hot" {
					return fmt.Errorf("output of %v has tenant %q, want hot", id, rec.Tenant)
				}
				out[id]++
				return nil
			})})
		if err != nil {
			t.Fatal(err)
		}
		s.tasks[tk.ID()] = &liveTask{task: tk}
	}
	s.index()
	// 30 of the tenant's records on the repartition topic, as the
	// upstream task wrote them (and was charged for them).
	var recs []*kgo.Record
	for o := range 30 {
		recs = append(recs, &kgo.Record{Topic: rp, Partition: 0, Offset: int64(o), Key: []byte("hot"), Value: []byte("v"),
			Timestamp: time.UnixMilli(int64(o)), Headers: []kgo.RecordHeader{{Key: topology.TenantHeader, Value: []byte("hot")}}})
	}
	down := topology.TaskID{SubTopology: 1, Partition: 0}
	s.fair.enqueue(down, changelog.TopicPartition{Topic: rp, Partition: 0}, recs, 0, now)
	s.releaseHolds(now)
	if _, err := s.processPass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out[down] != 30 {
		t.Fatalf("the repartition topic's task processed %d of the tenant's 30 admitted records, want all 30 (held: %v)",
			out[down], s.fair.parts[changelog.TopicPartition{Topic: rp, Partition: 0}].hold.held())
	}
	// The input is still charged: the burst (2) plus one on credit.
	var in []*kgo.Record
	for o := range 30 {
		in = append(in, &kgo.Record{Topic: "in", Partition: 0, Offset: int64(o), Key: []byte("hot"), Value: []byte("v"), Timestamp: time.UnixMilli(int64(o))})
	}
	up := topology.TaskID{SubTopology: 0, Partition: 0}
	s.fair.enqueue(up, changelog.TopicPartition{Topic: "in", Partition: 0}, in, 0, now)
	if _, err := s.processPass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out[up] != 3 {
		t.Fatalf("the input's task processed %d of the tenant's records at once, want 3 (burst 2 + 1 on credit)", out[up])
	}
}
