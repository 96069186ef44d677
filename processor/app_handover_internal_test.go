package processor

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// A standby's DB handed over to its task's active on this instance
// (syncStandbys) stays open until the active task's openTask takes it or
// drops the hand-over. A restore that ended before openTask ran (its
// task's preparation failed, or the task was revoked again while the
// fence still ran, stopRestore) never dropped it: the task's Badger DB
// stayed open for the life of the process, with its memtables, and took
// a share of every other task DB's index cache.
func TestAHandOverEndsWhenTheRestoreStopsBeforeOpeningTheTask(t *testing.T) {
	t.Parallel()
	id := topology.TaskID{SubTopology: 0, Partition: 1}
	for _, tc := range []struct {
		name string
		run  func(s *session, prep *taskPrep)
	}{
		{"preparation failed", func(s *session, prep *taskPrep) {
			prep.err = errors.New("fence departed members: broker down")
			close(prep.done)
			s.startRestore(context.Background(), id, prep)
			<-s.restoring[id].done
		}},
		{"revoked while preparing", func(s *session, prep *taskPrep) {
			s.startRestore(context.Background(), id, prep)
			s.stopRestore(id, s.restoring[id])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := changelog.OpenDB(t.TempDir(), changelog.Options{Logger: slog.New(slog.DiscardHandler), MemoryBudget: 16 << 20})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			standby := db.NewTaskState(changelog.TaskStateConfig{ID: id.String(), AppID: "app", Partition: id.Partition})
			if _, err := standby.Open(store.Spec{Name: "s", Kind: store.KindKeyValue}, id.Partition); err != nil {
				t.Fatal(err)
			}
			db.HandOver(id.String()) // syncStandbys: the task is active here next
			if err := standby.Close(); err != nil {
				t.Fatal(err)
			}
			app := &App{db: db, log: slog.New(slog.DiscardHandler)}
			th := &appThread{app: app}
			s := &session{app: app, th: th, restoring: map[topology.TaskID]*restoringTask{}}
			tc.run(s, &taskPrep{done: make(chan struct{})})
			if db.HandedOver(id.String()) {
				t.Error("the hand-over is still pending after the task's restore ended")
			}
			if n := db.Stats().OpenTaskDBs; n != 0 {
				t.Errorf("%d task DBs open after the task's restore ended without opening it; want 0", n)
			}
		})
	}
}
