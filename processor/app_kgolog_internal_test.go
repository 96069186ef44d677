package processor

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An input partition reset because its committed offset left the log (the
// broker deleted records before the app read them) is a warning in the
// app's log, naming the partition; franz-go's other info messages stay at
// debug.
func TestKgoLoggerWarnsOfOutOfRangeResume(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := &kgoLogger{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "retries"})}
	// The message as franz-go v1.22.3 logs it (source.go).
	l.Log(kgo.LogLevelInfo, "received OFFSET_OUT_OF_RANGE on the first fetch, resetting to the configured ConsumeResetOffset",
		"broker", "1", "topic", "orders", "partition", int32(1), "prior_offset", int64(34))
	l.Log(kgo.LogLevelInfo, "assigning partitions", "why", "newly fetched offsets")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 log lines, got %d:\n%s", len(lines), buf.String())
	}
	for _, want := range []string{"level=WARN", "OFFSET_OUT_OF_RANGE", "topic=orders", "partition=1", "prior_offset=34", "deleted by retention"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("out-of-range line lacks %q: %s", want, lines[0])
		}
	}
	if !strings.Contains(lines[1], "level=DEBUG") {
		t.Errorf("other info messages stay at debug: %s", lines[1])
	}
}

// A member removed from the group or fenced (a zombie after a freeze) or a
// connection lost in a partition recovers by itself: franz-go's error
// lines for them become warnings; other errors stay errors.
func TestKgoLoggerLowersRecoverableErrorsToWarnings(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := &kgoLogger{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "retries"})}
	// The messages as franz-go v1.22.3 logs them (consumer_group.go, producer.go).
	l.Log(kgo.LogLevelError, "group manage loop errored", "group", "g", "err", kerr.UnknownMemberID, "consecutive_errors", 1)
	l.Log(kgo.LogLevelError, "fatal InitProducerID error, failing all buffered records", "broker", "1", "err", fmt.Errorf("init: %w", kerr.ProducerFenced))
	l.Log(kgo.LogLevelError, "group manage loop errored", "group", "g", "err", io.EOF, "consecutive_errors", 1)
	l.Log(kgo.LogLevelError, "group manage loop errored", "group", "g", "err", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded})
	l.Log(kgo.LogLevelError, "group manage loop errored", "group", "g", "err", kerr.GroupAuthorizationFailed)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("want 5 log lines, got %d:\n%s", len(lines), buf.String())
	}
	for _, line := range lines[:4] {
		if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "recovered by itself") {
			t.Errorf("a recoverable error is not a warning that says so: %s", line)
		}
	}
	if !strings.Contains(lines[4], "level=ERROR") {
		t.Errorf("an authorization failure must stay an error: %s", lines[4])
	}
}
