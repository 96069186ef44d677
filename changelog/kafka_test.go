package changelog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/store"
)

// These tests run on a real Kafka broker (kafkatest.Brokers): the
// read_committed, LSO and transaction-marker behaviour they check is
// exactly what fakes get wrong.

// quietLog keeps restore progress out of test output; warnings stay.
var quietLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

type kafkaEnv struct {
	t       *testing.T
	brokers []string
	app     string
	spec    store.Spec
	topic   string
	txnID   string
	pace    PaceFunc // restores' RestoreOptions.Pace
	opts    Options  // the nodes' DB options; Logger defaults to quietLog
}

func newKafkaEnv(t *testing.T, spec store.Spec, partitions int32) *kafkaEnv {
	t.Helper()
	e := &kafkaEnv{t: t, brokers: kafkatest.Brokers(t), app: kafkatest.UniqueName(t, "app"), spec: spec}
	e.topic = TopicName(e.app, spec.Name)
	e.txnID = kafkatest.UniqueName(t, "txn")
	adm := kafkatest.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	if err := EnsureTopics(ctx, adm, TopicFor(e.app, spec, partitions)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, e.topic)
	})
	return e
}

func (e *kafkaEnv) restoreOpts() RestoreOptions {
	// A short wait for pending markers: a crashed node's open transaction
	// holds the LSO until the next producer fences it, and the tests crash
	// nodes often. Commit markers land within milliseconds.
	return RestoreOptions{ClientOpts: []kgo.Opt{kgo.SeedBrokers(e.brokers...)}, PendingTxnWait: 500 * time.Millisecond, Pace: e.pace}
}

// node is one process of the application: a DB, a transactional producer
// (the same transactional id across restarts, so a new one fences the
// old), and one task on partition 0.
type node struct {
	e    *kafkaEnv
	dir  string
	db   *DB
	prod *kgo.Client
	task *TaskState
	kv   store.KeyValue
	res  RestoreResult
}

func (e *kafkaEnv) start(dir string) *node {
	e.t.Helper()
	n := &node{e: e, dir: dir}
	var err error
	opts := e.opts
	if opts.Logger == nil {
		opts.Logger = quietLog
	}
	if n.db, err = OpenDB(dir, opts); err != nil {
		e.t.Fatal(err)
	}
	n.prod, err = kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.TransactionalID(e.txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		e.t.Fatal(err)
	}
	n.task = n.db.NewTaskState(TaskStateConfig{AppID: e.app, Partition: 0, Producer: n.prod})
	s, err := n.task.Open(e.spec, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	n.kv, _ = s.(store.KeyValue)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if n.res, err = n.task.Restore(ctx, e.restoreOpts()); err != nil {
		e.t.Fatalf("restore: %v", err)
	}
	e.t.Cleanup(n.stop)
	return n
}

func (n *node) stop() {
	if n.prod != nil {
		n.prod.Close()
		n.prod = nil
	}
	if n.db != nil {
		_ = n.task.Close()
		_ = n.db.Close()
		n.db = nil
	}
}

// txn runs one transaction over the overlay: begin, flush, end. It
// returns the offsets to apply.
func (n *node) txn(commit bool) ChangelogOffsets {
	n.e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	if err := n.prod.BeginTransaction(); err != nil {
		n.e.t.Fatal(err)
	}
	offs, err := n.task.Flush(ctx)
	if err != nil {
		n.e.t.Fatal(err)
	}
	if err := n.prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		n.e.t.Fatalf("end transaction (commit=%v): %v", commit, err)
	}
	return offs
}

func (n *node) commit() {
	n.e.t.Helper()
	if err := n.task.Apply(n.txn(true)); err != nil {
		n.e.t.Fatal(err)
	}
}

func (n *node) abort() {
	n.e.t.Helper()
	n.txn(false)
	n.task.Discard()
}

// crashAfterCommit commits the transaction and dies before Apply.
func (n *node) crashAfterCommit() {
	n.e.t.Helper()
	n.txn(true)
	n.stop()
}

// crashInTxn produces the overlay into a transaction and dies with the
// transaction open; the next producer with the same id aborts it.
func (n *node) crashInTxn() {
	n.e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	if err := n.prod.BeginTransaction(); err != nil {
		n.e.t.Fatal(err)
	}
	if _, err := n.task.Flush(ctx); err != nil {
		n.e.t.Fatal(err)
	}
	n.stop()
}

func TestKafkaRestoreSkipsAbortedTransactions(t *testing.T) {
	e := newKafkaEnv(t, store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	n := e.start(t.TempDir())
	mustPut(t, n.kv, "sku1", "10", "sku2", "20")
	n.commit()
	mustPut(t, n.kv, "sku1", "999", "sku3", "999", "sku2", "<del>")
	n.abort()
	mustPut(t, n.kv, "sku4", "40")
	n.commit()
	mustPut(t, n.kv, "sku4", "999", "sku5", "999")
	n.abort() // the log now ends with an abort marker
	want := map[string]string{"sku1": "10", "sku2": "20", "sku4": "40"}
	equalMaps(t, "live state", contents(t, n.kv), want)

	fresh := e.start(t.TempDir())
	equalMaps(t, "restored from the changelog", contents(t, fresh.kv), want)
	if fresh.res.Records != 3 {
		t.Fatalf("restore applied %d records, want the 3 committed ones", fresh.res.Records)
	}
}

func TestKafkaRestoreAfterCrashBetweenCommitAndApply(t *testing.T) {
	e := newKafkaEnv(t, store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	dir := t.TempDir()
	n := e.start(dir)
	mustPut(t, n.kv, "a", "1", "b", "1", "c", "1")
	n.commit()
	mustPut(t, n.kv, "a", "2", "b", "<del>")
	n.crashAfterCommit()

	n = e.start(dir)
	equalMaps(t, "after restart", contents(t, n.kv), map[string]string{"a": "2", "c": "1"})
	if len(n.res.Rebuilt) != 0 || n.res.Records != 2 {
		t.Fatalf("restore rebuilt %v and read %d records; want only the 2-record tail from the applied offset", n.res.Rebuilt, n.res.Records)
	}
	// The restored offsets are in Badger: the next restart reads nothing.
	n.stop()
	n = e.start(dir)
	if n.res.Records != 0 {
		t.Fatalf("second restart read %d records", n.res.Records)
	}
	equalMaps(t, "after second restart", contents(t, n.kv), map[string]string{"a": "2", "c": "1"})
}

func TestKafkaRestoreAfterCrashWithATransactionOpen(t *testing.T) {
	e := newKafkaEnv(t, store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	dir := t.TempDir()
	n := e.start(dir)
	mustPut(t, n.kv, "a", "1")
	n.commit()
	mustPut(t, n.kv, "a", "666", "z", "666")
	n.crashInTxn()

	// The open transaction holds the LSO: restore must stop there, not
	// wait for the high watermark.
	n = e.start(dir)
	equalMaps(t, "after restart", contents(t, n.kv), map[string]string{"a": "1"})
	mustPut(t, n.kv, "b", "2")
	n.commit() // fences the old producer; its transaction is aborted
	fresh := e.start(t.TempDir())
	equalMaps(t, "fresh restore", contents(t, fresh.kv), map[string]string{"a": "1", "b": "2"})
}

func TestKafkaRestoreEndsAtATrailingCommitMarker(t *testing.T) {
	e := newKafkaEnv(t, store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	n := e.start(t.TempDir())
	mustPut(t, n.kv, "a", "1", "b", "2")
	n.commit()
	// The commit marker is written after EndTransaction returns
	// (transaction version 2): restore must wait for it rather than stop
	// before the committed records.
	start := time.Now()
	fresh := e.start(t.TempDir()) // fails the test if restore does not finish within 60 s
	if got := fresh.res.Offsets[TopicPartition{e.topic, 0}]; got != 3 {
		t.Fatalf("restore stopped at %d, want 3: records at 0 and 1, the commit marker at 2", got)
	}
	adm := kadm.NewClient(n.prod)
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, e.topic)
	if err != nil {
		t.Fatal(err)
	}
	if hwm, _ := ends.Lookup(e.topic, 0); hwm.Offset != 3 {
		t.Fatalf("high watermark %d, want 3", hwm.Offset)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("restore of 2 records took %s: it waited on the marker", d)
	}
	equalMaps(t, "restored", contents(t, fresh.kv), map[string]string{"a": "1", "b": "2"})
}

func TestKafkaCorruptedLocalStateIsRebuilt(t *testing.T) {
	e := newKafkaEnv(t, store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	dir := t.TempDir() + "/state"
	n := e.start(dir)
	mustPut(t, n.kv, "a", "1", "b", "2")
	n.commit()
	mustPut(t, n.kv, "b", "<del>", "c", "3")
	n.commit()
	n.stop()
	corrupt(t, dir)

	n = e.start(dir)
	if len(n.res.Rebuilt) != 1 {
		t.Fatalf("restore of a corrupt dir rebuilt %v, want the store's partition", n.res.Rebuilt)
	}
	equalMaps(t, "rebuilt", contents(t, n.kv), map[string]string{"a": "1", "c": "3"})
}

func TestKafkaEnsureTopics(t *testing.T) {
	adm := kafkatest.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	app := kafkatest.UniqueName(t, "app")
	kv := store.Spec{Name: "counts", Kind: store.KindKeyValue, Logged: true,
		ChangelogConfig: map[string]string{"min.cleanable.dirty.ratio": "0.2"}}
	win := store.Spec{Name: "per-minute", Kind: store.KindWindow, Logged: true, WindowSize: 60_000, Retention: 3_600_000}
	topics := []Topic{TopicFor(app, kv, 3), TopicFor(app, win, 3)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, topics[0].Name, topics[1].Name)
	})
	if err := EnsureTopics(ctx, adm, topics...); err != nil {
		t.Fatal(err)
	}
	// Validation waits for the new topics to settle on the broker, so
	// their configs are visible once it passes.
	if err := EnsureTopics(ctx, adm, topics...); err != nil {
		t.Fatalf("EnsureTopics of matching existing topics: %v", err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, topics[0].Name, topics[1].Name)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		topics[0].Name: {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.2"},
		topics[1].Name: {"cleanup.policy": "compact,delete", "retention.ms": fmt.Sprint(3_600_000 + 60_000 + windowChangelogExtraRetention)},
	}
	for topic, kvs := range want {
		rc, err := configs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		for key, v := range kvs {
			var got string
			for _, c := range rc.Configs {
				if c.Key == key && c.Value != nil {
					got = *c.Value
				}
			}
			if got != v {
				t.Errorf("%s %s = %q, want %q", topic, key, got, v)
			}
		}
	}

	t.Run("partition count mismatch is a clear error", func(t *testing.T) {
		err := EnsureTopics(ctx, adm, TopicFor(app, kv, 4))
		var me *MismatchError
		if !errors.As(err, &me) || !errors.Is(err, ErrChangelogMismatch) {
			t.Fatalf("EnsureTopics with 4 partitions = %v, want a *MismatchError", err)
		}
		if me.Topic != topics[0].Name || me.Field != "partitions" || me.Expected != "4" || me.Actual != "3" {
			t.Fatalf("mismatch = %+v", me)
		}
	})
	t.Run("cleanup policy mismatch is a clear error", func(t *testing.T) {
		asKV := TopicFor(app, store.Spec{Name: win.Name, Kind: store.KindKeyValue}, 3)
		var me *MismatchError
		if err := EnsureTopics(ctx, adm, asKV); !errors.As(err, &me) || me.Field != "cleanup.policy" || me.Actual != "compact,delete" {
			t.Fatalf("EnsureTopics with another cleanup policy = %v", err)
		}
	})
}

func TestKafkaRestoreOfAMissingTopicSaysSo(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	db := openTestDB(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	_, err := db.Restore(ctx, []RestoreTarget{{Store: "nope", Partition: 0, Topic: kafkatest.UniqueName(t, "missing")}},
		RestoreOptions{ClientOpts: []kgo.Opt{kgo.SeedBrokers(brokers...)}})
	if !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("restore from a missing topic = %v, want ErrTopicNotFound", err)
	}
}
