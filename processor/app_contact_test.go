package processor_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/internal/netfault"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestQueriesRefuseToAnswerOutOfContact: an instance cut off from the
// broker keeps its state, but past the session timeout the group gives its
// partitions to others. It answers queries from its state while in
// contact, answers ErrOutOfContact (HTTP 503) once its group client has
// not heard from the coordinator for longer than the session timeout, and
// answers again once the partition heals and it has rejoined; GET /readyz
// says the same.
func TestQueriesRefuseToAnswerOutOfContact(t *testing.T) {
	t.Parallel()
	in, out := kafkatestNewTopic(t, 2), kafkatestNewTopic(t, 2)
	topo := countTopology(t, kafkatestName(t, "contact"), in, out)
	proxy, err := netfault.New(kafkatest.Brokers(t)[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() }) // after the app stops (cleanups run last first)
	const session = 6 * time.Second     // the broker's minimum
	app, _ := runApp(t, topo, processor.WithBrokers(proxy.Addr()),
		processor.WithClientOpts(kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, proxy.Addr())
		})),
		func(c *processor.Config) { c.SessionTimeout = session })
	want := produceKeys(t, in, 0, 20, 4)

	get := func() (int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := app.Get(ctx, "counts", []byte("sku-01"))
		if err != nil || !res.Found {
			return 0, err
		}
		return countOf(t, res.Entries[0].Value), nil
	}
	waitCount := func(what string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			n, err := get()
			if err == nil && n == int64(want["sku-01"]) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: Get sku-01 = %d, %v; want %d", what, n, err, want["sku-01"])
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitCount("before the partition")

	proxy.Cut()
	cut := time.Now()
	if _, err := get(); err != nil {
		t.Fatalf("right after the cut, within the session timeout: %v", err)
	}
	var refused error
	for time.Since(cut) < session+30*time.Second {
		if _, err := get(); err != nil {
			refused = err
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !errors.Is(refused, processor.ErrOutOfContact) {
		t.Fatalf("%s after the cut: Get = %v; want ErrOutOfContact", time.Since(cut).Round(time.Millisecond), refused)
	}
	// The last heartbeat answered at most a heartbeat interval (3 s)
	// before the cut, so not before session−3s.
	if since := time.Since(cut); since < session/4 {
		t.Fatalf("ErrOutOfContact %s after the cut, well within the %s session timeout: %v", since, session, refused)
	}
	t.Logf("%s after the cut: %v", time.Since(cut).Round(time.Millisecond), refused)
	if code, body := readyz(app); code != http.StatusServiceUnavailable || !strings.Contains(body, "not heard from the group coordinator") {
		t.Fatalf("GET /readyz out of contact: %d %q; want 503 saying why", code, body)
	}
	if n := outOfContactThreads(t, app); n != 1 {
		t.Fatalf("tidemark_out_of_contact_threads = %v out of contact, want 1", n)
	}

	proxy.Heal()
	// Back in contact: ready again (once the group, which may have
	// dropped the member meanwhile, has given its partitions back and
	// they restored), and answering.
	code, body := 0, ""
	for end := time.Now().Add(90 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if code, body = readyz(app); code == http.StatusOK {
			break
		}
	}
	if code != http.StatusOK {
		t.Fatalf("GET /readyz after the heal: %d %q", code, body)
	}
	waitCount("after the partition healed")
	if n := outOfContactThreads(t, app); n != 0 {
		t.Fatalf("tidemark_out_of_contact_threads = %v after the heal, want 0", n)
	}
	checkCounts(t, out, want)
}

func readyz(app *processor.App) (int, string) {
	rec := httptest.NewRecorder()
	app.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return rec.Code, rec.Body.String()
}

func outOfContactThreads(t *testing.T, app *processor.App) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	app.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, "tidemark_out_of_contact_threads{") {
			f := strings.Fields(line)
			n, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("no tidemark_out_of_contact_threads in /metrics")
	return 0
}
