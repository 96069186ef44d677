package processor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store/memstore"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestTaskInputsProcessInTimestampOrderAcrossPartitions: records a poll
// returns for a multi-input task reach it in timestamp order across its
// input partitions, each partition's own order kept.
func TestTaskInputsProcessInTimestampOrderAcrossPartitions(t *testing.T) {
	t.Parallel()
	b := topology.NewBuilder("app")
	b.Stream("carts", serde.String(), serde.String()).
		Merge(b.Stream("payments", serde.String(), serde.String())).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	tk, err := task.New(task.Params{Topology: topo, SubTopology: 0, Partition: 0, Stores: memstore.NewProvider(),
		Output: task.CollectorFunc(func(_ topology.TaskID, r *topology.OutputRecord) error {
			got = append(got, fmt.Sprintf("%s@%d", r.Value, r.Timestamp))
			return nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(topic, v string, ts int64) *kgo.Record {
		return &kgo.Record{Topic: topic, Value: []byte(v), Timestamp: time.UnixMilli(ts)}
	}
	s := &session{app: &App{metrics: newAppMetrics("app")}, fair: newFairQueues(UnlimitedRecordsPerTaskPass, 1), now: time.Now,
		tasks: map[topology.TaskID]*liveTask{tk.ID(): {task: tk}}}
	s.txn = &txnState{}
	s.txn.reset()
	s.fair.enqueue(tk.ID(), changelog.TopicPartition{Topic: "carts"},
		[]*kgo.Record{rec("carts", "c1", 10), rec("carts", "c2", 30), rec("carts", "c3", 20)}, 0, time.Time{})
	s.fair.enqueue(tk.ID(), changelog.TopicPartition{Topic: "payments"},
		[]*kgo.Record{rec("payments", "p1", 15), rec("payments", "p2", 25)}, 0, time.Time{})
	if _, err = s.processPass(context.Background()); err != nil {
		t.Fatal(err)
	}
	// c3 (20) stays behind c2 (30): a partition's order is never changed.
	want := "[c1@10 p1@15 p2@25 c2@30 c3@20]"
	if fmt.Sprint(got) != want {
		t.Fatalf("processing order %v, want %s", got, want)
	}
}
