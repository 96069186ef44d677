package txn

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// run feeds a script of events to a fresh Machine and renders what it said.
func run(t *testing.T, events ...string) string {
	t.Helper()
	var m Machine
	var out []string
	for _, ev := range events {
		var act Action
		var err error
		switch ev {
		case "begin":
			err = m.Begin()
		case "commit":
			act, err = m.Commit()
		case "abort":
			act, err = m.Abort()
		case "prepared":
			act, err = m.Prepared(nil)
		case "prepare-failed":
			act, err = m.Prepared(errors.New("changelog flush failed"))
		case "ended-committed":
			act, err = m.Ended(true, nil)
		case "ended-aborted":
			act, err = m.Ended(false, nil)
		case "ended-error":
			act, err = m.Ended(false, errors.New("broker went away"))
		case "ended-fenced":
			act, err = m.Ended(false, fmt.Errorf("end: %w", ErrFenced))
		case "resolved-committed":
			act, err = m.Resolved(true, true)
		case "resolved-aborted":
			act, err = m.Resolved(false, true)
		case "resolved-unknown":
			act, err = m.Resolved(false, false)
		case "applied":
			act, err = m.Applied()
		default:
			t.Fatalf("unknown event %q", ev)
		}
		switch {
		case errors.Is(err, ErrPhase):
			out = append(out, ev+"!")
		case err != nil:
			t.Fatalf("%s: %v", ev, err)
		case act != ActNone:
			out = append(out, act.String())
		}
	}
	out = append(out, m.Phase().String())
	return strings.Join(out, " ")
}

func TestCommitCycle(t *testing.T) {
	tests := []struct {
		name   string
		events []string
		want   string
	}{
		{"a committed transaction applies then acks",
			[]string{"begin", "commit", "prepared", "ended-committed", "applied"}, "prepare end apply ack idle"},
		{"an abort discards overlays and rewinds",
			[]string{"begin", "abort", "ended-aborted"}, "abort discard idle"},
		{"a session abort during commit (rebalance) discards",
			[]string{"begin", "commit", "prepared", "ended-aborted"}, "prepare end discard idle"},
		{"an End error is resolved before anything is applied",
			[]string{"begin", "commit", "prepared", "ended-error"}, "prepare end resolve resolving"},
		{"resolved as committed applies and acks",
			[]string{"begin", "commit", "prepared", "ended-error", "resolved-committed", "applied"}, "prepare end resolve apply ack idle"},
		{"resolved as aborted discards and needs a new session",
			[]string{"begin", "commit", "prepared", "ended-error", "resolved-aborted"}, "prepare end resolve discard failed"},
		{"an unresolvable outcome restarts without applying or discarding",
			[]string{"begin", "commit", "prepared", "ended-error", "resolved-unknown"}, "prepare end resolve restart failed"},
		{"a fenced session never applies",
			[]string{"begin", "commit", "prepared", "ended-fenced"}, "prepare end restart failed"},
		{"a failed prepare aborts and discards",
			[]string{"begin", "commit", "prepare-failed", "ended-aborted"}, "prepare abort discard idle"},
		{"end before prepare is refused",
			[]string{"begin", "commit", "ended-committed"}, "prepare ended-committed! preparing"},
		{"apply before commit is refused",
			[]string{"begin", "applied"}, "applied! open"},
		{"commit without begin is refused",
			[]string{"commit"}, "commit! idle"},
		{"begin twice is refused",
			[]string{"begin", "begin"}, "begin! open"},
		{"cycles repeat",
			[]string{"begin", "commit", "prepared", "ended-committed", "applied", "begin", "abort", "ended-aborted"}, "prepare end apply ack abort discard idle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(t, tt.events...); got != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestCountsTrackOutcomes(t *testing.T) {
	var m Machine
	for range 3 {
		_ = m.Begin()
		_, _ = m.Commit()
		_, _ = m.Prepared(nil)
		_, _ = m.Ended(true, nil)
		_, _ = m.Applied()
	}
	_ = m.Begin()
	_, _ = m.Abort()
	_, _ = m.Ended(false, nil)
	if c, a := m.Counts(); c != 3 || a != 1 {
		t.Fatalf("counts = %d commits, %d aborts; want 3, 1", c, a)
	}
}
