package tidemarktest

import (
	"fmt"
	"math"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// StoreEntry is one decoded store entry. Timestamp is set for the
// timestamped stores of DSL aggregations and tables; Start and End for
// window stores (End = Start + window size) and session stores (both
// inclusive).
type StoreEntry[K, V any] struct {
	Key        K
	Value      V
	Timestamp  int64
	Start, End int64
	Partition  int32
}

// ReadStore decodes every entry of the named store across all partitions:
// key-value stores in key order, window stores by key then start, session
// stores by key then end. Timestamped values are unwrapped. Versioned
// stores list each key's latest value, Timestamp set to the time it became
// valid.
func ReadStore[K, V any](d *Driver, name string, keys serde.Serde[K], values serde.Serde[V]) ([]StoreEntry[K, V], error) {
	info, ok := d.topo.Store(name)
	if !ok {
		return nil, fmt.Errorf("tidemarktest: topology has no store %q", name)
	}
	var out []StoreEntry[K, V]
	for _, t := range d.order {
		for _, os := range t.Stores() {
			if os.Spec.Name != name {
				continue
			}
			st, err := expiring(t, os.Store, info)
			if err != nil {
				return nil, err
			}
			part, err := readOne(st, info, t.ID().Partition, keys, values)
			if err != nil {
				return nil, err
			}
			out = append(out, part...)
		}
	}
	return out, nil
}

// expiring hides the expired rows of a store with WithTTL, as interactive
// queries do (topology.ExpiringKeyValue).
func expiring(t *task.Task, s store.Store, info topology.StoreInfo) (store.Store, error) {
	kv, ok := s.(store.KeyValue)
	if !ok || info.TTL <= 0 {
		return s, nil
	}
	for _, os := range t.Stores() {
		if index, ok := os.Store.(store.KeyValue); ok && os.Spec.Name == info.TTLIndex {
			return topology.ExpiringKeyValue(kv, index, info)
		}
	}
	return nil, fmt.Errorf("tidemarktest: store %q: no ttl index %q", info.Spec.Name, info.TTLIndex)
}

func readOne[K, V any](s store.Store, info topology.StoreInfo, p int32, keys serde.Serde[K], values serde.Serde[V]) ([]StoreEntry[K, V], error) {
	var out []StoreEntry[K, V]
	var derr error
	decode := func(kb, vb []byte, start, end int64) bool {
		e := StoreEntry[K, V]{Start: start, End: end, Partition: p}
		var err error
		if e.Key, err = keys.Decode(kb); err != nil {
			derr = fmt.Errorf("tidemarktest: store %q: decode key: %w", info.Spec.Name, err)
			return false
		}
		if info.Timestamped {
			if e.Timestamp, vb, err = topology.DecodeTimestamped(vb); err != nil {
				derr = fmt.Errorf("tidemarktest: store %q: %w", info.Spec.Name, err)
				return false
			}
		}
		if e.Value, err = values.Decode(vb); err != nil {
			derr = fmt.Errorf("tidemarktest: store %q: decode value: %w", info.Spec.Name, err)
			return false
		}
		out = append(out, e)
		return true
	}
	var err error
	switch st := s.(type) {
	case store.KeyValue:
		if info.Versioned {
			err = readLatestVersions(st, func(k, v []byte, ts int64) bool {
				ok := decode(k, v, 0, 0)
				if ok {
					out[len(out)-1].Timestamp = ts
				}
				return ok
			})
			break
		}
		err = st.Range(nil, nil, func(k, v []byte) bool { return decode(k, v, 0, 0) })
	case store.Window:
		err = st.FetchAll(-1<<62, 1<<62, func(k []byte, start int64, v []byte) bool {
			return decode(k, v, start, start+info.Spec.WindowSize)
		})
	case store.Session:
		err = fmt.Errorf("tidemarktest: store %q is a session store: read it per key with ReadSessions", info.Spec.Name)
	default:
		err = fmt.Errorf("tidemarktest: store %q has unknown type %T", info.Spec.Name, s)
	}
	if err == nil {
		err = derr
	}
	return out, err
}

// Get returns the decoded value of key in the named key-value store, looking
// in the partition the default partitioner maps key to.
func Get[K, V any](d *Driver, name string, key K, keys serde.Serde[K], values serde.Serde[V]) (v V, found bool, err error) {
	entries, err := ReadStore(d, name, keys, values)
	if err != nil {
		return v, false, err
	}
	kb, err := keys.Encode(nil, key)
	if err != nil {
		return v, false, err
	}
	for _, e := range entries {
		eb, _ := keys.Encode(nil, e.Key)
		if string(eb) == string(kb) {
			return e.Value, true, nil
		}
	}
	return v, false, nil
}

// ReadSessions decodes the sessions of key in the named session store,
// ordered by end then start.
func ReadSessions[K, V any](d *Driver, name string, key K, keys serde.Serde[K], values serde.Serde[V]) ([]StoreEntry[K, V], error) {
	info, ok := d.topo.Store(name)
	if !ok {
		return nil, fmt.Errorf("tidemarktest: topology has no store %q", name)
	}
	kb, err := keys.Encode(nil, key)
	if err != nil {
		return nil, fmt.Errorf("tidemarktest: store %q: encode key: %w", name, err)
	}
	var out []StoreEntry[K, V]
	for _, t := range d.order {
		for _, os := range t.Stores() {
			ss, ok := os.Store.(store.Session)
			if os.Spec.Name != name || !ok {
				continue
			}
			var derr error
			err := ss.FindSessions(kb, math.MinInt64, math.MaxInt64, func(start, end int64, vb []byte) bool {
				e := StoreEntry[K, V]{Key: key, Start: start, End: end, Partition: t.ID().Partition}
				if info.Timestamped {
					if e.Timestamp, vb, derr = topology.DecodeTimestamped(vb); derr != nil {
						return false
					}
				}
				if e.Value, derr = values.Decode(vb); derr != nil {
					return false
				}
				out = append(out, e)
				return true
			})
			if err == nil {
				err = derr
			}
			if err != nil {
				return nil, fmt.Errorf("tidemarktest: store %q: %w", name, err)
			}
		}
	}
	return out, nil
}
