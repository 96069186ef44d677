package txn

import (
	"context"
	"errors"
	"fmt"
	"github.com/twmb/franz-go/pkg/kerr"
	"sort"
	"strings"
	"testing"
	"time"
)

type fakeTransactor struct {
	log       *[]string
	committed bool
	endErr    error
	pending   Offsets
	stable    Offsets
	stableErr error
	unstable  int     // answers UNSTABLE_OFFSET_COMMIT this many times first
	transient []error // then answers these, one per call
}

func (f *fakeTransactor) Begin() error { *f.log = append(*f.log, "begin"); return nil }
func (f *fakeTransactor) End(_ context.Context, commit bool, md Metadata) (bool, error) {
	*f.log = append(*f.log, fmt.Sprintf("end(commit=%v%s)", commit, renderMetadata(md)))
	return f.committed && commit, f.endErr
}
func (f *fakeTransactor) Pending() Offsets { return f.pending }
func (f *fakeTransactor) Committed(context.Context, Offsets) (Offsets, error) {
	*f.log = append(*f.log, "fetch-stable")
	if f.unstable > 0 {
		f.unstable--
		return nil, fmt.Errorf("committed offset carts/0: %w", kerr.UnstableOffsetCommit)
	}
	if len(f.transient) > 0 {
		err := f.transient[0]
		f.transient = f.transient[1:]
		return nil, fmt.Errorf("fetch committed offsets: %w", err)
	}
	return f.stable, f.stableErr
}

type fakeParticipant struct {
	name       string
	log        *[]string
	applyErr   error
	prepareErr error
	md         Metadata
}

func (p fakeParticipant) Prepare(context.Context) (Metadata, error) {
	return p.md, p.prepareErr
}

func (p fakeParticipant) Apply(context.Context) error {
	*p.log = append(*p.log, "apply:"+p.name)
	return p.applyErr
}
func (p fakeParticipant) Discard() { *p.log = append(*p.log, "discard:"+p.name) }

// renderMetadata is md as ",md=topic/p:v;..." in a stable order, or "".
func renderMetadata(md Metadata) string {
	var parts []string
	for topic, ps := range md {
		for p, v := range ps {
			parts = append(parts, fmt.Sprintf("%s/%d:%s", topic, p, v))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	sort.Strings(parts)
	return ",md=" + strings.Join(parts, ";")
}

var errPrepareForTest = errors.New("changelog flush failed")

func offsets(at int64) Offsets { return Offsets{"carts": {0: at, 1: at + 1}} }

// committerCase is one case of the commit protocol, run through Commit
// and through the pipelined Seal, End, Finish (pipeline_test.go).
type committerCase struct {
	name     string
	sess     fakeTransactor
	applyErr error
	abort    bool
	wantLog  string
	wantErr  error // nil, or a sentinel the error must wrap
	anyErr   bool
	wantComm bool
	// prepare: the first participant's Prepare error; metadata is
	// what each participant names for the offsets.
	prepareErr error
	withMD     bool
}

// committer builds the case's committer over two fake participants, t0
// failing as the case says, every step and fault appended to log.
func (tt *committerCase) committer(log *[]string) *Committer {
	tt.sess.log = log
	parts := []Participant{
		fakeParticipant{name: "t0", log: log, applyErr: tt.applyErr, prepareErr: tt.prepareErr},
		fakeParticipant{name: "t1", log: log},
	}
	if tt.withMD {
		parts[0] = fakeParticipant{name: "t0", log: log, md: Metadata{"carts": {0: "t0"}}}
		parts[1] = fakeParticipant{name: "t1", log: log, md: Metadata{"carts": {1: "t1"}}}
	}
	return NewCommitter(&tt.sess, func() []Participant { return parts },
		WithFaultHook(func(p Point) { *log = append(*log, fmt.Sprintf("fault:%d", p)) }),
		WithClock(func() time.Time { return time.Unix(0, 0) }))
}

func committerCases() []committerCase {
	return []committerCase{
		{name: "the participants' metadata goes with the offsets, merged",
			sess:    fakeTransactor{committed: true, pending: offsets(10)},
			withMD:  true,
			wantLog: "begin fault:3 fault:0 end(commit=true,md=carts/0:t0;carts/1:t1) fault:1 apply:t0 apply:t1 fault:2", wantComm: true},
		{name: "a failed prepare aborts and discards every participant",
			sess: fakeTransactor{committed: true, pending: offsets(10)}, prepareErr: errPrepareForTest,
			wantLog: "begin fault:3 fault:0 end(commit=false) discard:t0 discard:t1", wantErr: errPrepareForTest},
		{name: "commit applies every participant after EndTxn, then faults in order",
			sess:    fakeTransactor{committed: true, pending: offsets(10)},
			wantLog: "begin fault:3 fault:0 end(commit=true) fault:1 apply:t0 apply:t1 fault:2", wantComm: true},
		{name: "an abort discards every participant",
			sess: fakeTransactor{pending: offsets(10)}, abort: true,
			wantLog: "begin fault:0 end(commit=false) discard:t0 discard:t1"},
		{name: "a session abort at commit (rebalance) discards",
			sess:    fakeTransactor{committed: false, pending: offsets(10)},
			wantLog: "begin fault:3 fault:0 end(commit=true) discard:t0 discard:t1"},
		{name: "an End error whose offsets landed is applied, then the session restarts",
			sess:    fakeTransactor{endErr: errors.New("timeout"), pending: offsets(10), stable: offsets(10)},
			wantLog: "begin fault:3 fault:0 end(commit=true) fetch-stable fault:1 apply:t0 apply:t1 fault:2", anyErr: true, wantComm: true},
		{name: "an End error whose markers are still being written is resolved once they land",
			sess:    fakeTransactor{endErr: errors.New("timeout"), pending: offsets(10), stable: offsets(10), unstable: 2},
			wantLog: "begin fault:3 fault:0 end(commit=true) fetch-stable fetch-stable fetch-stable fault:1 apply:t0 apply:t1 fault:2", anyErr: true, wantComm: true},
		{name: "an End error whose outcome lookup meets a coordinator loading or moving is resolved once it answers",
			sess: fakeTransactor{endErr: errors.New("timeout"), pending: offsets(10), stable: offsets(10),
				transient: []error{kerr.CoordinatorLoadInProgress, kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.RequestTimedOut}},
			wantLog: "begin fault:3 fault:0 end(commit=true) fetch-stable fetch-stable fetch-stable fetch-stable fetch-stable fault:1 apply:t0 apply:t1 fault:2", anyErr: true, wantComm: true},
		{name: "an End error whose offsets did not land is discarded",
			sess:    fakeTransactor{endErr: errors.New("timeout"), pending: offsets(10), stable: offsets(4)},
			wantLog: "begin fault:3 fault:0 end(commit=true) fetch-stable discard:t0 discard:t1", anyErr: true},
		{name: "an End error that cannot be resolved neither applies nor discards",
			sess:    fakeTransactor{endErr: errors.New("timeout"), pending: offsets(10), stableErr: errors.New("down")},
			wantLog: "begin fault:3 fault:0 end(commit=true) fetch-stable", wantErr: ErrOutcomeUnknown},
		{name: "a transaction without input offsets cannot be resolved",
			sess:    fakeTransactor{endErr: errors.New("timeout")},
			wantLog: "begin fault:3 fault:0 end(commit=true)", wantErr: ErrOutcomeUnknown},
		{name: "a fenced session neither applies nor discards",
			sess:    fakeTransactor{endErr: fmt.Errorf("%w: producer fenced", ErrFenced), pending: offsets(10)},
			wantLog: "begin fault:3 fault:0 end(commit=true)", wantErr: ErrFenced},
		{name: "an Apply failure after commit asks for a restart",
			sess: fakeTransactor{committed: true, pending: offsets(10)}, applyErr: errors.New("disk full"),
			wantLog: "begin fault:3 fault:0 end(commit=true) fault:1 apply:t0", wantErr: ErrOutcomeUnknown, wantComm: true},
	}
}

func TestCommitterFollowsTheProtocol(t *testing.T) {
	tests := committerCases()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log []string
			c := tt.committer(&log)
			if err := c.Begin(); err != nil {
				t.Fatal(err)
			}
			var st Stats
			var err error
			if tt.abort {
				st, err = c.Abort(context.Background())
			} else {
				st, err = c.Commit(context.Background())
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

func TestOutcomeFromStableOffsets(t *testing.T) {
	tests := []struct {
		name             string
		committed        Offsets
		wantComm, wantOK bool
	}{
		{"all partitions at the pending offsets: committed", Offsets{"a": {0: 5, 1: 7}}, true, true},
		{"all partitions behind: aborted", Offsets{"a": {0: 2, 1: 3}}, false, true},
		{"nothing committed yet: aborted", Offsets{}, false, true},
		{"some at, some behind: unknown", Offsets{"a": {0: 5, 1: 3}}, false, false},
		{"ahead of pending (another member committed since): unknown", Offsets{"a": {0: 9, 1: 9}}, false, false},
	}
	pending := Offsets{"a": {0: 5, 1: 7}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := outcome(pending, tt.committed)
			if c != tt.wantComm || ok != tt.wantOK {
				t.Fatalf("outcome = (%v, %v), want (%v, %v)", c, ok, tt.wantComm, tt.wantOK)
			}
		})
	}
}
