package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/schemas/schemastest"
)

// execGen runs a fresh `gen` command with args and returns stdout, stderr
// and the error main would print.
func execGen(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := newGenCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func TestGenRejectsInvalidFlagsNamingFlagAndRange(t *testing.T) {
	t.Setenv("TIDEMARK_BROKERS", "")
	b := "--brokers=127.0.0.1:1"
	cases := []struct {
		args []string
		want string
	}{
		{nil, "--brokers is required (or set TIDEMARK_BROKERS)"},
		{[]string{b, "--rate=0"}, "--rate is 0, accepted range (0, 10000000] events/s"},
		{[]string{b, "--rate=-3"}, "--rate is -3"},
		{[]string{b, "--profile=sine"}, `--profile is "sine", accepted steady, ramp or burst`},
		{[]string{b, "--tenants=0"}, "--tenants is 0, accepted range 1..10000"},
		{[]string{b, "--partitions=0", "--create-topics"}, "--partitions is 0, accepted range 1..10000"},
		{[]string{b, "--format=xml"}, `--format is "xml", accepted avro or json`},
		{[]string{b, "--max-disorder=2h"}, "--max-disorder is 2h0m0s, accepted range 0..1h"},
		{[]string{b, "--duration=-1s"}, "--duration is -1s, must not be negative"},
		{[]string{b, "--start=yesterday"}, `--start is "yesterday", want RFC 3339`},
		{[]string{b, "--profile=burst", "--burst-for=1m"}, "need 0 < --burst-for <= --burst-every"},
		{[]string{b, "--rate=fast"}, `invalid argument "fast" for "--rate"`},
	}
	for _, tc := range cases {
		_, _, err := execGen(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("gen %v: err = %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

func TestGenNamesTheUnreachableBroker(t *testing.T) {
	start := time.Now()
	_, _, err := execGen(t, "--brokers=127.0.0.1:1", "--dial-timeout=500ms", "--count=10")
	if err == nil || !strings.Contains(err.Error(), "cannot reach Kafka broker 127.0.0.1:1 within 500ms") {
		t.Fatalf("err = %v, want it to name the broker and the timeout", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("gave up after %v; the dial timeout was 500ms", time.Since(start))
	}
}

func TestGenCreatesTopicsAndProducesCount(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := strings.Join(c.ListenAddrs(), ",")
	t.Setenv("TIDEMARK_BROKERS", addr) // brokers from the environment

	out, logs, err := execGen(t, "--count=500", "--rate=100000", "--create-topics", "--partitions=2",
		"--topics=it.", "--seed=3", "--start=2026-03-01T12:00:00Z", "--progress-every=1ms")
	if err != nil {
		t.Fatalf("gen: %v\n%s", err, logs)
	}
	if !strings.Contains(out, "produced 500 events (500 acked, 0 failed)") {
		t.Fatalf("summary %q, want 500 produced and acked", out)
	}
	if !strings.Contains(logs, "created topic") || !strings.Contains(logs, "gen progress") {
		t.Fatalf("stderr should log topic creation and progress lines when not a terminal:\n%s", logs)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	topics := []string{"it.clicks", "it.carts", "it.inventory", "it.payments", "it.fulfillment", "it.products", "it.tenants"}
	details, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range topics {
		if d, ok := details[tp]; !ok || len(d.Partitions) != 2 {
			t.Fatalf("topic %s: %+v, want it created with 2 partitions", tp, d)
		}
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != 500 {
		t.Fatalf("topics hold %d records, want 500", total)
	}

	// Running again against existing topics keeps them and appends.
	if _, logs, err := execGen(t, "--count=10", "--rate=100000", "--create-topics", "--topics=it."); err != nil || !strings.Contains(logs, "topic exists") {
		t.Fatalf("second run: %v\n%s", err, logs)
	}
	// Without --create-topics and a topic missing, nothing is written.
	if _, err := kadm.NewClient(cl).DeleteTopics(ctx, "it.clicks"); err != nil {
		t.Fatal(err)
	}
	before, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	_, logs, err = execGen(t, "--count=10", "--rate=100000", "--topics=it.")
	if err == nil || !strings.Contains(err.Error(), "topics it.clicks do not exist: create them with --create-topics") {
		t.Fatalf("gen with a missing topic: %v\n%s", err, logs)
	}
	after, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	before.Each(func(o kadm.ListedOffset) {
		if a, _ := after.Lookup(o.Topic, o.Partition); a.Offset != o.Offset {
			t.Errorf("%s/%d went from %d to %d: gen wrote before failing", o.Topic, o.Partition, o.Offset, a.Offset)
		}
	})
}

func TestGenWithRegistryWritesTheWireFormat(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "clicks", "carts", "inventory", "payments", "fulfillment", "products", "tenants"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fake := schemastest.NewRegistry(t)
	brokers := "--brokers=" + strings.Join(c.ListenAddrs(), ",")
	if _, _, err := execGen(t, brokers, "--registry="+fake.URL, "--format=json"); err == nil || !strings.Contains(err.Error(), "--registry writes Avro") {
		t.Fatalf("--registry with --format json: %v, want a flag conflict error", err)
	}
	// The stream opens with the catalog (8 sellers, ~1600 skus): enough
	// events to get past it to the clicks.
	if _, logs, err := execGen(t, brokers, "--registry="+fake.URL, "--count=2500", "--rate=100000"); err != nil {
		t.Fatalf("gen: %v\n%s", err, logs)
	}
	if ids := fake.Subjects("products-value"); len(ids) != 1 {
		t.Fatalf("products-value subject holds %v, want one schema (serde.Avro registers the catalog's)", ids)
	}
	clickIDs := fake.Subjects("clicks-value")
	if len(clickIDs) != 1 {
		t.Fatalf("clicks-value subject holds %v, want one schema", clickIDs)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("clicks"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs := cl.PollFetches(ctx)
	if fs.NumRecords() == 0 {
		t.Fatalf("no click records: %v", fs.Errors())
	}
	v := fs.Records()[0].Value
	if len(v) < 5 || v[0] != 0 || int(binary.BigEndian.Uint32(v[1:5])) != clickIDs[0] {
		t.Fatalf("click value %x does not start with magic 0 and schema id %d", v[:min(len(v), 5)], clickIDs[0])
	}

	fake.SetDown(true)
	if _, _, err := execGen(t, brokers, "--registry="+fake.URL, "--count=5"); err == nil || !strings.Contains(err.Error(), "register schemas with "+fake.URL) {
		t.Fatalf("registry down: %v, want an error naming the registry", err)
	}
}

func TestGenDryRunPrintsTheSeedsStreamWithoutABroker(t *testing.T) {
	t.Setenv("TIDEMARK_BROKERS", "")
	if _, _, err := execGen(t, "--dry-run"); err == nil || !strings.Contains(err.Error(), "--dry-run needs --count or --duration") {
		t.Fatalf("unbounded dry run: %v, want an error", err)
	}
	args := []string{"--dry-run", "--count=200", "--seed=5", "--start=2026-03-01T00:00:00Z", "--topics=x."}
	out, _, err := execGen(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 200 {
		t.Fatalf("printed %d lines, want 200", len(lines))
	}
	var first struct {
		Topic string `json:"topic"`
		Key   string `json:"key"`
		Value struct {
			Tenant string `json:"tenant"`
		} `json:"value"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.Topic != "x.tenants" || first.Key == "" || first.Key != first.Value.Tenant {
		t.Fatalf("first line %s: want the first seller on x.tenants keyed by its tenant", lines[0])
	}
	again, _, err := execGen(t, args...)
	if err != nil || again != out {
		t.Fatalf("the same seed and start printed a different stream (%v)", err)
	}
}
