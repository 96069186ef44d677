package txn

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestPipelinedCommitFollowsTheProtocol runs every case of the commit
// protocol through Seal, End on a goroutine of its own, and Finish: the
// steps, faults, errors and outcome are Commit's.
func TestPipelinedCommitFollowsTheProtocol(t *testing.T) {
	for _, tt := range committerCases() {
		if tt.abort {
			continue // an abort is not pipelined
		}
		t.Run(tt.name, func(t *testing.T) {
			var log []string
			c := tt.committer(&log)
			if err := c.Begin(); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			e, st, err := c.Seal(ctx)
			if e != nil {
				done := make(chan struct{})
				go func() { e.End(ctx); close(done) }()
				<-done
				st, err = c.Finish(ctx, e)
			}
			if got := strings.Join(log, " "); got != tt.wantLog {
				t.Errorf("log\n got  %s\n want %s", got, tt.wantLog)
			}
			switch {
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			case tt.wantErr == nil && tt.anyErr != (err != nil):
				t.Errorf("err = %v, want error: %v", err, tt.anyErr)
			}
			if st.Committed != tt.wantComm {
				t.Errorf("stats committed = %v, want %v", st.Committed, tt.wantComm)
			}
		})
	}
}

// blockingTransactor's End waits for release: a transaction in flight.
type blockingTransactor struct {
	fakeTransactor
	entered, release chan struct{}
}

func (b *blockingTransactor) End(ctx context.Context, commit bool, md Metadata) (bool, error) {
	close(b.entered)
	<-b.release
	return b.fakeTransactor.End(ctx, commit, md)
}

// TestPipelinedCommitInFlight: while End runs, the Machine stays ending
// (no Begin, Commit or Abort), no participant is applied, Finish before
// End returned is refused, and the offsets committed are those captured
// at Seal, whatever the Transactor reports later.
func TestPipelinedCommitInFlight(t *testing.T) {
	var log []string
	sess := &blockingTransactor{fakeTransactor: fakeTransactor{log: &log, committed: true, pending: offsets(10)},
		entered: make(chan struct{}), release: make(chan struct{})}
	parts := []Participant{fakeParticipant{name: "t0", log: &log}}
	c := NewCommitter(sess, func() []Participant { return parts })
	ctx := context.Background()
	if err := c.Begin(); err != nil {
		t.Fatal(err)
	}
	e, _, err := c.Seal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Finish(ctx, e); !errors.Is(err, ErrPhase) {
		t.Fatalf("Finish before End = %v, want ErrPhase", err)
	}
	sess.pending = offsets(20) // the loop consumed more meanwhile
	done := make(chan struct{})
	go func() { e.End(ctx); close(done) }()
	<-sess.entered
	if c.Phase() != PhaseEnding || c.Open() {
		t.Fatalf("phase in flight = %s", c.Phase())
	}
	if err := c.Begin(); !errors.Is(err, ErrPhase) {
		t.Fatalf("Begin in flight = %v, want ErrPhase", err)
	}
	if _, err := c.Abort(ctx); !errors.Is(err, ErrPhase) {
		t.Fatalf("Abort in flight = %v, want ErrPhase", err)
	}
	if strings.Contains(strings.Join(log, " "), "apply") {
		t.Fatalf("applied before End returned: %v", log)
	}
	close(sess.release)
	<-done
	st, err := c.Finish(ctx, e)
	if err != nil || !st.Committed {
		t.Fatalf("Finish = %+v, %v", st, err)
	}
	if got := st.Offsets["carts"][0]; got != 10 {
		t.Fatalf("committed offsets = %v, want those of Seal (10)", st.Offsets)
	}
	if c.Phase() != PhaseIdle {
		t.Fatalf("phase after Finish = %s", c.Phase())
	}
	if err := c.Begin(); err != nil {
		t.Fatalf("Begin after Finish: %v", err)
	}
}
