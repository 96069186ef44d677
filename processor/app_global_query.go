package processor

import (
	"context"
	"fmt"
	"time"

	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// Interactive queries of global stores (Get and Range, and the /stores
// endpoints built on them). Every instance holds every partition of a
// global store, so a query never goes elsewhere: it reads the local copy
// as the global goroutine has applied it, which is committed data only
// (the topic is read read_committed). The answer's Position is the
// store's position in its topic (the next offset per partition), so an
// AtLeast bound on the global topic waits for the global goroutine to
// read that far.

// queryGlobal answers q when it names a global store; ok is false when it
// does not.
func (a *App) queryGlobal(ctx context.Context, q storeQuery, o queryOptions) (res QueryResult, ok bool, err error) {
	info, isGlobal := a.topo.GlobalStore(q.name)
	if !isGlobal {
		return res, false, nil
	}
	if q.kind != store.KindKeyValue {
		return res, true, fmt.Errorf("%w: %q is a global key-value store, not a %s store", ErrStoreKind, q.name, q.kind)
	}
	deadline := time.Now().Add(o.wait)
	for {
		res, parts, err := a.readGlobal(q, info.Topic)
		if err != nil || covers(res.Position, o.bound, parts) {
			return res, true, err
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return res, true, fmt.Errorf("%w: global store %q is at %s, want at least %s", ErrNotFresh, q.name, res.Position, o.bound)
		}
		select {
		case <-ctx.Done():
			return res, true, fmt.Errorf("%w: global store %q is at %s, want at least %s: %w", ErrNotFresh, q.name, res.Position, o.bound, ctx.Err())
		case <-time.After(min(wait, pollFresh)):
		}
	}
}

// readGlobal reads the global store once, under the lock that keeps it
// from closing meanwhile.
func (a *App) readGlobal(q storeQuery, topic string) (res QueryResult, parts []int32, err error) {
	g := a.global.Load()
	if g == nil {
		return res, nil, fmt.Errorf("%w: the app is not running", ErrNoOwner)
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return res, nil, fmt.Errorf("%w: the app is not running", ErrNoOwner)
	}
	var gs *globalStore
	for _, s := range g.stores {
		if s.info.Spec.Name == q.name {
			gs = s
		}
	}
	if gs == nil {
		return res, nil, fmt.Errorf("%w: %q", ErrUnknownQueryStore, q.name)
	}
	res.Position = Position{}
	for p, off := range gs.st.Position() {
		res.Position.Set(topic, p, off)
	}
	for p := range gs.parts {
		parts = append(parts, p)
	}
	res.Partitions = parts
	if q.keyed {
		res.Partition = -1 // every instance holds every partition
	}
	if err := q.read(gs.st, storeReader{limit: q.limit}, &res); err != nil {
		return res, parts, fmt.Errorf("processor: query global store %q: %w", q.name, err)
	}
	res.Found = len(res.Entries) > 0
	return res, parts, nil
}

// queryStoreInfo describes a task store or a global store, for decoding
// query answers.
func (a *App) queryStoreInfo(name string) topology.StoreInfo {
	if g, ok := a.topo.GlobalStore(name); ok {
		return topology.StoreInfo{Spec: g.Spec, Timestamped: g.Timestamped, Nodes: g.Nodes}
	}
	info, _ := a.topo.Store(name)
	return info
}
