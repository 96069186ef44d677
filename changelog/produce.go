package changelog

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/store"
)

// Producer takes changelog records into the open transaction. Both
// *kgo.Client and *kgo.GroupTransactSession satisfy it. The client must
// honour Record.Partition (kgo.RecordPartitioner(kgo.ManualPartitioner())):
// a changelog record must land on its task's partition, and Flush fails if
// it does not.
type Producer interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
}

// ErrWrongPartition means the producer put a changelog record on another
// partition than its task's: its partitioner ignores Record.Partition.
var ErrWrongPartition = errors.New("changelog: record produced to the wrong partition")

// Flush produces one changelog record per uncommitted entry of the task's
// logged stores (the latest value, or a tombstone) and waits until every
// one is acknowledged. It returns the offsets to pass to Apply once the
// transaction commits. After Flush, writes fail with ErrFlushed until Apply
// or Discard.
//
// Producing at flush rather than per write collapses repeated updates of a
// key within a commit into one record, as Kafka Streams' record cache does.
func (t *TaskState) Flush(ctx context.Context) (ChangelogOffsets, error) {
	if t.closed {
		return nil, store.ErrClosed
	}
	if t.flushed {
		return nil, fmt.Errorf("changelog: flush partition %d: %w", t.cfg.Partition, ErrFlushed)
	}
	if t.sealed != nil {
		return nil, fmt.Errorf("changelog: flush partition %d: the previous transaction's sealed layer is not applied or discarded yet", t.cfg.Partition)
	}
	if t.pending.Len() > 0 {
		// Before anything of the transaction is produced: refused here,
		// the transaction aborts and nothing is committed past the state.
		if err := checkSpace(t.db.opts, t.db.dir, fmt.Sprintf("commit of partition %d, stores %v", t.cfg.Partition, t.storeNames())); err != nil {
			return nil, err
		}
	}
	t.flushed = true
	var (
		mu   sync.Mutex
		offs = ChangelogOffsets{}
		errs []error
		wg   sync.WaitGroup
	)
	promise := func(r *kgo.Record, err error) {
		defer wg.Done()
		mu.Lock()
		defer mu.Unlock()
		if err == nil && r.Partition != t.cfg.Partition {
			err = fmt.Errorf("%w: %d instead of %d", ErrWrongPartition, r.Partition, t.cfg.Partition)
		}
		if err != nil {
			if len(errs) < 3 {
				errs = append(errs, fmt.Errorf("produce to %s/%d: %w", r.Topic, t.cfg.Partition, err))
			}
			return
		}
		tp := TopicPartition{r.Topic, r.Partition}
		offs[tp] = max(offs[tp], r.Offset+1)
	}
	t.pending.Ascend(func(e *entry) bool {
		if !e.st.spec.Logged {
			return true
		}
		suffix := e.key[len(e.st.dprefix):]
		key := make([]byte, 1+len(suffix))
		key[0] = kindTag(e.st.spec.Kind)
		copy(key[1:], suffix)
		wg.Add(1)
		t.cfg.Producer.Produce(ctx, &kgo.Record{
			Topic: e.st.topic, Partition: t.cfg.Partition, Key: key, Value: e.value,
		}, promise)
		return true
	})
	t.positionRecords(func(r *kgo.Record) {
		wg.Add(1)
		t.cfg.Producer.Produce(ctx, r, promise)
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }() // ends when kgo calls every promise
	select {
	case <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("changelog: flush partition %d: %w", t.cfg.Partition, ctx.Err())
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("changelog: flush partition %d: %w", t.cfg.Partition, errors.Join(errs...))
	}
	return offs, nil
}
