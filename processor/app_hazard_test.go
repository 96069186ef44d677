package processor_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

type availabilityAnswer struct {
	Availability struct {
		HazardPerHour float64 `json:"hazard_per_hour"`
		MTBFSeconds   float64 `json:"mtbf_seconds"`
		FailuresTotal int64   `json:"failures_total"`
		UptimeSeconds float64 `json:"uptime_seconds"`
		LastCause     string  `json:"last_cause"`
		UncleanStart  bool    `json:"unclean_start"`
		Checkpoint    struct {
			IntervalSeconds float64           `json:"interval_seconds"`
			Bound           string            `json:"bound"`
			DalySeconds     float64           `json:"daly_seconds"`
			MTBFSeconds     float64           `json:"mtbf_seconds"`
			Checkpoints     uint64            `json:"checkpoints"`
			ByReason        map[string]uint64 `json:"by_reason"`
			Recent          []struct {
				Reason string  `json:"reason"`
				TookMs float64 `json:"took_ms"`
				Err    string  `json:"err"`
			} `json:"recent"`
		} `json:"checkpoint"`
	} `json:"availability"`
}

func availability(t *testing.T, app *processor.App) availabilityAnswer {
	t.Helper()
	a := httpGet(t, "http://"+app.HTTPAddr()+"/frontier")
	var out availabilityAnswer
	if err := json.Unmarshal(a.body, &out); err != nil {
		t.Fatalf("/frontier: %v: %s", err, a.body)
	}
	return out
}

func readHazardFile(t *testing.T, dir string) frontier.HazardState {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "hazard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st frontier.HazardState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("hazard.json: %v: %s", err, b)
	}
	return st
}

func markerExists(t *testing.T, dir string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(dir, "running"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// TestFailureHazardAcrossRestarts runs an App three times on one state
// directory: a clean first run leaves no running marker and a hazard at
// its prior; a marker left behind (as a SIGKILL would) makes the second
// run count an unclean start, raising the hazard above the prior on the
// metrics and /frontier; the third run starts from the saved hazard, with
// the failure still counted. Checkpoints run meanwhile (on their own
// goroutine) and are traced on /frontier.
func TestFailureHazardAcrossRestarts(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	topo := countTopology(t, kafkatest.UniqueName(t, "hazard"), in, out)
	dir := t.TempDir()
	const prior = 24 * time.Hour
	opts := []processor.Option{processor.WithStateDir(dir), processor.WithHTTP("127.0.0.1:0"),
		processor.WithCheckpointPolicy(frontier.CheckpointOptions{MeanTimeBetweenFailures: prior,
			MinInterval: 20 * time.Millisecond, MaxInterval: 100 * time.Millisecond})}
	priorPerHour := 1 / prior.Hours()

	// Run 1: clean.
	produceKeysN(t, in, 0, 100, 10, 2)
	app, stop := runApp(t, topo, opts...)
	waitRecordsIn(t, app, 100)
	if !markerExists(t, dir) {
		t.Fatal("no running marker while the app runs")
	}
	first := availability(t, app)
	if a := first.Availability; a.UncleanStart || a.FailuresTotal != 0 || a.HazardPerHour > priorPerHour*1.0001 {
		t.Errorf("first run: %+v, want a clean start at the prior %.4f/h", a, priorPerHour)
	}
	// Checkpoints run within the 100ms max interval while writes land.
	produceKeysN(t, in, 100, 100, 10, 2)
	waitRecordsIn(t, app, 200)
	deadline := time.Now().Add(10 * time.Second)
	for availability(t, app).Availability.Checkpoint.Checkpoints == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	ck := availability(t, app).Availability.Checkpoint
	if ck.Checkpoints == 0 || len(ck.Recent) == 0 || ck.IntervalSeconds <= 0 || ck.MTBFSeconds <= 0 {
		t.Errorf("checkpoint section %+v, want checkpoints traced", ck)
	}
	if got := scrape(t, "http://"+app.HTTPAddr())["tidemark_checkpoint_interval_seconds"]; got <= 0 || got > 0.1 {
		t.Errorf("tidemark_checkpoint_interval_seconds %v, want in (0, 0.1]", got)
	}
	stop()
	if markerExists(t, dir) {
		t.Fatal("a clean stop left the running marker")
	}
	if st := readHazardFile(t, dir); st.FailuresTotal != 0 || st.UptimeSeconds <= 0 {
		t.Errorf("hazard.json after a clean run: %+v", st)
	}

	// Run 2: the marker of a process that died.
	if err := os.WriteFile(filepath.Join(dir, "running"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	app, stop = runApp(t, topo, opts...)
	deadline = time.Now().Add(15 * time.Second)
	for app.HTTPAddr() == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	second := availability(t, app).Availability
	if !second.UncleanStart || second.FailuresTotal != 1 || second.LastCause != "unclean_start" || second.HazardPerHour < 1.5*priorPerHour {
		t.Errorf("after an unclean start: %+v, want 1 failure and the hazard ~2× the prior %.4f/h", second, priorPerHour)
	}
	m := scrape(t, "http://"+app.HTTPAddr())
	if got := m["tidemark_failure_hazard_per_hour"]; got < 1.5*priorPerHour {
		t.Errorf("tidemark_failure_hazard_per_hour %v, want above the prior %.4f", got, priorPerHour)
	}
	if got := m["tidemark_failures_total"]; got != 1 {
		t.Errorf("tidemark_failures_total %v, want 1", got)
	}
	if got := m["tidemark_failure_mtbf_seconds"]; got <= 0 || got > prior.Seconds()/1.5 {
		t.Errorf("tidemark_failure_mtbf_seconds %v", got)
	}
	stop()
	if markerExists(t, dir) {
		t.Fatal("a clean stop left the running marker")
	}
	saved := readHazardFile(t, dir)
	if saved.FailuresTotal != 1 || saved.LastCause != "unclean_start" {
		t.Errorf("hazard.json after the unclean start: %+v", saved)
	}

	// Run 3: clean, from the saved hazard.
	app, stop = runApp(t, topo, opts...)
	deadline = time.Now().Add(15 * time.Second)
	for app.HTTPAddr() == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	third := availability(t, app).Availability
	if third.UncleanStart || third.FailuresTotal != 1 || third.HazardPerHour < 1.5*priorPerHour {
		t.Errorf("third run: %+v, want the saved failure and no new one", third)
	}
	if third.UptimeSeconds < saved.UptimeSeconds {
		t.Errorf("third run uptime %v, saved %v: the uptime was not restored", third.UptimeSeconds, saved.UptimeSeconds)
	}
	stop()
	if st := readHazardFile(t, dir); st.FailuresTotal != 1 {
		t.Errorf("hazard.json after the third run: %+v", st)
	}
}
