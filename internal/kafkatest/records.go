package kafkatest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Produce writes records synchronously to their Topic and Partition with a
// non-transactional client and
// fails the test on the first error.
func Produce(t testing.TB, records ...*kgo.Record) {
	t.Helper()
	cl := Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("kafkatest: produce %d records: %v", len(records), err)
	}
}

// ConsumeUntil reads topic from the start with read_committed isolation until
// done returns true for everything read so far, and returns those records.
// It fails the test after timeout with a summary of what it did see.
func ConsumeUntil(t testing.TB, topic string, timeout time.Duration, done func([]*kgo.Record) bool) []*kgo.Record {
	t.Helper()
	c := newReader(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var got []*kgo.Record
	for !done(got) {
		if !c.poll(t, ctx, &got) {
			t.Fatalf("kafkatest: topic %s: condition not met after %s; read %d records:%s",
				topic, timeout, len(got), Summary(got, 10))
		}
	}
	return got
}

// ConsumeExactly reads n records from topic with read_committed isolation,
// then keeps reading for quiet and fails if any further record arrives: the
// check for "exactly these outputs, no duplicates".
func ConsumeExactly(t testing.TB, topic string, n int, timeout, quiet time.Duration) []*kgo.Record {
	t.Helper()
	c := newReader(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		if !c.poll(t, ctx, &got) {
			t.Fatalf("kafkatest: topic %s: want %d records, read %d after %s:%s",
				topic, n, len(got), timeout, Summary(got, 10))
		}
	}
	qctx, qcancel := context.WithTimeout(context.Background(), quiet)
	defer qcancel()
	for c.poll(t, qctx, &got) {
	}
	if len(got) != n {
		t.Fatalf("kafkatest: topic %s: want exactly %d records, got %d:%s", topic, n, len(got), Summary(got[n:], 10))
	}
	return got
}

type reader struct{ cl *kgo.Client }

func newReader(t testing.TB, topic string) reader {
	return reader{Client(t,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)}
}

// poll appends one fetch's records; false once ctx is done.
func (r reader) poll(t testing.TB, ctx context.Context, got *[]*kgo.Record) bool {
	t.Helper()
	fs := r.cl.PollFetches(ctx)
	fs.EachRecord(func(rec *kgo.Record) { *got = append(*got, rec) })
	if ctx.Err() != nil {
		return false
	}
	fs.EachError(func(tp string, p int32, err error) {
		t.Fatalf("kafkatest: fetch %s/%d: %v", tp, p, err)
	})
	return true
}

// Summary renders up to max records as partition/offset key=value, for
// failure messages.
func Summary(rs []*kgo.Record, max int) string {
	var b strings.Builder
	for i, r := range rs {
		if i == max {
			fmt.Fprintf(&b, " … (%d more)", len(rs)-max)
			break
		}
		fmt.Fprintf(&b, " [%d@%d %q=%q]", r.Partition, r.Offset, r.Key, r.Value)
	}
	return b.String()
}
