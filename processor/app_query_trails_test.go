package processor_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/txn"
)

// TestQueryTrailsVisibleOutputsUntilApplied: a transaction's outputs are
// visible to read_committed consumers once EndTxn commits it, and the
// local state takes it only after that (Apply). Held between the two, a
// query answers the state before the transaction, at the position that
// state reflects (not found here, below the input's end), never a
// position it does not have; bounded by the input's end it answers
// ErrNotFresh, or waits for the Apply and answers the new count. A test
// that queries right after reading the outputs must bound its query
// (integration/dsl TestTTLAcrossRestart once saw found=false there).
func TestQueryTrailsVisibleOutputsUntilApplied(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	appID := kafkatest.UniqueName(t, "iq-trails")
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	var armed atomic.Bool // from the first record on: startup commits pass
	// Only the commit that made the output visible is held: a commit in
	// flight when the test arms the hook (or one with nothing in it) must
	// pass, or the record's own commit never comes.
	adm := kadm.NewClient(kafkatest.Client(t))
	outputVisible := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err := adm.ListCommittedOffsets(ctx, out)
		if err != nil {
			return false
		}
		o, ok := ends.Lookup(out, 0)
		return ok && o.Err == nil && o.Offset > 0
	}
	hold := processor.WithFaultHook(func(pt txn.Point) {
		if pt != txn.AfterCommit || !armed.Load() || !outputVisible() {
			return
		}
		select {
		case <-gate:
		case <-time.After(time.Minute):
		}
	})
	app, _ := startApp(t, countTopology(t, appID, in, out), hold, processor.WithHTTP("127.0.0.1:0"))
	t.Cleanup(release) // before the app stops: its last commit waits for the gate
	waitReady(t, app)
	key := []byte("sku-1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	armed.Store(true)
	kafkatest.Produce(t, &kgo.Record{Topic: in, Key: key, Value: []byte("x")})
	kafkatest.ConsumeUntil(t, out, 30*time.Second, func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	bound := processor.Position{in: kafkatest.StableEnds(t, in)}

	res, err := app.Get(ctx, "counts", key)
	if err != nil || res.Found || res.Position.Covers(bound) {
		t.Fatalf("Get with the commit visible, not applied: %+v, %v; want not found, at a position below %s", res, err, bound)
	}
	if res, err := app.Get(ctx, "counts", key, processor.AtLeast(bound, 0)); !errors.Is(err, processor.ErrNotFresh) || res.Found {
		t.Fatalf("Get AtLeast %s with the commit not applied: %+v, %v; want ErrNotFresh, not found", bound, res, err)
	}

	release()
	res, err = app.Get(ctx, "counts", key, processor.AtLeast(bound, 30*time.Second))
	if err != nil || !res.Found || countOf(t, res.Entries[0].Value) != 1 || !res.Position.Covers(bound) {
		t.Fatalf("Get AtLeast %s once applied: %+v, %v; want count 1", bound, res, err)
	}
}
