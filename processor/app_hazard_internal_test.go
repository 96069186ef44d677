package processor

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/frontier"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

func hazardTestApp(t *testing.T, dir string) *App {
	t.Helper()
	b := topology.NewBuilder("hazard-internal")
	b.Stream("in", serde.String(), serde.String()).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewApp(topo, WithBrokers("127.0.0.1:1"), WithStateDir(dir),
		WithCheckpointPolicy(frontier.CheckpointOptions{MeanTimeBetweenFailures: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func savedHazard(t *testing.T, dir string) frontier.HazardState {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, hazardFileName))
	if err != nil {
		t.Fatal(err)
	}
	var st frontier.HazardState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// The hazard's life in the state directory without a broker: the marker's
// life cycle, session failures, periodic saves, a fatal stop, a directory
// moved aside, and an unreadable file.
func TestHazardFiles(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, runningMarkerName)
	a := hazardTestApp(t, dir)
	if err := a.startHazard(time.Now()); err != nil {
		t.Fatal(err)
	}
	h := a.hazard.Load()
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("no running marker after start: %v", err)
	}
	if h.unclean || savedHazard(t, dir).FailuresTotal != 0 {
		t.Fatalf("fresh directory: unclean %v, saved %+v", h.unclean, savedHazard(t, dir))
	}

	// Session failures count (and are saved at once); transient ones do
	// not.
	for _, cause := range []string{"fenced", "transient", "outcome_unknown", "rebuild", "restart"} {
		h.sessionFailed(cause)
	}
	if st := savedHazard(t, dir); st.FailuresTotal != 4 || st.LastCause != "restart" {
		t.Errorf("after 4 session failures and a transient restart: %+v", st)
	}

	// A rebuild moves the directory aside: the next save writes the
	// hazard and the marker again.
	if err := os.Rename(dir, dir+".aside"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	saveEvery := hazardSaveInterval
	hazardSaveInterval = 10 * time.Millisecond
	t.Cleanup(func() { hazardSaveInterval = saveEvery })
	done := make(chan struct{})
	kept := make(chan struct{})
	go func() { h.keep(done); close(kept) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, errM := os.Stat(marker)
		_, errH := os.Stat(filepath.Join(dir, hazardFileName))
		if errM == nil && errH == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the periodic save did not restore the files: %v, %v", errM, errH)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(done)
	<-kept

	// Run returning an error counts a fatal failure; the marker goes.
	h.stop(os.ErrInvalid)
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("marker after stop: %v", err)
	}
	if st := savedHazard(t, dir); st.FailuresTotal != 5 || st.LastCause != "fatal" {
		t.Errorf("after a fatal stop: %+v", st)
	}

	// Restart: clean, from the saved state.
	b := hazardTestApp(t, dir)
	if err := b.startHazard(time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := b.hazard.Load().est.State().FailuresTotal; got != 5 || b.hazard.Load().unclean {
		t.Errorf("restarted: %d failures, unclean %v", got, b.hazard.Load().unclean)
	}
	// Unclean restart, with an unreadable hazard file: starts from the
	// prior and counts the unclean start.
	if err := os.WriteFile(filepath.Join(dir, hazardFileName), []byte("{torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := hazardTestApp(t, dir)
	if err := c.startHazard(time.Now()); err != nil {
		t.Fatal(err)
	}
	if st := c.hazard.Load().est.State(); st.FailuresTotal != 1 || st.LastCause != failureUnclean || !c.hazard.Load().unclean {
		t.Errorf("unclean start over a torn file: %+v", st)
	}
	if av := c.availability(); av == nil || av.FailuresTotal != 1 || !av.UncleanStart || av.PriorMTBFSeconds != 3600 {
		t.Errorf("availability %+v", av)
	}
}
