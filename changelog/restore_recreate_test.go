package changelog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/store"
)

// blockingListener blocks the restore in its first OnBatchRestored until
// release is closed.
type blockingListener struct {
	once    sync.Once
	blocked chan struct{}
	release chan struct{}
}

func (l *blockingListener) OnRestoreStart(TopicPartition, string, int64, int64) {}
func (l *blockingListener) OnRestoreEnd(TopicPartition, string, int64)          {}
func (l *blockingListener) OnBatchRestored(TopicPartition, string, int64, int64) {
	l.once.Do(func() {
		close(l.blocked)
		<-l.release
	})
}

// TestKafkaRestoreFailsWhenTheChangelogIsRecreatedMidway: a restore is
// part-way through its changelog when the topic is deleted and created
// again with other records. Its client never adopts the new topic (its
// fetches fail with UNKNOWN_TOPIC_ID, which is retriable), so the restore
// must notice and fail with ErrChangelogRecreated rather than retry until
// its context ends; the next restore then rebuilds from the new topic.
func TestKafkaRestoreFailsWhenTheChangelogIsRecreatedMidway(t *testing.T) {
	e := newKafkaEnv(t, store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	// Many small fetches: a paced restore fetches 256 KiB at a time.
	e.pace = func(context.Context, time.Duration) error { return nil }
	w := e.start(t.TempDir())
	// Incompressible values: 8 MB of changelog, far more than the
	// client fetches while the restore is blocked.
	rng := rand.New(rand.NewPCG(1, 2))
	for c := range 8 {
		for i := range 1000 {
			v := make([]byte, 1000)
			for j := range v {
				v[j] = byte('a' + rng.IntN(26))
			}
			mustPut(t, w.kv, fmt.Sprintf("old%d-%04d", c, i), string(v))
		}
		w.commit()
	}
	w.stop()

	db, err := OpenDB(t.TempDir(), Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	task := db.NewTaskState(TaskStateConfig{AppID: e.app, Partition: 0, Producer: w.prod})
	defer task.Close()
	s, err := task.Open(e.spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	l := &blockingListener{blocked: make(chan struct{}), release: make(chan struct{})}
	opts := e.restoreOpts()
	opts.Listener = l
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := task.Restore(ctx, opts)
		done <- err
	}()
	select {
	case <-l.blocked:
	case err := <-done:
		t.Fatalf("the restore ended before its first batch: %v", err)
	}

	adm := kafkatest.Admin(t)
	actx, acancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer acancel()
	if _, err := adm.DeleteTopics(actx, e.topic); err != nil {
		t.Fatal(err)
	}
	for {
		if err := EnsureTopics(actx, adm, TopicFor(e.app, e.spec, 1)); err == nil {
			break
		} else if actx.Err() != nil {
			t.Fatalf("recreate %s: %v", e.topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.txnID = kafkatest.UniqueName(t, "second")
	other := e.start(t.TempDir())
	mustPut(t, other.kv, "new", "2")
	other.commit()
	other.stop()
	close(l.release)

	select {
	case err := <-done:
		if !errors.Is(err, ErrChangelogRecreated) {
			t.Fatalf("restore ended with %v, want ErrChangelogRecreated", err)
		}
		t.Logf("restore ended: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		err := <-done
		t.Fatalf("30 s after its changelog was recreated the restore still ran (cancelled: %v)", err)
	}

	ctx2, cancel2 := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel2()
	res, err := task.Restore(ctx2, e.restoreOpts())
	if err != nil {
		t.Fatalf("restore after the recreation: %v", err)
	}
	if len(res.Rebuilt) != 1 {
		t.Fatalf("restore after the recreation rebuilt %v, want the changelog's partition", res.Rebuilt)
	}
	equalMaps(t, "after the changelog was recreated", contents(t, s.(store.KeyValue)), map[string]string{"new": "2"})
}
