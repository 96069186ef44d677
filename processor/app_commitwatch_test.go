package processor

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestCommitWatchFlagsAPhaseFarSlowerThanUsual(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var w commitWatch
	now := time.Unix(0, 0)
	ms := func(f, e, a int) [3]time.Duration {
		return [3]time.Duration{time.Duration(f) * time.Millisecond, time.Duration(e) * time.Millisecond, time.Duration(a) * time.Millisecond}
	}
	for range 20 {
		now = now.Add(50 * time.Millisecond)
		w.observe(now, log, "interval", ms(15, 8, 1))
	}
	if buf.Len() != 0 {
		t.Fatalf("steady commits logged: %s", buf.String())
	}
	// A slow tail that is still short in absolute terms is not an anomaly.
	w.observe(now.Add(time.Second), log, "interval", ms(300, 8, 1))
	if buf.Len() != 0 {
		t.Fatalf("a 300ms flush logged as slow: %s", buf.String())
	}
	now = now.Add(time.Minute)
	w.observe(now, log, "interval", ms(4800, 9, 1)) // the fresh-broker stall
	if !strings.Contains(buf.String(), "slow commit") || !strings.Contains(buf.String(), "flush=4.8s") {
		t.Fatalf("a 4.8s flush after 15ms ones was not reported: %q", buf.String())
	}
	// Another one right after is counted into the next line, not logged
	// at once, and the mean barely moved: it still counts as slow.
	buf.Reset()
	w.observe(now.Add(time.Second), log, "interval", ms(4700, 9, 1))
	if buf.Len() != 0 {
		t.Fatalf("logged twice within 10s: %s", buf.String())
	}
	w.observe(now.Add(11*time.Second), log, "interval", ms(15, 8, 1))
	if !strings.Contains(buf.String(), "slow_commits=1") {
		t.Fatalf("the second slow commit was not reported with the next line: %q", buf.String())
	}
}
