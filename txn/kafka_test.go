package txn_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/twmb/franz-go/pkg/kerr"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/txn"
)

type overlay struct {
	applied, discarded int
	md                 txn.Metadata // what Prepare names for the offsets
}

func (o *overlay) Prepare(context.Context) (txn.Metadata, error) { return o.md, nil }
func (o *overlay) Apply(context.Context) error                   { o.applied++; return nil }
func (o *overlay) Discard()                                      { o.discarded++ }

func newSession(t *testing.T, in, out, group, txnID string, opts ...kgo.Opt) *txn.GroupTransactor {
	t.Helper()
	s, err := kgo.NewGroupTransactSession(append([]kgo.Opt{
		kgo.SeedBrokers(kafkatest.Brokers(t)...),
		kgo.TransactionalID(txnID),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(out),
	}, opts...)...)
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	t.Cleanup(s.Close)
	return txn.NewGroupTransactor(s, group)
}

// pollN polls until n records arrived.
func pollN(t *testing.T, ctx context.Context, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollRecords(ctx, n-len(got))
		if ctx.Err() != nil {
			t.Fatalf("polled %d of %d records", len(got), n)
		}
		got = append(got, fs.Records()...)
	}
	return got
}

func TestAbortDiscardsRewindsAndHidesOutputs(t *testing.T) {
	in := kafkatest.NewTopic(t, 1, nil)
	out := kafkatest.NewTopic(t, 1, nil)
	var recs []*kgo.Record
	for i := range 4 {
		recs = append(recs, &kgo.Record{Topic: in, Value: fmt.Appendf(nil, "in-%d", i)})
	}
	kafkatest.Produce(t, recs...)
	group := kafkatest.UniqueName(t, "g")
	sess := newSession(t, in, out, group, kafkatest.UniqueName(t, "txn"))
	ov := &overlay{md: txn.Metadata{in: {0: "resume-here"}}}
	c := txn.NewCommitter(sess, func() []txn.Participant { return []txn.Participant{ov} })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	process := func() []string {
		if err := c.Begin(); err != nil {
			t.Fatal(err)
		}
		var vals []string
		for _, r := range pollN(t, ctx, sess.Client(), 4) {
			vals = append(vals, string(r.Value))
			sess.Client().Produce(ctx, kgo.SliceRecord(append([]byte("out-"), r.Value...)), nil)
		}
		return vals
	}
	first := process()
	st, err := c.Abort(ctx)
	if err != nil || st.Committed || ov.discarded != 1 || ov.applied != 0 {
		t.Fatalf("abort: stats %+v err %v overlay %+v", st, err, ov)
	}
	// The session rewound to the committed offsets: the same inputs again.
	second := process()
	if fmt.Sprint(first) != fmt.Sprint(second) {
		t.Fatalf("after abort the inputs were %v, want the same %v again", second, first)
	}
	st, err = c.Commit(ctx)
	if err != nil || !st.Committed || ov.applied != 1 {
		t.Fatalf("commit: stats %+v err %v overlay %+v", st, err, ov)
	}
	if got := st.Offsets[in][0]; got != 4 {
		t.Fatalf("committed offset %d, want 4", got)
	}
	// Read at once, while the commit's markers may still be on their way:
	// a stable read of the named partition says so until they land (asked
	// for all of the group's offsets, the broker would leave it out).
	var md map[string]map[int32]string
	for {
		md, err = txn.CommittedMetadata(ctx, sess.Client(), group, txn.Partitions{in: {0}})
		if !errors.Is(err, kerr.UnstableOffsetCommit) || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || md[in][0] != "resume-here" {
		t.Fatalf("committed metadata %v (err %v), want the participant's %q with the offset", md, err, "resume-here")
	}
	outs := kafkatest.ConsumeExactly(t, out, 4, kafkatest.Timeout, time.Second)
	var vals []string
	for _, r := range outs {
		vals = append(vals, string(r.Value))
	}
	sort.Strings(vals)
	if fmt.Sprint(vals) != "[out-in-0 out-in-1 out-in-2 out-in-3]" {
		t.Fatalf("outputs %v: the aborted copy leaked or a record is missing", vals)
	}
}

// TestZombieWithSameTransactionalIDIsFenced: a second producer with the same
// transactional id fences the first, whose commit must then fail with
// ErrFenced without applying anything.
func TestZombieWithSameTransactionalIDIsFenced(t *testing.T) {
	in := kafkatest.NewTopic(t, 1, nil)
	out := kafkatest.NewTopic(t, 1, nil)
	kafkatest.Produce(t, &kgo.Record{Topic: in, Value: []byte("x")})
	group, id := kafkatest.UniqueName(t, "g"), kafkatest.UniqueName(t, "txn")
	zombie := newSession(t, in, out, group, id)
	ov := &overlay{}
	c := txn.NewCommitter(zombie, func() []txn.Participant { return []txn.Participant{ov} })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Begin(); err != nil {
		t.Fatal(err)
	}
	pollN(t, ctx, zombie.Client(), 1)
	if err := zombie.Client().ProduceSync(ctx, kgo.StringRecord("zombie")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// The successor initialises the same transactional id: this bumps the
	// producer epoch and aborts the zombie's open transaction.
	successor := kafkatest.Client(t, kgo.TransactionalID(id), kgo.DefaultProduceTopic(out))
	if err := successor.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := successor.ProduceSync(ctx, kgo.StringRecord("successor")).FirstErr(); err != nil {
		t.Fatalf("successor produce: %v", err)
	}
	if err := successor.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("successor commit: %v", err)
	}

	_, err := c.Commit(ctx)
	if !errors.Is(err, txn.ErrFenced) {
		t.Fatalf("zombie commit: err = %v, want ErrFenced", err)
	}
	if ov.applied != 0 {
		t.Fatalf("zombie applied its overlay")
	}
	got := kafkatest.ConsumeExactly(t, out, 1, kafkatest.Timeout, time.Second)
	if string(got[0].Value) != "successor" {
		t.Fatalf("visible output %q, want only the successor's", got[0].Value)
	}
}

// commitInputs runs one transaction that consumes n inputs and produces
// "out-" and each input's value.
func commitInputs(t *testing.T, ctx context.Context, c *txn.Committer, sess *txn.GroupTransactor, n int) {
	t.Helper()
	if err := c.Begin(); err != nil {
		t.Fatal(err)
	}
	for _, r := range pollN(t, ctx, sess.Client(), n) {
		sess.Client().Produce(ctx, kgo.SliceRecord(append([]byte("out-"), r.Value...)), nil)
	}
	if st, err := c.Commit(ctx); err != nil || !st.Committed {
		t.Fatalf("commit with inputs: stats %+v err %v", st, err)
	}
}

// heldLocks counts franz-go's log lines saying that End, having committed,
// holds the session's lock for another 500 ms (its path for brokers
// without KIP-447).
type heldLocks struct{ n atomic.Int32 }

func (h *heldLocks) Level() kgo.LogLevel { return kgo.LogLevelDebug }
func (h *heldLocks) Log(_ kgo.LogLevel, msg string, _ ...any) {
	if strings.HasPrefix(msg, "sleeping 500ms before allowing a rebalance") {
		h.n.Add(1)
	}
}

// TestEmptyTransactionDoesNotHoldTheNextCommit: a transaction that consumed
// nothing (outputs of a punctuation or a frontier record only) commits
// without franz-go's 500 ms pre-KIP-447 hold, which delayed the next
// commit and every output behind it, and the offsets stay where they were,
// with the metadata the participants give now.
func TestEmptyTransactionDoesNotHoldTheNextCommit(t *testing.T) {
	in := kafkatest.NewTopic(t, 1, nil)
	out := kafkatest.NewTopic(t, 1, nil)
	kafkatest.Produce(t, &kgo.Record{Topic: in, Value: []byte("a")}, &kgo.Record{Topic: in, Value: []byte("b")})
	group := kafkatest.UniqueName(t, "g")
	held := &heldLocks{}
	sess := newSession(t, in, out, group, kafkatest.UniqueName(t, "txn"), kgo.WithLogger(held))
	ov := &overlay{md: txn.Metadata{in: {0: "after-inputs"}}}
	c := txn.NewCommitter(sess, func() []txn.Participant { return []txn.Participant{ov} })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	commitInputs(t, ctx, c, sess, 2)
	// Two transactions with an output and no input, as wall-clock
	// punctuation makes them.
	for i, md := range []string{"punctuated-1", "punctuated-2"} {
		ov.md = txn.Metadata{in: {0: md}}
		if err := c.Begin(); err != nil {
			t.Fatal(err)
		}
		sess.Client().Produce(ctx, kgo.StringRecord(md), nil)
		st, err := c.Commit(ctx)
		if err != nil || !st.Committed {
			t.Fatalf("commit %d without inputs: stats %+v err %v", i+1, st, err)
		}
	}
	if n := held.n.Load(); n > 0 {
		t.Fatalf("franz-go held the session lock for 500 ms after %d of the commits: an empty transaction still looks pre-KIP-447", n)
	}
	got, err := txn.CommittedMetadata(ctx, sess.Client(), group, txn.Partitions{in: {0}})
	for errors.Is(err, kerr.UnstableOffsetCommit) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		got, err = txn.CommittedMetadata(ctx, sess.Client(), group, txn.Partitions{in: {0}})
	}
	if err != nil || got[in][0] != "punctuated-2" {
		t.Fatalf("committed metadata %v (err %v), want the last commit's %q", got, err, "punctuated-2")
	}
	if offs := kafkatest.Committed(t, group, in); offs[0] != 2 {
		t.Fatalf("committed offset %d after the empty transactions, want 2 (unchanged)", offs[0])
	}
	outs := kafkatest.ConsumeExactly(t, out, 4, kafkatest.Timeout, time.Second)
	if v := string(outs[3].Value); v != "punctuated-2" {
		t.Fatalf("last output %q, want the second empty transaction's", v)
	}
}

// TestEmptyTransactionOfARemovedMemberAborts: a member removed from the
// group (as the peer detector removes a dead instance's) that still
// commits a transaction without input must not make its outputs visible:
// the partition the new owner restores from could already be someone
// else's. Its re-commit carries the lost membership, and the broker's
// refusal aborts the transaction. Without the re-commit there is no
// TxnOffsetCommit to refuse, and the transaction committed.
func TestEmptyTransactionOfARemovedMemberAborts(t *testing.T) {
	in := kafkatest.NewTopic(t, 1, nil)
	out := kafkatest.NewTopic(t, 1, nil)
	kafkatest.Produce(t, &kgo.Record{Topic: in, Value: []byte("a")})
	group := kafkatest.UniqueName(t, "g")
	// Slow heartbeats: the member must not learn of its removal (and
	// abort through its revocation callback) before its commit does.
	sess := newSession(t, in, out, group, kafkatest.UniqueName(t, "txn"), kgo.InstanceID("member-a"),
		kgo.SessionTimeout(30*time.Second), kgo.HeartbeatInterval(10*time.Second))
	ov := &overlay{md: txn.Metadata{in: {0: "resume"}}}
	c := txn.NewCommitter(sess, func() []txn.Participant { return []txn.Participant{ov} })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	commitInputs(t, ctx, c, sess, 1)

	if err := c.Begin(); err != nil {
		t.Fatal(err)
	}
	sess.Client().Produce(ctx, kgo.StringRecord("zombie-punctuation"), nil)
	left, err := kafkatest.Admin(t).LeaveGroup(ctx, kadm.LeaveGroup(group).InstanceIDs("member-a"))
	if err != nil || left.Error() != nil {
		t.Fatalf("remove the member: %v %v", err, left.Error())
	}
	st, err := c.Commit(ctx)
	if st.Committed {
		t.Fatalf("a removed member committed a transaction without input (err %v)", err)
	}
	if ov.discarded != 1 {
		t.Fatalf("participant discarded %d times, want once for the aborted transaction", ov.discarded)
	}
	outs := kafkatest.ConsumeExactly(t, out, 1, kafkatest.Timeout, time.Second)
	if v := string(outs[0].Value); v != "out-a" {
		t.Fatalf("visible output %q, want only the first transaction's", v)
	}
}
