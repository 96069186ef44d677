package processor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestStateDiskFullStopsTheAppNamingStoreAndDir: a state directory whose
// file system has less free space than State.MinFreeDisk (here: a reserve
// no disk has). The app must stop with ErrNoSpace naming the store and the
// directory, rather than write into Badger's memory maps and die of a
// SIGBUS, and commit no input offset past what the state holds.
func TestStateDiskFullStopsTheAppNamingStoreAndDir(t *testing.T) {
	t.Parallel()
	// A logged store is refused at its restore, an unlogged one (nothing
	// to restore) at the first commit.
	for _, logged := range []bool{true, false} {
		t.Run(map[bool]string{true: "restore", false: "commit"}[logged], func(t *testing.T) { testStateDiskFull(t, logged) })
	}
}

func testStateDiskFull(t *testing.T, logged bool) {
	in, out := kafkatestNewTopic(t, 1), kafkatestNewTopic(t, 1)
	appID := kafkatestName(t, "nospace")
	produceKeysN(t, in, 0, 20, 4, 1)
	dir := t.TempDir()
	var opts []topology.StoreOption
	if !logged {
		opts = append(opts, topology.WithoutChangelog())
	}
	b := topology.NewBuilder(appID)
	b.Stream(in, serde.String(), serde.String()).GroupByKey().
		Count(append(opts, topology.Named("counts"))...).ToStream().To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, done := startApp(t, topo, processor.WithStateDir(dir),
		func(c *processor.Config) { c.State.MinFreeDisk = 1 << 62 })
	err = runError(t, done, 60*time.Second)
	if !errors.Is(err, changelog.ErrNoSpace) || !strings.Contains(err.Error(), "counts") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Run: %v; want ErrNoSpace naming the store counts and %s", err, dir)
	}
	t.Logf("Run: %v", err)
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.Timeout)
	defer cancel()
	offs, ferr := kafkatest.Admin(t).FetchOffsets(ctx, appID)
	if ferr != nil {
		t.Fatal(ferr)
	}
	if o, ok := offs.Lookup(in, 0); ok && o.At > 0 {
		t.Fatalf("offset %d committed while no state could be written", o.At)
	}
}
