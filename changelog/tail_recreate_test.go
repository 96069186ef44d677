package changelog

import (
	"context"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/store"
)

// TestKafkaTailRebuildsWhenTheChangelogIsRecreated: a standby's tail is
// running when its changelog topic is deleted and recreated, and the new
// incarnation gets other records (more of them than the old one had, so
// the position alone cannot tell). The tail must not keep the old
// incarnation's state and report itself caught up: it must end up with
// exactly the new topic's state.
func TestKafkaTailRebuildsWhenTheChangelogIsRecreated(t *testing.T) {
	e := newKafkaEnv(t, store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	w := e.start(t.TempDir())
	mustPut(t, w.kv, "old", "1")
	w.commit()
	w.stop()

	dir := t.TempDir()
	sb := e.startTail(dir)
	deadline := time.Now().Add(30 * time.Second)
	for p, _ := sb.progress(); p.Lag != 0 || p.Offsets == nil; p, _ = sb.progress() {
		if time.Now().After(deadline) {
			t.Fatalf("the tail did not catch up with the first incarnation within 30 s: %+v", p)
		}
		time.Sleep(50 * time.Millisecond)
	}

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
	e.txnID = kafkatest.UniqueName(t, "second")
	other := e.start(t.TempDir())
	for _, k := range []string{"new1", "new2", "new3"} {
		mustPut(t, other.kv, k, "2")
		other.commit()
	}
	other.stop()

	// The tail's position is gone with the old incarnation: as the
	// tail's contract says, that is an error Tail returns, and the next
	// Tail rebuilds through the restore path.
	select {
	case err := <-sb.done:
		if err == nil {
			t.Fatal("the tail ended without an error")
		}
		t.Logf("tail ended: %v", err)
	case <-time.After(30 * time.Second):
		p, _ := sb.progress()
		sb.cancel()
		<-sb.done
		t.Fatalf("30 s after its changelog was recreated the tail still runs on the old incarnation's state (progress %+v)", p)
	}
	_ = sb.task.Close()
	_ = sb.db.Close()

	sb = e.startTail(dir)
	deadline = time.Now().Add(30 * time.Second)
	for p, _ := sb.progress(); p.Lag != 0 || p.Offsets == nil; p, _ = sb.progress() {
		if time.Now().After(deadline) {
			t.Fatalf("the new tail did not catch up within 30 s: %+v", p)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := sb.stop(); err != nil {
		t.Fatalf("tail: %v", err)
	}
	equalMaps(t, "standby state after the changelog was recreated", contents(t, sb.kv),
		map[string]string{"new1": "2", "new2": "2", "new3": "2"})
	_ = sb.task.Close()
	_ = sb.db.Close()
}
