package changelog

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/store"
)

// TestKafkaRestoreNeverEndsBelowTheCommittedPosition: producer "dead"
// leaves a transaction open on the changelog (as a member SIGKILLed
// mid-commit does), which pins the last stable offset; producer "next"
// commits more changes after it. A restore told that the committed
// position is past next's changes (RestoreTarget.MinOffset, from the
// committed input offsets) must not settle for the pinned last stable
// offset: it waits, calls Unblock, and ends with next's changes. Without
// anything to unblock it, it fails when its context ends rather than
// return stale state.
func TestKafkaRestoreNeverEndsBelowTheCommittedPosition(t *testing.T) {
	e := newKafkaEnv(t, store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	first := e.start(t.TempDir())
	mustPut(t, first.kv, "a", "1")
	first.commit()
	mustPut(t, first.kv, "a", "666", "z", "666")
	first.crashInTxn() // txn id e.txnID stays open: its timeout is 30 s
	deadID := e.txnID

	e.txnID = kafkatest.UniqueName(t, "next") // another member takes over
	next := e.start(t.TempDir())
	equalMaps(t, "next member", contents(t, next.kv), map[string]string{"a": "1"})
	mustPut(t, next.kv, "b", "2")
	offs := next.txn(true)
	if err := next.task.Apply(offs); err != nil {
		t.Fatal(err)
	}
	committed := offs[TopicPartition{e.topic, 0}]

	restore := func(ctx context.Context, unblock func(context.Context) error) (*TaskState, store.KeyValue, error) {
		db, err := OpenDB(t.TempDir(), Options{Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		task := db.NewTaskState(TaskStateConfig{AppID: e.app, Partition: 0, Producer: next.prod})
		s, err := task.Open(e.spec, 0)
		if err != nil {
			t.Fatal(err)
		}
		opts := e.restoreOpts()
		opts.MinOffsets = ChangelogOffsets{TopicPartition{e.topic, 0}: committed}
		opts.Unblock = unblock
		_, err = task.Restore(ctx, opts)
		return task, s.(store.KeyValue), err
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, kv, err := restore(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("restore with the committed position pinned returned err=%v and state %v; want it to wait until its context ends", err, contents(t, kv))
	}

	calls := 0
	fence := func(ctx context.Context) error {
		calls++
		// What the runtime's fencer does: initialise the dead member's
		// transactional id, which aborts its open transaction.
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.TransactionalID(deadID))
		if err != nil {
			return err
		}
		defer cl.Close()
		_, _, err = cl.ProducerID(ctx)
		return err
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	_, kv, err := restore(ctx2, fence)
	if err != nil {
		t.Fatalf("restore with an unblocker: %v", err)
	}
	if calls == 0 {
		t.Fatal("restore never called Unblock")
	}
	equalMaps(t, "restored past the open transaction", contents(t, kv), map[string]string{"a": "1", "b": "2"})
}

// TestKafkaRestoreRebuildsWhenTheChangelogWasRecreated: local state written
// against one incarnation of the changelog topic means nothing once the
// topic is deleted and recreated (an application reset), even when the new
// topic already holds as many offsets: the restore must rebuild.
func TestKafkaRestoreRebuildsWhenTheChangelogWasRecreated(t *testing.T) {
	e := newKafkaEnv(t, store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	dir := t.TempDir()
	n := e.start(dir)
	mustPut(t, n.kv, "old", "1")
	n.commit()
	n.stop()

	adm := kafkatest.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	if _, err := adm.DeleteTopics(ctx, e.topic); err != nil {
		t.Fatal(err)
	}
	for {
		if err := EnsureTopics(ctx, adm, TopicFor(e.app, e.spec, 1)); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("recreate %s: %v", e.topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The new incarnation gets as many records as the old one had, so the
	// offsets alone cannot tell the difference.
	e.txnID = kafkatest.UniqueName(t, "second")
	other := e.start(t.TempDir())
	mustPut(t, other.kv, "new", "2")
	other.commit()
	other.stop()

	var log logBuffer
	e.opts.Logger = log.logger()
	n = e.start(dir)
	if len(n.res.Rebuilt) != 1 {
		t.Fatalf("restore on the old local state rebuilt %v, want the recreated changelog's partition", n.res.Rebuilt)
	}
	equalMaps(t, "after the topic was recreated", contents(t, n.kv), map[string]string{"new": "2"})
	// Local state thrown away is a warning that names what was wiped, not
	// an Info line like a first start's rebuild.
	var warned bool
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "wiping the store partition") &&
			strings.Contains(line, "store=stock") && strings.Contains(line, "partition=0") &&
			strings.Contains(line, "applied_offset=") && strings.Contains(line, "id changed") {
			warned = true
		}
	}
	if !warned {
		t.Fatalf("no warning names the wiped store partition and its offsets; log:\n%s", log.String())
	}
}
