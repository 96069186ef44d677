package memstore_test

import (
	"testing"

	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/store/memstore"
	"github.com/tidemark-streams/tidemark/store/storetest"
)

func TestKeyValue(t *testing.T) {
	storetest.RunKeyValue(t, func(*testing.T) store.KeyValue { return memstore.NewKeyValue("kv") })
}

func TestWindow(t *testing.T) {
	storetest.RunWindow(t, func(*testing.T) store.Window { return memstore.NewWindow("win") })
}

func TestSession(t *testing.T) {
	storetest.RunSession(t, func(*testing.T) store.Session { return memstore.NewSession("sess") })
}

func TestProviderOpensEachKind(t *testing.T) {
	p := memstore.NewProvider()
	for _, c := range []struct {
		kind store.Kind
		ok   func(store.Store) bool
	}{
		{store.KindKeyValue, func(s store.Store) bool { _, ok := s.(store.KeyValue); return ok }},
		{store.KindWindow, func(s store.Store) bool { _, ok := s.(store.Window); return ok }},
		{store.KindSession, func(s store.Store) bool { _, ok := s.(store.Session); return ok }},
	} {
		s, err := p.Open(store.Spec{Name: "s", Kind: c.kind}, 3)
		if err != nil {
			t.Fatalf("Open(%v): %v", c.kind, err)
		}
		if s.Kind() != c.kind || s.Name() != "s" || !c.ok(s) {
			t.Fatalf("Open(%v) returned %T kind %v name %q", c.kind, s, s.Kind(), s.Name())
		}
	}
	if _, err := p.Open(store.Spec{Name: "s", Kind: 99}, 0); err == nil {
		t.Fatal("Open of an unknown kind succeeded")
	}
	if _, err := p.Open(store.Spec{Kind: store.KindKeyValue}, 0); err == nil {
		t.Fatal("Open without a name succeeded")
	}
}
