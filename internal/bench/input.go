package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// keyspace draws Zipf-skewed keys, like marketplace SKUs and users: a few
// hot keys and a long tail.
type keyspace struct {
	zipf *rand.Zipf
	keys [][]byte
	seq  bool // every key in turn instead: exactly n distinct keys per n records
	i    int
}

func newKeyspace(seed uint64, n int) *keyspace {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ks := &keyspace{zipf: rand.NewZipf(r, 1.1, 4, uint64(n-1)), keys: make([][]byte, n)}
	for i := range ks.keys {
		ks.keys[i] = fmt.Appendf(nil, "sku-%06d", i)
	}
	return ks
}

func (k *keyspace) next() []byte {
	if k.seq {
		k.i++
		return k.keys[(k.i-1)%len(k.keys)]
	}
	return k.keys[k.zipf.Uint64()]
}

var payload = []byte(strings.Repeat("x", 90))

func inputRecord(job Job, key []byte, seq int, ts time.Time) *kgo.Record {
	return &kgo.Record{Topic: job.Input, Key: key, Value: fmt.Appendf(nil, "%d:%s", seq, payload), Timestamp: ts}
}

// produceTable writes one inventory row per key for the join workload.
func produceTable(ctx context.Context, cl *kgo.Client, job Job, keys int) error {
	ks := newKeyspace(1, keys)
	recs := make([]*kgo.Record, 0, keys)
	for i, k := range ks.keys {
		recs = append(recs, &kgo.Record{Topic: job.Table, Key: k, Value: fmt.Appendf(nil, "stock=%d", 100+i%50)})
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// preProduce writes n input records as fast as the broker takes them.
func preProduce(ctx context.Context, cl *kgo.Client, job Job, n, keys int, sequential bool) error {
	ks := newKeyspace(7, keys)
	ks.seq = sequential
	errs := make(chan error, 1)
	now := time.Now()
	for i := range n {
		cl.Produce(ctx, inputRecord(job, ks.next(), i, now), func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errs:
		return fmt.Errorf("bench: pre-produce: %w", err)
	default:
		return nil
	}
}

// drive produces at rate records/s until ctx is done, stamping each record
// with its send time, and returns how many it sent.
func drive(ctx context.Context, cl *kgo.Client, job Job, rate float64, keys int) (int, error) {
	ks := newKeyspace(11, keys)
	const tick = 5 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	start := time.Now()
	sent := 0
	var perr error
	for {
		select {
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = cl.Flush(flushCtx)
			return sent, perr
		case now := <-t.C:
			due := int(rate * now.Sub(start).Seconds())
			for ; sent < due; sent++ {
				cl.Produce(ctx, inputRecord(job, ks.next(), sent, time.Now()), func(_ *kgo.Record, err error) {
					if err != nil && perr == nil && ctx.Err() == nil {
						perr = err
					}
				})
			}
		}
	}
}
