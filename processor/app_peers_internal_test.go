package processor

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// The detector's removal names each member by member id and instance id,
// so a dead instance that restarted (and rejoined) between the describe
// and the LeaveGroup is not removed: the coordinator refuses the stale
// member id (FENCED_INSTANCE_ID). With the current member id the removal
// takes, and the group is left without the instance.
func TestPeerRemovalSparesAnInstanceThatRejoined(t *testing.T) {
	t.Parallel()
	a, group, topic := groupTestApp(t, "peers")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// A static member of instance "x", as a tidemark thread joins.
	join := func() *kgo.Client {
		return kafkatest.Client(t, kgo.ConsumerGroup(group), kgo.InstanceID("x"), kgo.ConsumeTopics(topic),
			kgo.SessionTimeout(60*time.Second),
			kgo.Balancers(&copartitionBalancer{info: memberInfo{Instance: "x", HTTP: "127.0.0.1:1"}}))
	}
	book := newPeerBook()
	members := func() []string {
		t.Helper()
		for {
			g, err := a.describeGroup(ctx)
			if err == nil && g.State == "Stable" {
				var ids []string
				for _, m := range book.members(g, "x") {
					ids = append(ids, m.MemberID)
				}
				return ids
			}
			if ctx.Err() != nil {
				t.Fatalf("group %s never became stable: %v", group, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	first := join()
	go first.PollFetches(ctx) // joins the group
	var stale []string
	for stale == nil {
		stale = members()
	}
	g, _ := a.describeGroup(ctx)
	staleMembers := book.members(g, "x")

	// x restarts: a static member's client leaves nothing behind on close,
	// and the new one takes over the instance id with a new member id.
	first.Close()
	second := join()
	go second.PollFetches(ctx)
	var current []string
	for current == nil || current[0] == stale[0] {
		current = members()
		time.Sleep(100 * time.Millisecond)
	}

	removed, err := a.leaveMembers(ctx, group, "x", staleMembers, "test: stale member id")
	if err != nil || removed != 0 {
		t.Fatalf("removal with the stale member id %v: removed %d, err %v; want 0, nil", stale, removed, err)
	}
	if got := members(); len(got) != 1 || got[0] != current[0] {
		t.Fatalf("after a stale removal the members of x are %v, want %v", got, current)
	}

	removed, err = a.removeMembersOf(ctx, book, "x", "test: current member id")
	if err != nil || removed != 1 {
		t.Fatalf("removal of x: removed %d, err %v; want 1, nil", removed, err)
	}
	g, err = a.describeGroup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if left := book.members(g, "x"); len(left) != 0 {
		t.Fatalf("x still has members %v after its removal", left)
	}
	second.Close()
}

// groupTestApp is an App of group "<prefix>-…" reading a new topic, not
// run: its admin client is set, for tests of what it does with the group.
func groupTestApp(t *testing.T, prefix string, opts ...Option) (a *App, group, topic string) {
	t.Helper()
	topic = kafkatest.NewTopic(t, 2, nil)
	group = kafkatest.UniqueName(t, prefix)
	b := topology.NewBuilder(group)
	b.Stream(topic, serde.String(), serde.String()).To(topic + "-out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	a, err = NewApp(topo, append([]Option{WithBrokers(kafkatest.Brokers(t)...), WithStateDir(t.TempDir())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	a.admCl = kafkatest.Client(t)
	a.adm = kadm.NewClient(a.admCl)
	return a, group, topic
}
