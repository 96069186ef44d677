package main

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
)

// TestReplayRegistersPartitionsThatHoldOnlyPositions: every commit writes
// an input-position record into each logged store's changelog partition,
// so a partition of a store that was never written holds position records
// and nothing else. replay restored them, but left the partition
// unregistered (its records carry no kind): its output counted it among
// the store partitions it replayed while tidemark state list left it out
// and state get said the partition did not exist. It now takes the kind
// another partition of the store shows; a store no partition of which
// holds data is named as not registered.
func TestReplayRegistersPartitionsThatHoldOnlyPositions(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	app := kafkatest.UniqueName(t, "app")
	inv := store.Spec{Name: "inventory", Kind: store.KindKeyValue, Logged: true}
	idle := store.Spec{Name: "idle", Kind: store.KindWindow, Logged: true, WindowSize: 60_000, Retention: 3_600_000}
	adm := kafkatest.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	if err := changelog.EnsureTopics(ctx, adm, changelog.TopicFor(app, inv, 2), changelog.TopicFor(app, idle, 1)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = adm.DeleteTopics(context.Background(), changelog.TopicName(app, inv.Name), changelog.TopicName(app, idle.Name))
	})
	prod := kafkatest.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	db, err := changelog.OpenDB(t.TempDir(), changelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for p := int32(0); p < 2; p++ {
		task := db.NewTaskState(changelog.TaskStateConfig{AppID: app, Partition: p, Producer: prod})
		s, err := task.Open(inv, p)
		if err != nil {
			t.Fatal(err)
		}
		if p == 0 { // partition 1 of inventory, and idle, get positions only
			if err := store.NewTypedKeyValue(s.(store.KeyValue), serde.String(), serde.Int64()).Put("sku-a", 7); err != nil {
				t.Fatal(err)
			}
			if _, err := task.Open(idle, 0); err != nil {
				t.Fatal(err)
			}
		}
		task.StagePosition(changelog.InputPosition{"orders": {p: 5}})
		offs, err := task.Flush(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := task.Apply(offs); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	out, err := runSub(t, newReplayCmd(), "--brokers", brokers, "--application", app, "--dir", dir, "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	replayed := out
	out, err = runSub(t, newStateCmd(), "list", "--dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "inventory\tpartition 1\tkey-value") || !strings.Contains(out, "inventory\tpartition 0\tkey-value") {
		t.Fatalf("state list after replay = %q, want both partitions of inventory", out)
	}
	if !strings.Contains(replayed, "3 store partitions") ||
		!strings.Contains(replayed, "not registered (their changelogs hold input positions but no data, so their kind is unknown): idle partition 0") {
		t.Fatalf("replay output %q, want it to name idle partition 0 as not registered", replayed)
	}
	out, err = runSub(t, newStateCmd(), "get", "--dir", dir, "--store", "inventory", "--partition", "1", "--key-serde", "string", "sku-a")
	if err == nil || strings.Contains(err.Error(), "stores present") {
		t.Fatalf("state get of a key not in partition 1 = %q, %v; want not found, not a missing store partition", out, err)
	}
}
