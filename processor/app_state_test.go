package processor_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
)

// TestStateDirOfAnotherApplicationIsRefused: a second application started
// on the first one's state directory must fail at start, naming both,
// and leave the first one's state intact.
func TestStateDirOfAnotherApplicationIsRefused(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	dir := t.TempDir()
	first := countTopology(t, kafkatest.UniqueName(t, "first"), in, out)
	want := produceKeys(t, in, 0, 300, 6)
	_, stop := runApp(t, first, processor.WithStateDir(dir))
	checkCounts(t, out, want)
	stop()

	other := countTopology(t, kafkatest.UniqueName(t, "other"), in, kafkatest.NewTopic(t, 2, nil))
	app, err := processor.NewApp(other, processor.WithBrokers(kafkatest.Brokers(t)...), processor.WithStateDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = app.Run(ctx)
	if !errors.Is(err, changelog.ErrOwnedByOtherApplication) || !strings.Contains(err.Error(), first.Application()) {
		t.Fatalf("Run of another application on the state dir: %v; want ErrOwnedByOtherApplication naming %s", err, first.Application())
	}

	// The first application resumes where it was.
	more := produceKeys(t, in, 300, 120, 6)
	for k, n := range more {
		want[k] += n
	}
	runApp(t, first, processor.WithStateDir(dir))
	checkCounts(t, out, want)
}

// TestDamagedTableIsRebuiltFromTheChangelog flips bytes in the middle of
// every table file of a stopped instance's state: the restart must notice,
// move the damaged task DBs aside and restore from the changelogs, with
// counts continuing exactly.
func TestDamagedTableIsRebuiltFromTheChangelog(t *testing.T) {
	t.Parallel()
	damagedTableIsRebuilt(t)
}

// TestThreadsDamagedTableIsRebuilt: the same with two stream threads,
// which share the state directory.
func TestThreadsDamagedTableIsRebuilt(t *testing.T) {
	t.Parallel()
	damagedTableIsRebuilt(t, processor.WithThreads(2))
}

func damagedTableIsRebuilt(t *testing.T, opts ...processor.Option) {
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	dir := filepath.Join(t.TempDir(), "state")
	topo := countTopology(t, kafkatest.UniqueName(t, "damaged"), in, out)
	want := produceKeys(t, in, 0, 400, 8)
	_, stop := runApp(t, topo, append([]processor.Option{processor.WithStateDir(dir)}, opts...)...)
	checkCounts(t, out, want)
	stop()

	tables, _ := filepath.Glob(filepath.Join(dir, "tasks", "*", "*.sst")) // one Badger DB per task
	if len(tables) == 0 {
		t.Fatalf("no table files in %s after a clean stop", dir)
	}
	damaged := map[string]bool{}
	for _, path := range tables {
		damaged[filepath.Dir(path)] = true
	}
	for _, path := range tables {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := len(b) / 3; i < len(b)/3+64 && i < len(b); i++ {
			b[i] ^= 0xff
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	id, _ := os.ReadFile(filepath.Join(dir, "instance-id"))

	more := produceKeys(t, in, 400, 160, 8)
	for k, n := range more {
		want[k] += n
	}
	runApp(t, topo, append([]processor.Option{processor.WithStateDir(dir)}, opts...)...)
	checkCounts(t, out, want)
	if aside, _ := filepath.Glob(filepath.Join(dir, "tasks", "*.corrupt-*")); len(aside) != len(damaged) {
		t.Fatalf("damaged state moved aside to %v, want a .corrupt- directory for each of the %d damaged task DBs", aside, len(damaged))
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "instance-id")); string(got) != string(id) {
		t.Fatalf("instance id %q after the rebuild, want the same %q: the instance's identity must survive", got, id)
	}
}

// TestGarbledInstanceIDIsReplaced: a damaged instance-id file must not
// crash-loop the service; it picks a new, valid id.
func TestGarbledInstanceIDIsReplaced(t *testing.T) {
	t.Parallel()
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "instance-id"), []byte("ab/c\x00\xff weird\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := produceKeys(t, in, 0, 50, 3)
	runApp(t, countTopology(t, kafkatest.UniqueName(t, "garbled"), in, out), processor.WithStateDir(dir))
	checkCounts(t, out, want)
	id, _ := os.ReadFile(filepath.Join(dir, "instance-id"))
	if strings.ContainsAny(string(id), "/ \x00\xff\n") || len(id) == 0 {
		t.Fatalf("instance id file holds %q, want a new valid id", id)
	}
}

// TestStateDirRemovedWhileRunningIsRebuilt: an operator removes the state
// directory of a running instance (rm -rf, a /tmp cleaner). Badger can no
// longer flush there and would retry forever, its writes stalling and its
// Close never returning; the instance must notice, rebuild its tasks from
// the changelogs into a new directory, keep counting exactly, and stop
// cleanly.
func TestStateDirRemovedWhileRunningIsRebuilt(t *testing.T) {
	t.Parallel()
	stateDirRemovedIsRebuilt(t)
}

// TestThreadsStateDirRemovedWhileRunningIsRebuilt: the same with two
// stream threads, whose rebuild waits for both to stop.
func TestThreadsStateDirRemovedWhileRunningIsRebuilt(t *testing.T) {
	t.Parallel()
	stateDirRemovedIsRebuilt(t, processor.WithThreads(2))
}

func stateDirRemovedIsRebuilt(t *testing.T, opts ...processor.Option) {
	in, out := kafkatest.NewTopic(t, 2, nil), kafkatest.NewTopic(t, 2, nil)
	dir := filepath.Join(t.TempDir(), "state")
	topo := countTopology(t, kafkatest.UniqueName(t, "removed"), in, out)
	want := produceKeys(t, in, 0, 400, 8)
	_, stop := runApp(t, topo, append([]processor.Option{processor.WithStateDir(dir)}, opts...)...)
	checkCounts(t, out, want)
	id, _ := os.ReadFile(filepath.Join(dir, "instance-id"))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	// Input keeps coming for longer than the DBs wait between checks of
	// their directories.
	for i := range 8 {
		for k, n := range produceKeys(t, in, 400+i*40, 40, 8) {
			want[k] += n
		}
		time.Sleep(400 * time.Millisecond)
	}
	checkCounts(t, out, want)
	stop() // fails the test if Run errs or does not return within 60 s

	if aside, _ := filepath.Glob(filepath.Join(dir, "tasks", "*.corrupt-*")); len(aside) == 0 {
		t.Errorf("no task DB of the removed directory moved aside in %s: the loss was not noticed", dir)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "instance-id")); string(got) != string(id) {
		t.Errorf("instance id %q after the rebuild, want the same %q", got, id)
	}
	// The rebuilt state is the state: a restart on it continues the counts.
	for k, n := range produceKeys(t, in, 720, 80, 8) {
		want[k] += n
	}
	runApp(t, topo, append([]processor.Option{processor.WithStateDir(dir)}, opts...)...)
	checkCounts(t, out, want)
}
