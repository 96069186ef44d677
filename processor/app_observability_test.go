package processor_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// scrape reads /metrics and sums the samples of each metric name (over
// labels), so "x_bucket" lines count under their own name.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	a := httpGet(t, base+"/metrics")
	if a.status != http.StatusOK {
		t.Fatalf("/metrics: %d %s", a.status, a.body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(a.body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		name := line[:sp]
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		out[name] += v
	}
	return out
}

type frontierAnswer struct {
	Sinks map[string]struct {
		Partitions  []frontier.Mark `json:"partitions"`
		WatermarkMs int64           `json:"watermark_ms"`
		Covers      *bool           `json:"covers"`
	} `json:"sinks"`
}

func TestMetricsReadinessAndFrontierReportWhatWasCommitted(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	topo := countTopology(t, kafkatest.UniqueName(t, "obs"), in, out)
	start := time.Now()
	produceKeysN(t, in, 0, 300, 10, 2)

	// Not ready before it has tasks.
	idle, err := processor.NewApp(topo, processor.WithBrokers(kafkatest.Brokers(t)...))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	idle.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before Run: %d, want 503", rec.Code)
	}

	app, _ := runApp(t, topo, processor.WithStateDir(t.TempDir()), processor.WithHTTP("127.0.0.1:0"))
	recs := kafkatest.ConsumeExactly(t, out, 300, 20*time.Second, time.Second)
	next := map[int32]int64{} // per sink partition: last committed offset + 1
	for _, r := range recs {
		next[r.Partition] = max(next[r.Partition], r.Offset+1)
	}
	base := "http://" + app.HTTPAddr()
	if a := httpGet(t, base+"/readyz"); a.status != http.StatusOK {
		t.Fatalf("/readyz after processing: %d %s", a.status, a.body)
	}

	m := scrape(t, base)
	if got := m["tidemark_records_in_total"]; got != 300 {
		t.Errorf("tidemark_records_in_total %v, want the 300 inputs", got)
	}
	if got := m["tidemark_commits_total"]; got < 1 {
		t.Errorf("tidemark_commits_total %v after committed outputs", got)
	}
	// Counters of events that did not happen are there, at 0: a series
	// that appears only with its first event looks like a missing metric.
	for _, name := range []string{"tidemark_session_restarts_total", "tidemark_failures_total", "tidemark_processing_errors_total",
		"tidemark_checkpoints_total", "tidemark_snapshot_restores_total"} {
		if _, ok := m[name]; !ok {
			t.Errorf("%s is not exported before its first event", name)
		}
	}
	if got := m["tidemark_commit_interval_seconds"]; got < 0.001 || got > 5 {
		t.Errorf("tidemark_commit_interval_seconds %v, want within the controller's [5ms, 5s]", got)
	}
	n, sum := m["tidemark_observed_staleness_seconds_count"], m["tidemark_observed_staleness_seconds_sum"]
	if elapsed := time.Since(start).Seconds(); n < 1 || sum <= 0 || sum/n > elapsed {
		t.Errorf("tidemark_observed_staleness_seconds: %v commits, mean %vs; want ≥ 1 and within the %vs since the inputs", n, sum/n, elapsed)
	}

	// The frontier names the committed end of every sink partition, and
	// a watermark no later than the inputs.
	var fr frontierAnswer
	getJSON(t, base+"/frontier", &fr)
	sink, ok := fr.Sinks[out]
	if !ok || len(sink.Partitions) != 2 {
		t.Fatalf("/frontier: %+v, want both partitions of %s", fr, out)
	}
	for p, mark := range sink.Partitions {
		if mark.Offset != next[int32(p)] {
			t.Fatalf("/frontier partition %d at %d, the committed outputs end at %d", p, mark.Offset, next[int32(p)])
		}
	}
	wm := sink.WatermarkMs
	if wm < start.Add(-time.Second).UnixMilli() || wm > time.Now().UnixMilli() {
		t.Fatalf("/frontier watermark %d outside the input times [%d, now]", wm, start.UnixMilli())
	}
	for _, c := range []struct {
		at   int64
		want bool
	}{{wm - 1000, true}, {wm, true}, {wm + 1, false}} {
		var cv frontierAnswer
		getJSON(t, fmt.Sprintf("%s/frontier?sink=%s&covers=%d", base, out, c.at), &cv)
		if got := cv.Sinks[out].Covers; got == nil || *got != c.want {
			t.Fatalf("/frontier?covers=%d (watermark %d): %s, want %v", c.at, wm, fmt.Sprint(got != nil && *got), c.want)
		}
	}

	// The compacted frontier topic holds the same frontier, committed:
	// this instance's record names the sink, its offsets and a mark per
	// task (frontier.Record, version 2).
	var last frontier.Record
	kafkatest.ConsumeUntil(t, topo.Application()+"-frontier", 10*time.Second, func(rs []*kgo.Record) bool {
		for _, r := range rs {
			if strings.HasPrefix(string(r.Key), out+"@") { // FrontierKey: one record per sink and instance
				if err := last.UnmarshalBinary(r.Value); err != nil {
					t.Fatalf("frontier record: %v", err)
				}
			}
		}
		offs := make([]int64, len(sink.Partitions))
		for p, m := range sink.Partitions {
			offs[p] = m.Offset
		}
		return slices.Equal(last.Offsets, offs)
	})
	if last.Sink != out || len(last.Tasks) != 2 || len(last.Feeds) != 1 || last.Feeds[0].Tasks != 2 {
		t.Fatalf("frontier record %+v, want sink %q, fed by one sub-topology of 2 tasks, with a mark for each", last, out)
	}
	for _, m := range last.Tasks {
		if m.WatermarkMs < wm {
			t.Fatalf("task %s's mark %d is below the sink watermark %d the endpoint reported", m.TaskRef, m.WatermarkMs, wm)
		}
	}
}
