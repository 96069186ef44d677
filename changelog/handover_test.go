package changelog

import "testing"

// TestHandOverKeepsTheTaskDBOpenForItsNextUser: a TaskState closed after
// HandOver leaves its task DB open, and the next TaskState of the task
// uses that DB without opening Badger again; the hand-over's hold goes
// with it. EndHandOver with no taker closes the DB; a DB that is not open
// is not held.
func TestHandOverKeepsTheTaskDBOpenForItsNextUser(t *testing.T) {
	opts := Options{Logger: quietLog, MemoryBudget: 16 << 20}
	cfg := TaskStateConfig{ID: "0_1", AppID: "app", Partition: 1}

	t.Run("taken over", func(t *testing.T) {
		db := handedOver(t, opts, cfg)
		if st := db.Stats(); st.OpenTaskDBs != 1 || st.TaskDBOpens != 1 {
			t.Fatalf("after the standby closed: %d task DBs open, %d opens; want 1, 1", st.OpenTaskDBs, st.TaskDBOpens)
		}
		active := db.NewTaskState(cfg)
		openKV(t, active, "x", false)
		if st := db.Stats(); st.TaskDBOpens != 1 {
			t.Fatalf("the active task opened Badger again (%d opens)", st.TaskDBOpens)
		}
		if db.HandedOver("0_1") {
			t.Fatal("the hand-over is still pending after the active task took the DB")
		}
		db.EndHandOver("0_1") // taken: nothing to drop
		if err := active.Close(); err != nil {
			t.Fatal(err)
		}
		if st := db.Stats(); st.OpenTaskDBs != 0 {
			t.Fatalf("%d task DBs open after the last user closed; want 0", st.OpenTaskDBs)
		}
	})
	t.Run("not taken", func(t *testing.T) {
		db := handedOver(t, opts, cfg)
		db.EndHandOver("0_1")
		if st := db.Stats(); st.OpenTaskDBs != 0 {
			t.Fatalf("%d task DBs open after EndHandOver with no taker; want 0", st.OpenTaskDBs)
		}
	})
	t.Run("nothing open", func(t *testing.T) {
		db := openTestDB(t, opts)
		db.HandOver("0_1")
		if db.HandedOver("0_1") {
			t.Fatal("a task DB that is not open is held")
		}
		if st := db.Stats(); st.OpenTaskDBs != 0 {
			t.Fatalf("HandOver opened a task DB (%d open)", st.OpenTaskDBs)
		}
	})
}

// handedOver opens a DB whose task cfg.ID had a standby that handed its
// task DB over and closed.
func handedOver(t *testing.T, opts Options, cfg TaskStateConfig) *DB {
	t.Helper()
	db := openTestDB(t, opts)
	standby := db.NewTaskState(cfg)
	openKV(t, standby, "x", false)
	db.HandOver(cfg.ID)
	if err := standby.Close(); err != nil {
		t.Fatal(err)
	}
	return db
}
