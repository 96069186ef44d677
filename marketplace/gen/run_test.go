package gen

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func fakeCluster(t *testing.T, topics ...string) *kgo.Client {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(3, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.UnknownTopicRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func consumeAll(t *testing.T, brokers *kgo.Client, topics []string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers.OptValue(kgo.SeedBrokers).([]string)...),
		kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(out), n, err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func TestRunProducesTheSeedsStreamToKafka(t *testing.T) {
	cfg := Config{Seed: 11, Profile: Profile{Rate: 50000}, Topics: DefaultTopics.WithPrefix("t.")}
	cl := fakeCluster(t, cfg.withDefaults().Topics.All()...)
	var calls []Stats
	st, err := Run(context.Background(), cl, RunOptions{Config: cfg, Count: 3000, Progress: func(s Stats) { calls = append(calls, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if st.Sent != 3000 || st.Acked != 3000 || st.Failed != 0 || !st.Done {
		t.Fatalf("stats %+v, want 3000 sent and acked", st)
	}
	if len(calls) == 0 || !calls[len(calls)-1].Done {
		t.Fatalf("progress calls %+v: want a final call with Done", calls)
	}

	// The reference: the same Config generated in memory.
	ref := mustNew(t, cfg)
	want := map[string][]string{} // topic/key → values in order
	for range 3000 {
		r, err := ref.NextRecord()
		if err != nil {
			t.Fatal(err)
		}
		k := r.Topic + "/" + string(r.Key)
		want[k] = append(want[k], string(r.Value)+"@"+r.Timestamp.String())
	}
	got := map[string][]string{}
	for _, r := range consumeAll(t, cl, cfg.withDefaults().Topics.All(), 3000) {
		k := r.Topic + "/" + string(r.Key)
		got[k] = append(got[k], string(r.Value)+"@"+r.Timestamp.UTC().String())
	}
	if len(got) != len(want) {
		t.Fatalf("got %d topic/key pairs, want %d", len(got), len(want))
	}
	for k, vs := range want {
		if !slices.Equal(got[k], vs) {
			t.Fatalf("%s: records differ from the reference stream (per-key order included)", k)
		}
	}
}

func TestRunPacesToTheProfile(t *testing.T) {
	cl := fakeCluster(t, DefaultTopics.All()...)
	st, err := Run(context.Background(), cl, RunOptions{Config: Config{Profile: Profile{Rate: 400}}, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if st.Sent < 195 || st.Sent > 205 {
		t.Fatalf("400/s for 500ms sent %d records, want 200", st.Sent)
	}
	if st.Elapsed < 450*time.Millisecond {
		t.Fatalf("200 records at 400/s took only %v; Run is not pacing", st.Elapsed)
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	cl := fakeCluster(t, DefaultTopics.All()...)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	st, err := Run(ctx, cl, RunOptions{Config: Config{Profile: Profile{Rate: 1000}}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's error", err)
	}
	if st.Sent == 0 || st.Sent > 400 || st.Acked != st.Sent || st.Failed != 0 {
		t.Fatalf("stats %+v: want some records sent in 300ms at 1000/s, all delivered by the final flush", st)
	}
}

func TestRunReportsProduceErrorsWithTheTopic(t *testing.T) {
	cl := fakeCluster(t) // no topics, no auto-creation
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Run(ctx, cl, RunOptions{Config: Config{Profile: Profile{Rate: 1000}}})
	// The stream starts with the catalog: the sellers first.
	if err == nil || !strings.Contains(err.Error(), `produce to topic "tenants"`) {
		t.Fatalf("err = %v, want a produce error naming topic tenants", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run only stopped at the test deadline; it should stop on the first produce error")
	}
}

func TestRunGivesUpOnAStuckBrokerAfterTheFlushTimeout(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, DefaultTopics.All()...))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MaxBufferedRecords(50))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Close() // the broker is gone; produces now retry forever

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	st, err := Run(ctx, cl, RunOptions{Config: Config{Profile: Profile{Rate: 100000}}, FlushTimeout: 300 * time.Millisecond})
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Run took %v after a 200ms context and a 300ms flush timeout", took)
	}
	if err == nil || st.Acked == st.Sent {
		t.Fatalf("stats %+v, err %v: want unacknowledged records and an error", st, err)
	}
}
