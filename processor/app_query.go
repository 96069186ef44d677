package processor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// Interactive queries read committed state: the loop serves them only
// between transactions, when every overlay is empty, so a query never sees
// a write that may still abort.

// ErrNotLocal is returned for a key whose partition another instance owns;
// QueryResult.Owner then names it.
var ErrNotLocal = errors.New("processor: key is owned by another instance")

// ErrUnknownQueryStore is returned for a store the topology does not have.
var ErrUnknownQueryStore = errors.New("processor: no such store")

// KV is one entry of a query result, still serialized.
type KV struct {
	Key, Value []byte
}

// QueryResult answers a Get or Range.
type QueryResult struct {
	Entries []KV
	Found   bool
	// Partition that owns the key (Get).
	Partition int32
	// Owner is the owning instance when it is not this one.
	Owner memberInfo
}

type query struct {
	store     string
	get       []byte // key for a Get; nil for a Range
	from, to  []byte
	limit     int
	partition int32 // -1: every local partition (Range)
	reply     chan queryReply
}

type queryReply struct {
	res QueryResult
	err error
}

// Get reads key from store on this instance. The key is serialized; its
// partition is the default partitioner's, as for every store written from a
// keyed stream.
func (a *App) Get(ctx context.Context, storeName string, key []byte) (QueryResult, error) {
	info, ok := a.topo.Store(storeName)
	if !ok {
		return QueryResult{}, fmt.Errorf("%w: %q", ErrUnknownQueryStore, storeName)
	}
	if info.Spec.Kind != store.KindKeyValue {
		return QueryResult{}, fmt.Errorf("processor: store %q is a %s store; Get reads key-value stores", storeName, info.Spec.Kind)
	}
	n, err := a.storePartitions(storeName)
	if err != nil {
		return QueryResult{}, err
	}
	p := DefaultPartition(key, n)
	res, err := a.ask(ctx, &query{store: storeName, get: key, partition: p})
	if errors.Is(err, ErrNotLocal) {
		res.Partition = p
		res.Owner, _ = a.owner(ctx, p)
	}
	return res, err
}

// Range reads [from, to) of a key-value store over this instance's
// partitions, up to limit entries (0: 1000).
func (a *App) Range(ctx context.Context, storeName string, from, to []byte, limit int) (QueryResult, error) {
	info, ok := a.topo.Store(storeName)
	if !ok {
		return QueryResult{}, fmt.Errorf("%w: %q", ErrUnknownQueryStore, storeName)
	}
	if info.Spec.Kind != store.KindKeyValue {
		return QueryResult{}, fmt.Errorf("processor: store %q is a %s store; Range reads key-value stores", storeName, info.Spec.Kind)
	}
	if limit <= 0 {
		limit = 1000
	}
	return a.ask(ctx, &query{store: storeName, from: from, to: to, limit: limit, partition: -1})
}

func (a *App) storePartitions(name string) (int32, error) {
	if a.layout == nil {
		return 0, errors.New("processor: app is not running")
	}
	for i, sub := range a.topo.SubTopologies() {
		for _, spec := range sub.Stores {
			if spec.Name == name {
				return a.layout.tasks[i], nil
			}
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownQueryStore, name)
}

func (a *App) ask(ctx context.Context, q *query) (QueryResult, error) {
	q.reply = make(chan queryReply, 1)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	select {
	case a.queries <- q:
	case <-ctx.Done():
		return QueryResult{}, fmt.Errorf("processor: query %q: %w (is the app running?)", q.store, ctx.Err())
	}
	select {
	case r := <-q.reply:
		return r.res, r.err
	case <-ctx.Done():
		return QueryResult{}, fmt.Errorf("processor: query %q: %w", q.store, ctx.Err())
	}
}

// serveQueries answers every waiting query; called by the loop between
// transactions.
func (s *session) serveQueries() {
	for {
		select {
		case q := <-s.app.queries:
			res, err := s.answer(q)
			q.reply <- queryReply{res, err}
		default:
			return
		}
	}
}

func (s *session) answer(q *query) (QueryResult, error) {
	var res QueryResult
	found := false
	for _, id := range s.sortedTaskIDs() {
		if q.partition >= 0 && id.Partition != q.partition {
			continue
		}
		st, err := s.tasks[id].task.Store(q.store)
		if errors.Is(err, topology.ErrUnknownStore) {
			continue
		}
		if err != nil {
			return res, err
		}
		kv, ok := st.(store.KeyValue)
		if !ok {
			return res, fmt.Errorf("processor: store %q is not a key-value store", q.store)
		}
		found = true
		if q.get != nil {
			v, ok, err := kv.Get(q.get)
			if err != nil {
				return res, err
			}
			res.Found, res.Partition = ok, id.Partition
			if ok {
				res.Entries = []KV{{Key: bytes.Clone(q.get), Value: bytes.Clone(v)}}
			}
			return res, nil
		}
		err = kv.Range(q.from, q.to, func(k, v []byte) bool {
			res.Entries = append(res.Entries, KV{Key: bytes.Clone(k), Value: bytes.Clone(v)})
			return len(res.Entries) < q.limit
		})
		if err != nil {
			return res, err
		}
	}
	if q.get != nil && !found {
		return res, ErrNotLocal
	}
	res.Found = len(res.Entries) > 0
	return res, nil
}

// owner finds the instance that owns partition p from the group's current
// assignment and the instance info in each member's join metadata.
func (a *App) owner(ctx context.Context, p int32) (memberInfo, error) {
	groups, err := a.adm.DescribeGroups(ctx, a.topo.Application())
	if err != nil {
		return memberInfo{}, err
	}
	g, ok := groups[a.topo.Application()]
	if !ok || g.Err != nil {
		return memberInfo{}, fmt.Errorf("processor: describe group: %v", g.Err)
	}
	for _, m := range g.Members {
		asg, ok := m.Assigned.AsConsumer()
		if !ok {
			continue
		}
		for _, t := range asg.Topics {
			for _, part := range t.Partitions {
				if part != p {
					continue
				}
				if meta, ok := m.Join.AsConsumer(); ok {
					if info, ok := decodeMemberInfoUserData(meta.UserData); ok {
						return info, nil
					}
				}
			}
		}
	}
	return memberInfo{}, fmt.Errorf("processor: no member owns partition %d", p)
}
