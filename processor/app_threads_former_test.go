package processor_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidemark-streams/tidemark/internal/testlog"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestFormerThreadsRemovedThroughACoordinatorBlip: a former run of
// instance "x" left a stream thread member "x-t1" in the group (killed:
// a static member does not leave). The restart, with one thread, must
// remove it although the group coordinator answers its first lookups
// COORDINATOR_NOT_AVAILABLE, as a broker that has just started does while
// it creates its offsets topic: that error is retried, not logged and
// given up, which would leave x-t1's partitions waiting out its 60 s
// session.
func TestFormerThreadsRemovedThroughACoordinatorBlip(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	const group = "former-threads"
	former, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics("in"),
		kgo.InstanceID("x-t1"), kgo.Balancers(holeBalancer{}), kgo.SessionTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admCl.Close)
	adm := kadm.NewClient(admCl)
	// members lists the group's static members; nil and the error when
	// the group cannot be described.
	members := func() ([]string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gs, err := adm.DescribeGroups(ctx, group)
		if err == nil {
			err = gs.Error()
		}
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, m := range gs[group].Members {
			if m.InstanceID != nil {
				ids = append(ids, *m.InstanceID)
			}
		}
		return ids, nil
	}
	joined := func() bool {
		ids, _ := members()
		return strings.Contains(strings.Join(ids, ","), "x-t1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for !joined() {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		former.PollRecords(pctx, 1) // joins
		pcancel()
		if ctx.Err() != nil {
			t.Fatal("the stand-in thread x-t1 never joined the group")
		}
	}
	former.Close() // static: stays a member until its session expires

	// A broker that has just started answers the group's coordinator
	// lookup COORDINATOR_NOT_AVAILABLE until its offsets topic is ready.
	var refused atomic.Int32
	c.ControlKey(int16(kmsg.FindCoordinator), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if refused.Load() >= 3 {
			return nil, nil, false
		}
		refused.Add(1)
		freq := req.(*kmsg.FindCoordinatorRequest)
		resp := freq.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		for _, k := range append(freq.CoordinatorKeys, freq.CoordinatorKey) {
			co := kmsg.NewFindCoordinatorResponseCoordinator()
			co.Key, co.ErrorCode, co.NodeID = k, kerr.CoordinatorNotAvailable.Code, -1
			resp.Coordinators = append(resp.Coordinators, co)
		}
		return resp, nil, true
	})

	topo, err := buildCount(group, "in", "out")
	if err != nil {
		t.Fatal(err)
	}
	var logs testlog.Buffer
	app, err := processor.NewApp(topo, processor.WithBrokers(c.ListenAddrs()...), processor.WithInstanceID("x"),
		processor.WithStateDir(filepath.Join(t.TempDir(), "state")), sessionTimeout(60*time.Second),
		processor.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	// The test itself describes the group only once the restart is
	// done, so every refused lookup was the restart's.
	for !strings.Contains(logs.String(), "removed the former stream threads") {
		select {
		case err := <-done:
			t.Fatalf("Run: %v\n%s", err, logs.String())
		case <-ctx.Done():
			t.Fatalf("the restart did not remove x-t1 (%d lookups refused); log:\n%s", refused.Load(), logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if n := refused.Load(); n != 3 {
		t.Fatalf("%d lookups refused, want 3: the test did not test the blip", n)
	}
	if ids, err := members(); err != nil || strings.Contains(strings.Join(ids, ","), "x-t1") {
		t.Fatalf("x-t1 still in the group, or the group unknown: %v, %v", ids, err)
	}
	t.Logf("x-t1 removed after %d refused lookups", refused.Load())
}
