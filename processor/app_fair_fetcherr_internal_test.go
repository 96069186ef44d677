package processor

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// franz-go returns a partition's records decoded before a batch it could
// not read (a CRC mismatch, a batch over MaxDecompressBatchBytes) together
// with the error, and the consumer's position moves past those records.
// enqueueFetches skipped every partition with an error, records and all:
// they were never processed, and the next commit took the position past
// them, so they were lost for good.
func TestRecordsFetchedWithAPartitionErrorAreProcessed(t *testing.T) {
	t.Parallel()
	s, _, counts, now := newMergedSession(t, 500, nil)
	a := feedMerged("a", "hot", 0, 1000, 3, 10)
	a.Partitions[0].Err = errors.New("encoded crc 1 does not match calculated crc 2")
	queued, err := s.enqueueFetches(kgo.Fetches{{Topics: []kgo.FetchTopic{a, feedMerged("b", "cold", 0, 2000, 2, 2)}}}, *now)
	if err != nil {
		t.Fatal(err)
	}
	if queued != 5 {
		t.Fatalf("queued %d records, want 5: a's 3 came with an error but were consumed", queued)
	}
	if _, err := s.processPass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if counts["hot@0"] != "3" {
		t.Fatalf("hot's window counted %q, want 3", counts["hot@0"])
	}
}
