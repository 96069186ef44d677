package processor

import (
	"testing"
	"time"
)

func TestUIRingKeepsTheNewestSamplesInOrder(t *testing.T) {
	t.Parallel()
	var u uiState
	for i := range uiSamples + 10 {
		u.add(uiSample{TimeMs: int64(i)})
	}
	all := u.since(0)
	if len(all) != uiSamples {
		t.Fatalf("kept %d samples, want %d", len(all), uiSamples)
	}
	for i, s := range all {
		if want := uint64(i + 11); s.Seq != want || s.TimeMs != int64(i+10) {
			t.Fatalf("sample %d: seq %d t %d, want seq %d t %d", i, s.Seq, s.TimeMs, want, i+10)
		}
	}
	if got := u.since(uiSamples + 8); len(got) != 2 || got[0].Seq != uiSamples+9 {
		t.Fatalf("since %d: %+v", uiSamples+8, got)
	}
}

func TestUIStalenessQuantilesPerSinkOverTheWindow(t *testing.T) {
	t.Parallel()
	var u uiState
	now := time.Unix(1000, 0)
	u.observeStaleness("a", now.Add(-uiStaleWindow-time.Second), time.Hour) // out of the window
	for i := 1; i <= 100; i++ {
		u.observeStaleness("a", now.Add(-time.Second), time.Duration(i)*time.Millisecond)
	}
	u.observeStaleness("b", now, 7*time.Millisecond)
	got := u.staleness(now)
	if q := got["a"]; q.P50 != 50 || q.P99 != 99 || q.Commits != 100 {
		t.Errorf("a: %+v, want p50 50 p99 99 over 100 commits", q)
	}
	if q := got["b"]; q.P50 != 7 || q.P99 != 7 || q.Commits != 1 {
		t.Errorf("b: %+v", q)
	}
	if got := u.staleness(now.Add(uiStaleWindow + 2*time.Second)); len(got) != 0 {
		t.Errorf("after the window: %+v, want no sink", got)
	}
}
