package txn

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupTransactor adapts kgo.GroupTransactSession (EOS v2: one producer for all
// of the process's tasks, offsets committed in the transaction with group
// metadata, aborts on rebalance) to Transactor.
type GroupTransactor struct {
	s     *kgo.GroupTransactSession
	group string
}

// NewGroupTransactor wraps an existing session; group is its consumer group.
func NewGroupTransactor(s *kgo.GroupTransactSession, group string) *GroupTransactor {
	return &GroupTransactor{s: s, group: group}
}

// Client is the session's client, for producing and polling.
func (k *GroupTransactor) Client() *kgo.Client { return k.s.Client() }

func (k *GroupTransactor) Begin() error { return k.s.Begin() }

func (k *GroupTransactor) End(ctx context.Context, commit bool, md Metadata) (bool, error) {
	var rc *recommit
	if commit {
		rc = emptyRecommit(k.s.Client(), md)
	}
	committed, err := k.s.End(withOffsetMetadata(ctx, md, rc), kgo.TransactionEndTry(commit))
	switch {
	case err == nil:
	case isFenced(err):
		err = fmt.Errorf("%w: %v", ErrFenced, err)
	default:
		// An EndTxn whose outcome kgo could not confirm may have left the
		// transaction open broker-side, its offsets pending: the stable
		// offset fetch that resolves the outcome would wait until the
		// broker times it out. kgo's documented heal, ending again with
		// TryAbort, reloads the producer id, whose epoch bump aborts what
		// is still open (a no-op after a commit that landed, or when
		// nothing is open).
		if aerr := k.s.Client().EndTransaction(ctx, kgo.TryAbort); aerr != nil {
			err = fmt.Errorf("%w (then abort: %v)", err, aerr)
		}
	}
	return committed, err
}

// Pending lists only partitions whose offset advances: a partition that was
// assigned but not consumed from cannot tell a committed outcome from an
// aborted one.
func (k *GroupTransactor) Pending() Offsets {
	cl := k.s.Client()
	before := cl.CommittedOffsets()
	out := Offsets{}
	for topic, ps := range cl.UncommittedOffsets() {
		for p, eo := range ps {
			if prev, ok := before[topic][p]; ok && prev.Offset == eo.Offset {
				continue
			}
			if out[topic] == nil {
				out[topic] = map[int32]int64{}
			}
			out[topic][p] = eo.Offset
		}
	}
	return out
}

func (k *GroupTransactor) Committed(ctx context.Context, of Offsets) (Offsets, error) {
	return committedOffsets(ctx, k.s.Client(), k.group, of)
}

// committedOffsets reads the stable committed offsets of of's partitions.
func committedOffsets(ctx context.Context, cl *kgo.Client, group string, of Offsets) (Offsets, error) {
	parts := Partitions{}
	for topic, ps := range of {
		for p := range ps {
			parts[topic] = append(parts[topic], p)
		}
	}
	got, err := fetchStable(ctx, cl, group, parts)
	if err != nil {
		return nil, err
	}
	out := Offsets{}
	for topic, ps := range got {
		out[topic] = map[int32]int64{}
		for p, co := range ps {
			out[topic][p] = co.offset
		}
	}
	return out, nil
}

// isFenced reports the errors that mean a newer producer (same
// transactional id) or group generation owns the work.
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) ||
		errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.FencedInstanceID)
}

// AtLeastOnceTransactor runs the same commit path without transactions for
// users who accept duplicates after a crash: End flushes, then commits the
// consumed offsets; outputs are visible as soon as they are produced.
type AtLeastOnceTransactor struct {
	cl    *kgo.Client
	group string
}

// NewAtLeastOnceTransactor wraps a group-consuming, non-transactional client
// created with kgo.DisableAutoCommit.
func NewAtLeastOnceTransactor(cl *kgo.Client, group string) *AtLeastOnceTransactor {
	return &AtLeastOnceTransactor{cl: cl, group: group}
}

func (a *AtLeastOnceTransactor) Begin() error { return nil }

func (a *AtLeastOnceTransactor) End(ctx context.Context, commit bool, md Metadata) (bool, error) {
	if !commit {
		// Produced records cannot be taken back; rewinding makes the
		// aborted work run again (at least once).
		return false, nil
	}
	if err := a.cl.Flush(ctx); err != nil {
		return false, fmt.Errorf("txn: flush: %w", err)
	}
	if err := a.cl.CommitUncommittedOffsets(withOffsetMetadata(ctx, md, nil)); err != nil {
		return false, fmt.Errorf("txn: commit offsets: %w", err)
	}
	return true, nil
}

func (a *AtLeastOnceTransactor) Pending() Offsets {
	out := Offsets{}
	for topic, ps := range a.cl.UncommittedOffsets() {
		out[topic] = map[int32]int64{}
		for p, eo := range ps {
			out[topic][p] = eo.Offset
		}
	}
	return out
}

func (a *AtLeastOnceTransactor) Committed(ctx context.Context, of Offsets) (Offsets, error) {
	return committedOffsets(ctx, a.cl, a.group, of)
}

// withOffsetMetadata returns a ctx under which the offsets End commits
// carry md and respect the OffsetLimit of ctx (WithOffsetLimit), and a
// transactional commit with no offsets gets rc's (recommit.go). franz-go
// takes both through request hooks on the context, for both the
// transactional offset commit and the at-least-once one (one hook each: a
// second would replace the first); the hooks run under the client's
// transaction lock, so they only look things up.
func withOffsetMetadata(ctx context.Context, md Metadata, rc *recommit) context.Context {
	lim := offsetLimitOf(ctx)
	if len(md) == 0 && len(lim) == 0 {
		return ctx
	}
	set := func(topic string, partition int32, dst **string) {
		if v, ok := md[topic][partition]; ok {
			*dst = &v
		}
	}
	ctx = kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
		rc.addTo(req)
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				p := &req.Topics[i].Partitions[j]
				set(req.Topics[i].Topic, p.Partition, &p.Metadata)
				lim.Lower(req.Topics[i].Topic, p.Partition, &p.Offset, &p.LeaderEpoch)
			}
		}
		return nil
	})
	return kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				p := &req.Topics[i].Partitions[j]
				set(req.Topics[i].Topic, p.Partition, &p.Metadata)
				lim.Lower(req.Topics[i].Topic, p.Partition, &p.Offset, &p.LeaderEpoch)
			}
		}
		return nil
	})
}
