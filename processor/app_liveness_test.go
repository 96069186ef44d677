package processor_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestHealthzSaysWhenTheRecordLoopIsStuck: a user function that never
// returns stalls its stream thread's record loop; the group goes on seeing
// the member heartbeat, so nothing moves its partitions. GET /healthz must
// turn 503 once the loop has not turned for LivenessTimeout (so a liveness
// probe restarts the process), tidemark_stuck_threads must count the
// thread, and both must recover when the call returns.
func TestHealthzSaysWhenTheRecordLoopIsStuck(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	unblock := make(chan struct{})
	b := topology.NewBuilder(kafkatest.UniqueName(t, "stuck"))
	b.Stream(in, serde.String(), serde.String()).
		Peek(func(k, _ string) {
			if k == "block" {
				<-unblock
			}
		}).
		To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	app, _ := runApp(t, topo, processor.WithLivenessTimeout(2*time.Second))
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		app.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				code, body := get("/healthz")
				t.Fatalf("%s: not within 30 s (healthz %d %q)", what, code, body)
			}
		}
	}
	stuckGauge := func(n string) func() bool {
		return func() bool {
			_, body := get("/metrics")
			for _, line := range strings.Split(body, "\n") {
				if strings.HasPrefix(line, "tidemark_stuck_threads{") {
					return strings.HasSuffix(line, " "+n)
				}
			}
			return false
		}
	}

	kafkatest.Produce(t, &kgo.Record{Topic: in, Key: []byte("a"), Value: []byte("1")})
	kafkatest.ConsumeExactly(t, out, 1, time.Minute, 0)
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Fatalf("healthz of a running app: %d %q", code, body)
	}

	kafkatest.Produce(t, &kgo.Record{Topic: in, Key: []byte("block"), Value: []byte("2")})
	waitFor("healthz 503 while the loop is stuck", func() bool {
		code, body := get("/healthz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "stream thread(s) [0]")
	})
	waitFor("tidemark_stuck_threads 1", stuckGauge("1"))

	close(unblock)
	waitFor("healthz 200 once the loop turns again", func() bool {
		code, _ := get("/healthz")
		return code == http.StatusOK
	})
	waitFor("tidemark_stuck_threads 0", stuckGauge("0"))
}
