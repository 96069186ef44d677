package tidemarktest

import (
	"errors"
	"fmt"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// globalStores are the driver's global stores (topology.GlobalTable), one
// instance each, as every instance of the service holds one. Piping a
// record to a global topic updates its store synchronously, before Pipe
// returns, and so does a sink of the topology writing to it: the next
// stream record sees the update. In the service the global goroutine
// applies updates asynchronously; only the order on start (global stores
// restored before the first stream record) is guaranteed there, so tests
// that interleave global updates and stream records model the driver's
// synchronous order.
type globalStores struct {
	byName  map[string]store.Store
	byTopic map[string]store.KeyValue
	checks  map[string]func(key, value []byte) error // by topic
	nulls   map[string]func(key, value []byte) (nullKey, tombstone bool)
	buf     []byte
}

func (d *Driver) openGlobals() error {
	gs := d.topo.GlobalStores()
	d.globals = &globalStores{byName: map[string]store.Store{}, byTopic: map[string]store.KeyValue{},
		checks: map[string]func(key, value []byte) error{}, nulls: map[string]func(key, value []byte) (bool, bool){}}
	for _, g := range gs {
		s, err := d.cfg.provider.Open(g.Spec, 0)
		if err != nil {
			return fmt.Errorf("tidemarktest: open global store %q: %w", g.Spec.Name, err)
		}
		kv, ok := s.(store.KeyValue)
		if !ok {
			_ = s.Close()
			return fmt.Errorf("tidemarktest: global store %q opened as %T, want a key-value store", g.Spec.Name, s)
		}
		d.globals.byName[g.Spec.Name] = kv
		d.globals.byTopic[g.Topic] = kv
		d.globals.checks[g.Topic] = g.Check
		d.globals.nulls[g.Topic] = g.Nulls
	}
	return nil
}

func (g *globalStores) reads(topic string) bool {
	_, ok := g.byTopic[topic]
	return ok
}

// update applies a record of topic to its global store, if topic is
// global, as the service's global goroutine does: a null key is ignored,
// a null value deletes, anything else is stored with its timestamp. A
// record the table's serdes cannot decode fails (topology.ErrDeserialize).
func (g *globalStores) update(topic string, key, value []byte, ts int64) error {
	kv, ok := g.byTopic[topic]
	if !ok || key == nil {
		return nil
	}
	if nulls := g.nulls[topic]; nulls != nil {
		nullKey, tombstone := nulls(key, value)
		if nullKey {
			return nil
		}
		if tombstone {
			value = nil
		}
	}
	if check := g.checks[topic]; check != nil {
		if err := check(key, value); err != nil {
			return fmt.Errorf("tidemarktest: global store %q from %q: %w", kv.Name(), topic, err)
		}
	}
	var err error
	if value == nil {
		err = kv.Delete(key)
	} else {
		g.buf = topology.EncodeTimestamped(g.buf[:0], ts, value)
		err = kv.Put(key, g.buf)
	}
	if err != nil {
		return fmt.Errorf("tidemarktest: update global store %q from %q: %w", kv.Name(), topic, err)
	}
	return nil
}

func (g *globalStores) close() error {
	var errs []error
	for _, s := range g.byName {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// GlobalStore returns the driver's instance of the named global store.
func (d *Driver) GlobalStore(name string) (store.KeyValue, error) {
	s, ok := d.globals.byName[name]
	if !ok {
		return nil, fmt.Errorf("tidemarktest: no global store %q", name)
	}
	return s.(store.KeyValue), nil
}

// ReadGlobalStore decodes every entry of the named global store, in key
// order, timestamps unwrapped (Partition is 0).
func ReadGlobalStore[K, V any](d *Driver, name string, keys serde.Serde[K], values serde.Serde[V]) ([]StoreEntry[K, V], error) {
	s, err := d.GlobalStore(name)
	if err != nil {
		return nil, err
	}
	g, _ := d.topo.GlobalStore(name)
	return readOne(s, topology.StoreInfo{Spec: g.Spec, Timestamped: g.Timestamped}, 0, keys, values)
}
