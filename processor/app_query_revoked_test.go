package processor_test

import (
	"errors"
	"testing"

	"github.com/tidemark-streams/tidemark/processor"
)

// TestQueriesStopAnsweringARevokedPartition: instance "a" owns both
// partitions and its record loop is stuck in a slow user function when
// "b" joins. The group moves a partition to b, which restores it, counts
// new records and commits, while a's loop has not yet come round to close
// the task. A key of the moved partition must not be answered by a from
// its state any more (421 to the owner, or 503 while it moves): a kept
// answering 200 with the count from before b's commits, silently.
func TestQueriesStopAnsweringARevokedPartition(t *testing.T) {
	t.Parallel()
	s := startBlockedOwner(t, "iqrevoke")
	for k, n := range s.want {
		res, err := s.get(s.a, k)
		if err != nil || !res.Found || countOf(t, res.Entries[0].Value) != int64(n) {
			t.Fatalf("a alone: Get %s = %v, %v; want count %d", k, res, err, n)
		}
	}
	s.block(t)

	b, _ := runApp(t, s.topoB, processor.WithInstanceID("b"), processor.WithHTTP("127.0.0.1:0"))
	// b takes one of the partitions and counts new records of its keys.
	moved, p := s.movedTo(t, b)
	s.produce(t, moved, p, 5, "late-")
	s.waitCount(t, b, moved)

	// a's loop is still blocked: it must not answer the moved key.
	res, err := s.get(s.a, moved)
	switch {
	case err == nil:
		t.Fatalf("a answers %s (partition %d, now b's, count %d there) with count %d from its state before the move",
			moved, p, s.want[moved], countOf(t, res.Entries[0].Value))
	case errors.Is(err, processor.ErrNotLocal), errors.Is(err, processor.ErrRestoring), errors.Is(err, processor.ErrNoOwner):
		t.Logf("a: Get %s: %v", moved, err)
	default:
		t.Fatalf("a: Get %s: %v; want ErrNotLocal, ErrRestoring or ErrNoOwner", moved, err)
	}
	s.unblock()
}
