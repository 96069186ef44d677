package processor_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/security"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

func configTopology(t *testing.T) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder("config-test")
	b.Stream("in", serde.String(), serde.String()).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestWithConfigOrder(t *testing.T) {
	t.Parallel()
	topo := configTopology(t)
	file := processor.Config{Brokers: []string{"file:9092"}, HTTPAddr: ":1", Guarantee: processor.AtLeastOnce}
	tests := []struct {
		name    string
		opts    []processor.Option
		brokers string // "" means NewApp fails
		errPart string
	}{
		{"WithConfig first, later options override its fields",
			[]processor.Option{processor.WithConfig(file), processor.WithBrokers("flag:9092")}, "flag:9092", ""},
		{"WithConfig alone keeps every field",
			[]processor.Option{processor.WithConfig(file)}, "file:9092", ""},
		{"WithConfig after another option is an error, not a silent overwrite",
			[]processor.Option{processor.WithBrokers("flag:9092"), processor.WithConfig(file)}, "", "WithConfig is option 2: it must be the first option"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app, err := processor.NewApp(topo, append(tt.opts, processor.WithStateDir(t.TempDir()))...)
			if tt.brokers == "" {
				if err == nil || !strings.Contains(err.Error(), tt.errPart) {
					t.Fatalf("NewApp = %v, want an error containing %q", err, tt.errPart)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg := app.Config()
			if got := strings.Join(cfg.Brokers, ","); got != tt.brokers {
				t.Fatalf("Brokers = %s, want %s", got, tt.brokers)
			}
			if cfg.HTTPAddr != ":1" || cfg.Guarantee != processor.AtLeastOnce {
				t.Fatalf("WithConfig's other fields lost: %+v", cfg)
			}
		})
	}
}

func TestConfigEnsureDefaultsAndValidate(t *testing.T) {
	t.Parallel()
	commit := frontier.Options{Policy: frontier.PolicyFixed}
	c := processor.Config{Brokers: []string{"b:9092"}, Commit: &commit}
	before := c
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate = %v", err)
	}
	if !reflect.DeepEqual(c, before) || !reflect.DeepEqual(commit, frontier.Options{Policy: frontier.PolicyFixed}) {
		t.Fatalf("Validate modified the config: %+v", c)
	}
	c.EnsureDefaults("shop")
	if c.StateDir != "tidemark-state/shop" || c.TransactionTimeout != 10*time.Second || c.Commit.FixedInterval != frontier.DefaultFixedInterval || c.Logger == nil ||
		c.RepartitionPurgeInterval != 30*time.Second {
		t.Fatalf("defaults not filled: %+v", c)
	}
	if commit.FixedInterval != 0 {
		t.Fatal("EnsureDefaults filled in the caller's frontier.Options")
	}
	for _, tt := range []struct {
		name  string
		cfg   processor.Config
		field string
	}{
		{"brokers are required", processor.Config{}, "Brokers"},
		{"a commit interval longer than the transaction timeout allows is rejected",
			processor.Config{Brokers: []string{"b"}, Commit: &frontier.Options{MaxInterval: time.Minute}}, "TransactionTimeout"},
		{"bad frontier options name the Commit field", processor.Config{Brokers: []string{"b"}, Commit: &frontier.Options{Policy: "cron"}}, "Commit: frontier: invalid options: Policy"},
		{"bad security settings name the field", processor.Config{Brokers: []string{"b"},
			Security: security.Config{SASL: security.SASL{Mechanism: "SCRAM-SHA-1", Username: "u", Password: "p"}}}, `security.sasl.mechanism: "SCRAM-SHA-1" is not one of`},
		{"a missing CA file is named", processor.Config{Brokers: []string{"b"},
			Security: security.Config{TLS: security.TLS{Enabled: true, CAFile: "/nonexistent/ca.pem"}}}, "security.tls.ca_file: open /nonexistent/ca.pem: no such file"},
		{"a restore share above 1 is rejected", processor.Config{Brokers: []string{"b"}, RestoreShare: 1.5}, "RestoreShare 1.5"},
		{"a negative restore share is rejected", processor.Config{Brokers: []string{"b"}, RestoreShare: -0.1}, "RestoreShare -0.1"},
		{"a peer timeout under 100ms is rejected", processor.Config{Brokers: []string{"b"}, PeerDeadAfter: 10 * time.Millisecond}, "PeerDeadAfter 10ms"},
		{"a liveness timeout under 1s is rejected", processor.Config{Brokers: []string{"b"}, LivenessTimeout: 50 * time.Millisecond}, "LivenessTimeout 50ms"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); err == nil || !strings.Contains(err.Error(), "config: "+tt.field) {
				t.Fatalf("Validate = %v, want an error naming %s", err, tt.field)
			}
		})
	}
}

// An instance id must leave room for its stream threads' "-t<i>": each
// thread's group instance id is at most 249 bytes too.
func TestInstanceIDLengthCountsTheThreadSuffix(t *testing.T) {
	t.Parallel()
	topo := configTopology(t)
	for _, c := range []struct {
		len, threads int
		ok           bool
	}{
		{249, 1, true}, {250, 1, false},
		{246, 2, true}, {247, 2, false}, // "-t1"
		{246, 10, true}, {247, 10, false}, // "-t9"
		{245, 11, true}, {246, 11, false}, // "-t10"
	} {
		_, err := processor.NewApp(topo, processor.WithBrokers("b:9092"), processor.WithInstanceID(strings.Repeat("i", c.len)), processor.WithThreads(c.threads))
		if (err == nil) != c.ok {
			t.Errorf("instance id of %d bytes with %d threads: NewApp error %v, want ok=%v", c.len, c.threads, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "249") {
			t.Errorf("error %q does not name the limit", err)
		}
	}
}
