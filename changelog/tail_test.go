package changelog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/store"
)

// tailNode is a standby's side: its own DB and a Tail running on a task
// of it, with what the tail reported.
type tailNode struct {
	db   *DB
	task *TaskState
	kv   store.KeyValue

	cancel context.CancelFunc
	done   chan error

	mu    sync.Mutex
	last  TailProgress
	calls int
	// clients is DBStats.KafkaClients at the tail's first report: the
	// starting restore's and the tail's own.
	clients int64
}

func (e *kafkaEnv) startTail(dir string) *tailNode {
	e.t.Helper()
	tn := &tailNode{done: make(chan error, 1), clients: -1}
	var err error
	if tn.db, err = OpenDB(dir, Options{Logger: quietLog}); err != nil {
		e.t.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...)) // opening a logged store needs one; a tail never produces
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(prod.Close)
	tn.task = tn.db.NewTaskState(TaskStateConfig{AppID: e.app, Partition: 0, Producer: prod})
	s, err := tn.task.Open(e.spec, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	tn.kv = s.(store.KeyValue)
	ctx, cancel := context.WithCancel(context.Background())
	tn.cancel = cancel
	opts := TailOptions{RestoreOptions: e.restoreOpts(), LagInterval: 200 * time.Millisecond,
		OnTail: func(p TailProgress) {
			tn.mu.Lock()
			defer tn.mu.Unlock()
			if tn.calls == 0 {
				tn.clients = tn.db.Stats().KafkaClients
			}
			tn.calls++
			tn.last = p
		}}
	opts.Logger = quietLog
	go func() { tn.done <- tn.task.Tail(ctx, opts) }()
	return tn
}

// stop ends the tail and returns its error.
func (tn *tailNode) stop() error {
	tn.cancel()
	return <-tn.done
}

func (tn *tailNode) progress() (TailProgress, int64) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.last, tn.clients
}

// TestKafkaTailFollowsCommitsWithOneClient runs a writer that commits and
// aborts random transactions of puts and deletes over 40 keys (seed
// logged), with a standby tailing its changelog from a DB of its own,
// started after the first commits. The tail must keep up (lag 0 within
// seconds of the last commit) without creating a Kafka client after its
// start, hold exactly the committed state of the reference model (aborted
// writes never applied), and leave positions behind that a later restore
// trusts: it reads nothing.
func TestKafkaTailFollowsCommitsWithOneClient(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	e := newKafkaEnv(t, store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	w := e.start(t.TempDir())
	model := map[string]string{}
	txn := func(i int) {
		pending := map[string]string{}
		for range 1 + rng.IntN(8) {
			k := fmt.Sprintf("sku%02d", rng.IntN(40))
			v := fmt.Sprintf("v%d", i)
			if rng.IntN(4) == 0 {
				v = "<del>"
			}
			mustPut(t, w.kv, k, v)
			pending[k] = v
		}
		if rng.IntN(4) == 0 {
			w.abort()
			return
		}
		w.commit()
		for k, v := range pending {
			if v == "<del>" {
				delete(model, k)
			} else {
				model[k] = v
			}
		}
	}
	for i := range 20 {
		txn(i)
	}
	sb := e.startTail(t.TempDir())
	// Steady input while it tails: a transaction every 20 ms.
	for i := 20; i < 150; i++ {
		txn(i)
		time.Sleep(20 * time.Millisecond)
	}
	// Caught up: lag 0 in a report measured after the last commit (the
	// tail measures every LagInterval).
	sb.mu.Lock()
	callsAtEnd := sb.calls
	sb.mu.Unlock()
	deadline := time.Now().Add(15 * time.Second)
	for {
		sb.mu.Lock()
		p, calls := sb.last, sb.calls
		sb.mu.Unlock()
		if p.Lag == 0 && calls > callsAtEnd+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tail did not catch up within 15 s of the last commit: %+v", p)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p, clients := sb.progress()
	if err := sb.stop(); err != nil {
		t.Fatalf("tail: %v", err)
	}
	if got := sb.db.Stats().KafkaClients; got != clients || clients < 2 || clients > 3 {
		t.Fatalf("Kafka clients: %d when tailing began (want 2 or 3: the restore's and the tail's), %d at the end: the tail must not create clients", clients, got)
	}
	t.Logf("tail: restored %d, applied %d records, lag %d, offsets %v, %d Kafka clients", p.Restored, p.Applied, p.Lag, p.Offsets, clients)
	if p.Applied == 0 {
		t.Fatalf("the tail applied nothing: %+v", p)
	}
	equalMaps(t, "standby state after the tail", contents(t, sb.kv), model)

	// Its recorded positions are where a restore starts: nothing to read.
	res, err := sb.task.Restore(context.Background(), e.restoreOpts())
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 0 || len(res.Rebuilt) != 0 {
		t.Fatalf("restore after the tail read %d records and rebuilt %v; want nothing", res.Records, res.Rebuilt)
	}
	equalMaps(t, "standby state after a restore", contents(t, sb.kv), model)
	_ = sb.task.Close()
	_ = sb.db.Close()
}
