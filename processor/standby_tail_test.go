package processor_test

import (
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestStandbyTailsWithoutNewClients runs two instances of a count
// application on 2 partitions with one standby replica each way, and feeds
// a steady input (100 records every 100 ms for 5 s) once each instance
// runs one active task and keeps the other as a caught-up standby. The
// standbys must follow the input with the clients they have: the two
// instances' tidemark_changelog_clients_created_total must not move during
// the steady input (a standby that restored round after round created two
// clients every 250 ms), their lags must be back near 0 after it, and the
// counts exactly once.
func TestStandbyTailsWithoutNewClients(t *testing.T) {
	t.Parallel()
	const keys = 200
	in, out, _, topo, want := countOnTwoPartitions(t, "standby-tail", 2000, keys)
	opts := func(id string) []processor.Option {
		return []processor.Option{processor.WithInstanceID(id), processor.WithStandbyReplicas(1),
			processor.WithHTTP("127.0.0.1:0"), sessionTimeout(6 * time.Second), fastCommits}
	}
	a, _ := runApp(t, topo, opts("a")...)
	kafkatest.ConsumeUntil(t, out, 45*time.Second, atLeast(2000))
	b, _ := runApp(t, topo, opts("b")...)
	split := func(v tasksView) bool {
		if len(v.Active) != 1 || len(v.Standby) != 1 {
			return false
		}
		s := v.Standby[0]
		return !s.WarmUp && s.Lag >= 0 && s.Lag <= 100
	}
	for _, app := range []*processor.App{a, b} {
		waitTasks(t, app, 60*time.Second, "one active task and one caught-up standby on each instance", split)
	}
	clients := func() float64 {
		return scrape(t, "http://"+a.HTTPAddr())["tidemark_changelog_clients_created_total"] +
			scrape(t, "http://"+b.HTTPAddr())["tidemark_changelog_clients_created_total"]
	}
	before := clients()
	n := 2000
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		want = addCounts(want, produceKeysN(t, in, n, 100, keys, 2))
		n += 100
		time.Sleep(100 * time.Millisecond)
	}
	kafkatest.ConsumeUntil(t, out, 45*time.Second, atLeast(n))
	for _, app := range []*processor.App{a, b} {
		v := waitTasks(t, app, 15*time.Second, "standby caught up after the steady input", func(v tasksView) bool {
			return split(v) && v.Standby[0].Lag <= 10
		})
		t.Logf("%+v", v)
	}
	after := clients()
	t.Logf("changelog clients created by both instances: %v before the steady input of %d records, %v after", before, n-2000, after)
	if before <= 0 || after != before {
		t.Fatalf("changelog clients created: %v before the steady input, %v after: standbys must tail with the clients they have", before, after)
	}
	checkCounts(t, out, want)
}
