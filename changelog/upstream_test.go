package changelog_test

import (
	"path/filepath"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/store"
)

// TestUpstreamBadgerBesideTidemark is a program that imports upstream
// Badger next to tidemark's state stores, as a user's service might. That
// this test binary starts at all is the point: with a copy of Badger inside
// tidemark, both copies registered the same protobuf files and the
// protobuf runtime panicked before main ("proto: file "badgerpb4.proto" is
// already registered"). Both DBs are then opened and used side by side.
func TestUpstreamBadgerBesideTidemark(t *testing.T) {
	dir := t.TempDir()
	own, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "users-own-badger")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if err := own.Update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte("mine")) }); err != nil {
		t.Fatal(err)
	}

	db, err := changelog.OpenDB(filepath.Join(dir, "tidemark-state"), changelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	task := db.NewTaskState(changelog.TaskStateConfig{ID: "0_0", AppID: "app", Partition: 0})
	s, err := task.Open(store.Spec{Name: "kv", Kind: store.KindKeyValue}, 0)
	if err != nil {
		t.Fatal(err)
	}
	kv := s.(store.KeyValue)
	if err := kv.Put([]byte("k"), []byte("tidemark's")); err != nil {
		t.Fatal(err)
	}
	if err := task.Apply(nil); err != nil {
		t.Fatal(err)
	}

	if v, ok, err := kv.Get([]byte("k")); err != nil || !ok || string(v) != "tidemark's" {
		t.Fatalf("tidemark store: %q, %v, %v", v, ok, err)
	}
	err = own.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte("k"))
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err == nil && string(v) != "mine" {
			t.Errorf("the program's own Badger: %q, want mine", v)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
