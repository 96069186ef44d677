package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/testbroker"
)

// privateTimeout bounds one start, stop or restart of a private broker. A
// start after Kill waits out the dead broker's session (about 10 s).
const privateTimeout = 2 * time.Minute

// Private is a broker of one test's own, for tests that hurt it: kill it,
// stop and start it, pause it. It lives in the test's temporary directory
// with its own ports and data; only the jar cache is shared. Its bootstrap
// address survives every restart. Methods fail the test on error, with the
// tail of the broker log.
type Private struct {
	t         testing.TB
	cfg       testbroker.Config
	bootstrap string
	listeners map[string]string
}

// PrivateBroker starts a fresh broker for t and stops it at cleanup. Where
// Java or Maven is missing it fails the test when TIDEMARK_REQUIRE_KAFKA=1
// and skips it otherwise, saying how to get them, as Brokers does.
func PrivateBroker(t testing.TB) *Private {
	t.Helper()
	return PrivateBrokerWith(t, nil)
}

// PrivateBrokerWith is PrivateBroker with extra server properties.
func PrivateBrokerWith(t testing.TB, props map[string]string) *Private {
	t.Helper()
	return PrivateBrokerListeners(t, props, nil)
}

// PrivateBrokerListeners is PrivateBrokerWith with extra client listeners,
// name to security protocol (testbroker.Config.Listeners); Listener
// returns their addresses. Their security settings go in props.
func PrivateBrokerListeners(t testing.TB, props, listeners map[string]string) *Private {
	t.Helper()
	p := &Private{t: t, cfg: testbroker.Config{
		StateDir:    t.TempDir(),
		HeapMB:      256,
		StopTimeout: 10 * time.Second,
		Properties:  props,
		Listeners:   listeners,
	}}
	if err := p.cfg.EnsureDefaults(); err != nil {
		t.Fatalf("kafkatest: private broker: %v", err)
	}
	NeedBrokerTools(t)
	// Registered before Up, so a half-started broker is stopped too, and
	// after TempDir, so it runs before the directory is removed.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), privateTimeout)
		defer cancel()
		if err := p.cfg.Down(ctx); err != nil && !errors.Is(err, testbroker.ErrNotRunning) {
			t.Errorf("kafkatest: stop private broker %s: %v", p.bootstrap, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), privateTimeout)
	defer cancel()
	r, err := p.cfg.Up(ctx, p.progress)
	if err != nil {
		p.fail("start", err)
	}
	p.bootstrap, p.listeners = r.Bootstrap, r.Listeners
	t.Logf("kafkatest: private broker at %s started in %s; log %s", r.Bootstrap, r.Started.Round(time.Millisecond), p.LogFile())
	return p
}

// NeedBrokerTools checks that this machine can run a broker from the Maven
// jars (Java, and Maven unless the jars are cached). Otherwise it fails the
// test when TIDEMARK_REQUIRE_KAFKA=1 and skips it, saying how to get them.
func NeedBrokerTools(t testing.TB) {
	t.Helper()
	var cfg testbroker.Config
	if err := cfg.EnsureDefaults(); err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	var missing []string
	if _, err := exec.LookPath(cfg.Java); err != nil {
		missing = append(missing, "Java 17+ ("+cfg.Java+" not on PATH)")
	}
	jars, _ := filepath.Glob(filepath.Join(cfg.LibDir, "kafka_2.13-*.jar"))
	if _, err := exec.LookPath(cfg.Maven); err != nil && len(jars) == 0 {
		missing = append(missing, "Maven ("+cfg.Maven+" not on PATH, and no jars cached in "+cfg.LibDir+")")
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("kafkatest: this test runs its own Kafka broker and needs %s: "+
		"install them (e.g. apt-get install openjdk-17-jre-headless maven; `make test` does so when run as root)",
		strings.Join(missing, " and "))
	if os.Getenv("TIDEMARK_REQUIRE_KAFKA") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Bootstrap returns the broker's seed brokers; they stay valid across Kill,
// Stop, Start and Restart.
func (p *Private) Bootstrap() []string { return []string{p.bootstrap} }

// Listener returns the address of the extra listener name; it fails the
// test if the broker has none of that name.
func (p *Private) Listener(name string) string {
	p.t.Helper()
	addr, ok := p.listeners[name]
	if !ok {
		p.t.Fatalf("kafkatest: private broker %s has no listener %s", p.bootstrap, name)
	}
	return addr
}

// LogFile is the broker's console log, kept across restarts.
func (p *Private) LogFile() string { return p.cfg.LogFile() }

// Client returns a client on this broker with opts applied, closed at
// cleanup.
func (p *Private) Client(opts ...kgo.Opt) *kgo.Client {
	p.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(p.Bootstrap()...)}, opts...)...)
	if err != nil {
		p.t.Fatalf("kafkatest: client on private broker %s: %v", p.bootstrap, err)
	}
	p.t.Cleanup(cl.Close)
	return cl
}

// Kill SIGKILLs the broker (a crash) and returns once the process is gone.
func (p *Private) Kill() {
	p.t.Helper()
	if err := p.cfg.Kill(); err != nil {
		p.fail("kill", err)
	}
}

// Stop shuts the broker down gracefully and returns once it is gone.
func (p *Private) Stop() {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), privateTimeout)
	defer cancel()
	if err := p.cfg.Stop(ctx); err != nil {
		p.fail("stop", err)
	}
}

// Start starts the broker again on its data and ports and returns once it
// answers; a broker that already answers is left as it is.
func (p *Private) Start() {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), privateTimeout)
	defer cancel()
	p.started("start", func() (testbroker.Running, error) { return p.cfg.Start(ctx, p.progress) })
}

// Restart stops the broker (kills it when hard) and starts it again on its
// data and ports; it returns once the broker answers.
func (p *Private) Restart(hard bool) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), privateTimeout)
	defer cancel()
	p.started("restart", func() (testbroker.Running, error) { return p.cfg.Restart(ctx, p.progress, hard) })
}

// Pause SIGSTOPs the broker (a hung broker: connections open, no answers)
// and returns once the process is stopped.
func (p *Private) Pause() {
	p.t.Helper()
	if err := p.cfg.Pause(); err != nil {
		p.fail("pause", err)
	}
}

// Resume SIGCONTs a paused broker.
func (p *Private) Resume() {
	p.t.Helper()
	if err := p.cfg.Resume(); err != nil {
		p.fail("resume", err)
	}
}

func (p *Private) started(op string, start func() (testbroker.Running, error)) {
	p.t.Helper()
	r, err := start()
	if err != nil {
		p.fail(op, err)
	}
	if r.Bootstrap != p.bootstrap {
		p.fail(op, fmt.Errorf("broker came back at %s, not at %s", r.Bootstrap, p.bootstrap))
	}
	p.t.Logf("kafkatest: private broker at %s: %s took %s", p.bootstrap, op, r.Started.Round(time.Millisecond))
}

func (p *Private) progress(msg string) { p.t.Logf("kafkatest: private broker: %s", msg) }

func (p *Private) fail(op string, err error) {
	p.t.Helper()
	msg := fmt.Sprintf("kafkatest: %s private broker %s: %v", op, p.bootstrap, err)
	// Errors from a start that never got ready carry the log tail already.
	if !strings.Contains(msg, p.LogFile()) {
		msg += fmt.Sprintf("\nbroker log %s:\n%s", p.LogFile(), p.cfg.LogTail(30))
	}
	p.t.Fatal(msg)
}
