package processor

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"testing"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestHALagsReport checks what a member reports in its join metadata: per
// partition number whose stateful tasks all run here (lag 0) or are kept
// as standbys with a measured lag, the sum; nothing for a partition one
// of whose stateful tasks has no measured state; nothing for stateless
// tasks, which the leader counts as caught up everywhere.
func TestHALagsReport(t *testing.T) {
	t.Parallel()
	b := topology.NewBuilder("ha-lags")
	b.Stream("clicks", serde.String(), serde.String()).GroupByKey(topology.Named("c1")).Count(topology.Named("c1"))
	b.Stream("views", serde.String(), serde.String()).GroupByKey(topology.Named("c2")).Count(topology.Named("c2"))
	b.Stream("pings", serde.String(), serde.String()).Filter(func(string, string) bool { return true }).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	a := &App{topo: topo, layout: &layout{tasks: make([]int32, len(topo.SubTopologies()))}}
	stateless := -1
	for i, sub := range topo.SubTopologies() {
		a.layout.tasks[i] = 3
		if len(sub.Stores) == 0 {
			stateless = i
		}
	}
	if stateless < 0 || len(topo.SubTopologies()) != 3 {
		t.Fatalf("want two stateful sub-topologies and a stateless one: %+v", topo.SubTopologies())
	}
	stateful := []int{}
	for i := range topo.SubTopologies() {
		if i != stateless {
			stateful = append(stateful, i)
		}
	}
	id := func(sub int, p int32) topology.TaskID { return topology.TaskID{SubTopology: sub, Partition: p} }
	standby := func(lag int64) *standbyTask {
		st := &standbyTask{}
		st.lag.Store(lag)
		return st
	}
	a.ha.setActive(0, []topology.TaskID{id(stateful[0], 0), id(stateful[1], 0), id(stateless, 0), id(stateless, 1), id(stateful[0], 1)})
	a.ha.standby = map[topology.TaskID]*standbyTask{
		id(stateful[1], 1): standby(7),  // with the active 1 of the other: complete
		id(stateful[0], 2): standby(40), // the other stateful task of 2 has no state here
		id(stateful[1], 2): standby(-1), // and this one no measured lag yet
	}
	if got, want := a.haLags(), map[int32]int64{0: 0, 1: 7}; !maps.Equal(got, want) {
		t.Fatalf("lags %v, want %v", got, want)
	}
	a.ha.standby[id(stateful[1], 2)].lag.Store(2)
	if got, want := a.haLags(), map[int32]int64{0: 0, 1: 7, 2: 42}; !maps.Equal(got, want) {
		t.Fatalf("lags %v, want %v", got, want)
	}
	cfg := a.haConfig()
	if !cfg.stateful(0) || cfg.stateful(3) {
		t.Fatal("partitions 0..2 have stateful tasks, 3 none")
	}
	if a.warmupsCaughtUp(100) {
		t.Fatal("no warm-ups: nothing to report caught up")
	}
	a.ha.standby[id(stateful[0], 2)].warmup.Store(true)
	if !a.warmupsCaughtUp(100) || a.warmupsCaughtUp(10) {
		t.Fatal("a warm-up of lag 40 is caught up under 100, not under 10")
	}
}

// TestHALagsReportRestoringTasks checks that a partition whose task is
// restoring here is reported with the offsets its restore has left (what
// its restore progress said last), as Kafka Streams reports a restoring
// task's changelog offsets: reported as no state, the leader hands the
// partition to any caught-up standby elsewhere however little the restore
// had left, and gives this member a warm-up to take it back.
func TestHALagsReportRestoringTasks(t *testing.T) {
	t.Parallel()
	b := topology.NewBuilder("ha-lags-restoring")
	b.Stream("clicks", serde.String(), serde.String()).GroupByKey(topology.Named("c1")).Count(topology.Named("c1"))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	a := &App{topo: topo, layout: &layout{tasks: []int32{2}}, metrics: newAppMetrics("app"), log: slog.New(slog.DiscardHandler)}
	s := &session{app: a}
	id := topology.TaskID{SubTopology: 0, Partition: 1}
	a.ha.setActive(0, []topology.TaskID{{SubTopology: 0, Partition: 0}})

	s.restoreOptions(id, resumePoint{}).Progress(changelog.RestoreProgress{Remaining: 120, Total: 500})
	if got, want := a.haLags(), map[int32]int64{0: 0, 1: 120}; !maps.Equal(got, want) {
		t.Fatalf("restore with 120 left: lags %v, want %v", got, want)
	}
	s.restoreOptions(id, resumePoint{}).Progress(changelog.RestoreProgress{Restored: 500, Total: 500, Done: true})
	if got, want := a.haLags(), map[int32]int64{0: 0, 1: 0}; !maps.Equal(got, want) {
		t.Fatalf("restore done, not promoted yet: lags %v, want %v", got, want)
	}
	// Stopped (a revocation) or promoted: no longer a restore.
	a.ha.endRestoring(id)
	if got, want := a.haLags(), map[int32]int64{0: 0}; !maps.Equal(got, want) {
		t.Fatalf("restore stopped: lags %v, want %v", got, want)
	}
}

// TestHALagsReportRebuildingStandby: a standby that was caught up (lag 0)
// and whose tail then failed (its changelog recreated, its position gone
// from the log) restarts with a restore that may rebuild the task from
// offset 0. Until that restore says what it has left, the member must not
// report the partition (no state); while it runs, it reports what is left,
// never the lag the failed tail measured: a caught-up report would have
// the leader hand the active task to a member that rebuilds it.
func TestHALagsReportRebuildingStandby(t *testing.T) {
	t.Parallel()
	b := topology.NewBuilder("ha-lags-rebuilding")
	b.Stream("clicks", serde.String(), serde.String()).GroupByKey(topology.Named("c1")).Count(topology.Named("c1"))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	a := &App{topo: topo, layout: &layout{tasks: []int32{2}}, log: slog.New(slog.DiscardHandler)}
	id := topology.TaskID{SubTopology: 0, Partition: 1}
	st := &standbyTask{id: id}
	st.lag.Store(-1)
	a.ha.standby = map[topology.TaskID]*standbyTask{id: st}
	a.ha.setActive(0, []topology.TaskID{{SubTopology: 0, Partition: 0}})

	progress := a.standbyRestoreProgress(st)
	progress(changelog.RestoreProgress{Remaining: 300, Total: 300})
	if got, want := a.haLags(), map[int32]int64{0: 0, 1: 300}; !maps.Equal(got, want) {
		t.Fatalf("first restore with 300 left: lags %v, want %v", got, want)
	}
	progress(changelog.RestoreProgress{Restored: 300, Total: 300, Done: true})
	a.setStandbyLag(st, 0) // the tail measured: caught up
	if got, want := a.haLags(), map[int32]int64{0: 0, 1: 0}; !maps.Equal(got, want) {
		t.Fatalf("caught up: lags %v, want %v", got, want)
	}

	// The tail fails; the standby starts over, and its restore rebuilds.
	a.setStandbyLag(st, -1)
	if got, want := a.haLags(), map[int32]int64{0: 0}; !maps.Equal(got, want) {
		t.Fatalf("after the tail failed: lags %v, want %v", got, want)
	}
	progress = a.standbyRestoreProgress(st)
	progress(changelog.RestoreProgress{Remaining: 1_000_000, Total: 1_000_000})
	if got, want := a.haLags(), map[int32]int64{0: 0, 1: 1_000_000}; !maps.Equal(got, want) {
		t.Fatalf("rebuilding with 1M left: lags %v, want %v", got, want)
	}
	progress(changelog.RestoreProgress{Restored: 600_000, Remaining: 400_000, Total: 1_000_000})
	if got, want := a.haLags(), map[int32]int64{0: 0, 1: 400_000}; !maps.Equal(got, want) {
		t.Fatalf("rebuilding with 400k left: lags %v, want %v", got, want)
	}
}

// TestStandbyAssignmentTakesEffectWithItsActivePartitions: kgo hands a
// sync's standby assignment over (ParseSyncAssignment) before it assigns
// the sync's active partitions (onAssigned). A loop that acted on the
// standbys alone stopped the standby of a task the same sync made active
// here without handing its DB over, and the active task reopened it.
func TestStandbyAssignmentTakesEffectWithItsActivePartitions(t *testing.T) {
	s := &session{assigned: map[string]map[int32]bool{}}
	s.onStandby(standbyAssignment{Standby: []int32{0}, WarmUp: []int32{1}})
	if s.changed || len(s.standby.want.Standby)+len(s.standby.want.WarmUp) != 0 {
		t.Fatalf("standby assignment applied before its sync's active partitions: changed %v, want %+v", s.changed, s.standby.want)
	}
	s.onAssigned(context.Background(), nil, map[string][]int32{}) // nothing added: kgo calls it all the same
	if !s.changed || !slices.Equal(s.standby.want.Standby, []int32{0}) || !slices.Equal(s.standby.want.WarmUp, []int32{1}) {
		t.Fatalf("after onAssigned: changed %v, standby assignment %+v", s.changed, s.standby.want)
	}
}

// TestHandOverToStandbyWaitsForTheSyncBeingAssigned: an active task
// revoked by a sync whose standby assignment keeps a standby of it here
// hands its open DB over. The loop can close the task before kgo assigns
// the sync's partitions (which applies its standby assignment): the
// hand-over waits for that sync instead of closing the DB, and ends when
// no standby is coming or the session closes.
func TestHandOverToStandbyWaitsForTheSyncBeingAssigned(t *testing.T) {
	db, err := changelog.OpenDB(t.TempDir(), changelog.Options{Logger: slog.New(slog.DiscardHandler), MemoryBudget: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	id := topology.TaskID{SubTopology: 0, Partition: 1}
	s := &session{app: &App{db: db}, standby: standbySet{tasks: map[topology.TaskID]*standbyTask{}}}

	// Revoked with the standby assignment still pending: kept open through
	// a settle that runs before the assignment applies.
	s.onStandby(standbyAssignment{Standby: []int32{1}})
	closeActive(t, db, s, id)
	s.settleHandOvers(map[topology.TaskID]bool{}, false)
	if !db.HandedOver(id.String()) || db.Stats().OpenTaskDBs != 1 {
		t.Fatalf("hand-over dropped before its standby assignment applied: held %v, %d DBs open", db.HandedOver(id.String()), db.Stats().OpenTaskDBs)
	}
	// The session closes instead: the DB closes.
	s.settleHandOvers(nil, true)
	if db.HandedOver(id.String()) || db.Stats().OpenTaskDBs != 0 {
		t.Fatalf("session closed: held %v, %d DBs open; want none", db.HandedOver(id.String()), db.Stats().OpenTaskDBs)
	}

	// A sync whose standby assignment does not keep the task: nothing held.
	s.onStandby(standbyAssignment{Standby: []int32{0}})
	closeActive(t, db, s, id)
	if db.HandedOver(id.String()) || db.Stats().OpenTaskDBs != 0 {
		t.Fatalf("no standby coming: held %v, %d DBs open; want none", db.HandedOver(id.String()), db.Stats().OpenTaskDBs)
	}
}

// closeActive opens task id's state as its active task would and closes
// it as syncTasks closes a revoked task.
func closeActive(t *testing.T, db *changelog.DB, s *session, id topology.TaskID) {
	t.Helper()
	st := db.NewTaskState(changelog.TaskStateConfig{ID: id.String(), AppID: "app", Partition: id.Partition})
	if _, err := st.Open(store.Spec{Name: "kv", Kind: store.KindKeyValue}, id.Partition); err != nil {
		t.Fatal(err)
	}
	if s.standbyNext(id.Partition) {
		s.handOverToStandby(id)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}
