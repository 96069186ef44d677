package changelog

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

// A paced restore hands its work to the pace function between batches,
// waits as it says, and still restores every record.
func TestKafkaRestoreIsPaced(t *testing.T) {
	e := newKafkaEnv(t, store.Spec{Name: "stock", Kind: store.KindKeyValue, Logged: true}, 1)
	n := e.start(t.TempDir())
	const keys = 40_000
	want := map[string]string{}
	for i := range keys {
		k, v := fmt.Sprintf("sku%06d", i), fmt.Sprintf("%0100d", i)
		want[k] = v
		mustPut(t, n.kv, k, v)
		if i%10_000 == 9_999 {
			n.commit()
		}
	}

	var mu sync.Mutex
	var calls int
	var busy, slept time.Duration
	sleep := SleepPacer(0.5, func() bool { return true })
	e.pace = func(ctx context.Context, b time.Duration) error {
		start := time.Now()
		err := sleep(ctx, b)
		mu.Lock()
		calls, busy, slept = calls+1, busy+b, slept+time.Since(start)
		mu.Unlock()
		return err
	}
	start := time.Now()
	fresh := e.start(t.TempDir())
	took := time.Since(start)
	if fresh.res.Records != keys {
		t.Fatalf("paced restore applied %d records, want %d", fresh.res.Records, keys)
	}
	equalMaps(t, "restored under pacing", contents(t, fresh.kv), want)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("restore of %d records took %v: paced %d times, %v of work, %v asleep", keys, took.Round(time.Millisecond), calls, busy.Round(time.Millisecond), slept.Round(time.Millisecond))
	if calls == 0 || busy < paceEvery {
		t.Fatalf("pace called %d times with %v of work: want the restore's work reported", calls, busy)
	}
	// At share 0.5 each stretch of work is followed by as long a sleep.
	if slept < busy*9/10 {
		t.Fatalf("slept %v after %v of work at share 0.5", slept, busy)
	}
}
