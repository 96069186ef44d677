package processor_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestStaleCommittedOffsetsDoNotCountInputsTwice: a broker that serves
// committed offsets older than the last commit (Kafka 4.1's group
// coordinator did, reloading after an unclean restart) must not make the
// app count inputs its state already reflects. The test rewinds the
// group's offsets to the start behind the app's back, then restarts it on
// its own local state, and on an empty state dir (restored from the
// changelogs): counts must go on exactly, no input counted twice.
func TestStaleCommittedOffsetsDoNotCountInputsTwice(t *testing.T) {
	t.Parallel()
	for _, fresh := range []bool{false, true} {
		name := "local state"
		if fresh {
			name = "state restored from the changelogs"
		}
		t.Run(name, func(t *testing.T) {
			in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
			topo := countTopology(t, kafkatest.UniqueName(t, "stale"), in, out)
			dir := t.TempDir()
			want := produceKeys(t, in, 0, 400, 8)
			_, stop := runApp(t, topo, processor.WithStateDir(dir), processor.WithInstanceID("a"))
			checkCounts(t, out, want)
			stop()

			// The broker "forgets" every commit: offsets back to 0.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rewind := kadm.Offsets{}
			rewind.Add(kadm.Offset{Topic: in, Partition: 0, At: 0})
			rewind.Add(kadm.Offset{Topic: in, Partition: 1, At: 0})
			adm := kafkatest.Admin(t)
			for {
				resp, err := adm.CommitOffsets(ctx, topo.Application(), rewind)
				if err == nil {
					err = resp.Error()
				}
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("rewind the group's offsets: %v", err)
				}
				time.Sleep(200 * time.Millisecond) // the stopped member may still be in the group
			}

			more := produceKeys(t, in, 400, 160, 8)
			for k, n := range more {
				want[k] += n
			}
			if fresh {
				dir = t.TempDir()
			}
			app, _ := runApp(t, topo, processor.WithStateDir(dir), processor.WithInstanceID("a"), processor.WithHTTP("127.0.0.1:0"))
			checkCounts(t, out, want)
			if m := scrape(t, "http://"+app.HTTPAddr()); m["tidemark_reflected_records_skipped_total"] != 400 {
				t.Fatalf("tidemark_reflected_records_skipped_total = %v, want the 400 inputs the state reflected", m["tidemark_reflected_records_skipped_total"])
			}
		})
	}
}
