package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
func NewTopic(t testing.TB, partitions int32, configs map[string]string) string {
	t.Helper()
	adm := Admin(t)
	name := UniqueName(t, "t")
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cfg := make(map[string]*string, len(configs))
	for k, v := range configs {
		cfg[k] = &v
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
	return name
}
