package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Timeout bounds every helper's broker interaction.
const Timeout = 30 * time.Second

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// UniqueName returns "<prefix>-<test name>-<random>", a valid topic, group or
// transactional id that no other test or earlier run uses.
func UniqueName(t testing.TB, prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "-")
	if len(name) > 120 {
		name = name[:120]
	}
	return prefix + "-" + name + "-" + hex.EncodeToString(b[:])
}

// Admin returns an admin client on the test broker, closed at cleanup.
func Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(Client(t))
}

// Client returns a client on the test broker with opts applied, closed at
// cleanup.
func Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(Brokers(t)...)}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("kafkatest: new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// NewTopic creates a topic with a unique name, the given partition count and
// topic configs, and deletes it at cleanup. configs may be nil.
//
// The topic keeps its records whatever their timestamps (retention.ms=-1)
// unless configs sets retention.ms. A broker's time-based retention ages a
// segment by the largest record timestamp in it, not by when it was
// written: with the default seven days, records stamped with a fixed,
// reproducible event time (a test's 2023, or 1970) are already expired and
// go at the broker's next retention check, every 30 s on the test brokers
// (log.retention.check.interval.ms), active segment included. A test
// writing such records then loses them mid-test at a random moment: an
// app reading the topic for the first time finds its start offset at the
// end, one resuming from committed offsets gets OFFSET_OUT_OF_RANGE and
// resets past them, and a reader of the outputs starts after them. The
// topic is deleted at cleanup, so keeping everything costs nothing.
func NewTopic(t testing.TB, partitions int32, configs map[string]string) string {
	t.Helper()
	return newTopic(t, Admin(t), partitions, configs)
}

// NewTopic is kafkatest.NewTopic on this private broker, with the same
// defaults.
func (p *Private) NewTopic(partitions int32, configs map[string]string) string {
	p.t.Helper()
	return newTopic(p.t, kadm.NewClient(p.Client()), partitions, configs)
}

func newTopic(t testing.TB, adm *kadm.Client, partitions int32, configs map[string]string) string {
	t.Helper()
	name := UniqueName(t, "t")
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cfg := make(map[string]*string, len(configs)+1)
	for k, v := range configs {
		cfg[k] = &v
	}
	if _, ok := cfg["retention.ms"]; !ok {
		cfg["retention.ms"] = new("-1")
	}
	resp, err := adm.CreateTopic(ctx, partitions, 1, cfg, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("kafkatest: create topic %s (%d partitions, %v): %v", name, partitions, configs, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, name)
	})
	if err := waitTopicServed(ctx, adm, name, partitions); err != nil {
		t.Fatalf("kafkatest: topic %s: %v", name, err)
	}
	return name
}

// waitTopicServed waits until the broker's metadata shows every partition
// of topic with a leader. CreateTopics returns once the controller has the
// topic; the broker serves it a moment later, and a describe in between
// answers UNKNOWN_TOPIC_OR_PARTITION.
func waitTopicServed(ctx context.Context, adm *kadm.Client, topic string, partitions int32) error {
	for {
		tds, err := adm.ListTopics(ctx, topic)
		if err == nil {
			if td, ok := tds[topic]; ok && td.Err == nil && len(td.Partitions) > 0 && (partitions <= 0 || int32(len(td.Partitions)) == partitions) {
				served := true
				for _, p := range td.Partitions {
					served = served && p.Err == nil && p.Leader >= 0
				}
				if served {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not served with %d partitions after creation: %w", partitions, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
