package processor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestQueriesDuringRebalancesWithThreads queries every key of a finished
// count on two two-thread instances while the second one joins and then
// leaves: each answer must be the key's committed count, or say where the
// key lives (ErrNotLocal), that it is restoring (ErrRestoring) or owned by
// no one (ErrNoOwner). "Not found" for a counted key, or another count,
// is a lie. Run with -race: the queries read stores whose tasks close and
// move between threads and instances meanwhile.
func TestQueriesDuringRebalancesWithThreads(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 4, nil), kafkatest.NewTopic(t, 4, nil)
	topo := countTopology(t, kafkatest.UniqueName(t, "iq-rebalance"), in, out)
	want := produceKeysN(t, in, 0, 400, 16, 4)
	east, _ := runApp(t, topo, processor.WithInstanceID("east"), processor.WithThreads(2))
	checkCounts(t, out, want)
	deadline := time.Now().Add(60 * time.Second)
	for !east.Ready() || len(queryable(east)) != 4 {
		if time.Now().After(deadline) {
			t.Fatal("east does not answer for every partition after 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	var (
		mu       sync.Mutex
		problems []string
		answers  = map[string]int{}
	)
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 20 {
			problems = append(problems, s)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	ask := func(name string, app *processor.App) {
		defer wg.Done()
		for ctx.Err() == nil {
			for key, n := range want {
				res, err := app.Get(ctx, "counts", []byte(key))
				switch {
				case ctx.Err() != nil:
					return
				case err == nil && !res.Found:
					note(fmt.Sprintf("%s: %s not found (partition %d)", name, key, res.Partition))
				case err == nil && countOf(t, res.Entries[0].Value) != int64(n):
					note(fmt.Sprintf("%s: %s = %d, want %d", name, key, countOf(t, res.Entries[0].Value), n))
				case err == nil:
					mu.Lock()
					answers[name+" found"]++
					mu.Unlock()
				case errors.Is(err, processor.ErrNotLocal), errors.Is(err, processor.ErrRestoring), errors.Is(err, processor.ErrNoOwner):
					mu.Lock()
					answers[name+" "+errors.Unwrap(err).Error()]++
					mu.Unlock()
				default:
					note(fmt.Sprintf("%s: %s: %v", name, key, err))
				}
			}
		}
	}
	wg.Add(1)
	go ask("east", east)

	west, stopWest := runApp(t, topo, processor.WithInstanceID("west"), processor.WithThreads(2))
	wg.Add(1)
	go ask("west", west)
	// West takes some partitions (restoring them), then leaves again.
	deadline = time.Now().Add(60 * time.Second)
	for !west.Ready() || len(queryable(west)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("west got no running task in 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	stopWest()
	deadline = time.Now().Add(60 * time.Second)
	for !east.Ready() || len(queryable(east)) != 4 {
		if time.Now().After(deadline) {
			t.Fatal("east did not take every task back in 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	stop()
	wg.Wait()
	t.Logf("answers: %v", answers)
	for _, p := range problems {
		t.Error(p)
	}
}

// queryable is the partitions of the count's store app answers for.
func queryable(app *processor.App) []int32 {
	res, err := app.Range(context.Background(), "counts", nil, nil, 1000)
	if err != nil {
		return nil
	}
	return res.Partitions
}
