package processor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/internal/retry"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// The global stores of an instance (topology.GlobalTable), Kafka Streams'
// global state: every instance reads every partition of each global topic
// into its own copy, a changelog.GlobalStore under <StateDir>/global/<store>,
// with a consumer of its own (no group, read_committed, so aborted writes
// never reach the store). The group consumer never subscribes a global
// topic: it is not among the topology's SourceTopics.
//
// Lifecycle, all in Run: startGlobal opens the stores and restores them
// up to the topics' last stable offsets before the loop creates any task;
// keep then runs in Run's errgroup, reading on for as long as the App
// runs, so the stores follow their topics while tasks read them
// concurrently (every read and every Apply is a Badger transaction);
// when Run's context ends keep returns, and after every task is closed
// Run closes the consumer and the stores. An error keep cannot retry (a
// failed Badger write, a fetch error that is not transient) ends Run, as
// a dead global thread stops a Kafka Streams instance.
//
// The global stores are outside the tasks' transactions, as in Kafka
// Streams: a task commits its input offsets and outputs, not the global
// value it joined with. Exactly-once holds for what tasks write; a task
// that reprocesses records after an abort or a crash looks them up again
// in the store as it is then.

// globalStores is the App's global state; nil when the topology has none.
type globalStores struct {
	a       *App
	stores  []*globalStore
	byName  map[string]store.Store // what tasks get (task.Params.GlobalStores)
	cl      *kgo.Client
	m       *globalMetrics
	backoff retry.Backoff // after transient fetch errors

	// mu keeps interactive queries (app_global_query.go) off stores
	// that close under them.
	mu     sync.RWMutex
	closed bool
}

// globalStore is one global store and where it stands in its topic.
type globalStore struct {
	info  topology.GlobalStoreInfo
	st    *changelog.GlobalStore
	parts int32
	pos   map[int32]int64 // next offset per partition, as applied
	lag   map[int32]int64 // last stable offset − pos, as of the last fetch
	batch []changelog.GlobalRecord
	moved map[int32]int64
}

type globalMetrics struct {
	restored prometheus.Counter
	applied  *prometheus.CounterVec
	lag      *prometheus.GaugeVec
}

func newGlobalMetrics(a *App) *globalMetrics {
	labels := prometheus.Labels{"app": a.topo.Application()}
	m := &globalMetrics{
		restored: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_global_restore_records_total",
			Help: "Records of global topics read into global stores before the tasks started.", ConstLabels: labels}),
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_global_records_total",
			Help: "Records of global topics applied to global stores (restore included), per store.", ConstLabels: labels}, []string{"store"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tidemark_global_lag_records",
			Help: "Offsets a global store is behind the last stable offsets of its topic, as of its last fetch.", ConstLabels: labels}, []string{"store"}),
	}
	for _, c := range []prometheus.Collector{m.restored, m.applied, m.lag} {
		a.metrics.reg.MustRegister(c)
		a.metrics.registered = append(a.metrics.registered, c)
	}
	return m
}

// startGlobal opens the global stores and brings each up to its topic's
// last stable offsets, every partition, before it returns: Run calls it
// before the loop creates a task, so the first stream record a task
// processes sees every global record committed before the instance
// started. The caller runs keep and, after every task is closed, close.
func (a *App) startGlobal(ctx context.Context) (*globalStores, error) {
	infos := a.topo.GlobalStores()
	if len(infos) == 0 {
		return nil, nil
	}
	if a.globalMetrics == nil {
		a.globalMetrics = newGlobalMetrics(a)
	}
	g := &globalStores{a: a, byName: map[string]store.Store{}, m: a.globalMetrics}
	opts := a.cfg.State
	opts.Logger = a.log
	for _, info := range infos {
		parts, err := a.layout.partitionCount(info.Topic)
		if err != nil {
			g.close()
			return nil, fmt.Errorf("processor: global store %q: %w", info.Spec.Name, err)
		}
		dir := filepath.Join(a.cfg.StateDir, "global", info.Spec.Name)
		st, reload, err := changelog.OpenGlobalStore(dir, info.Spec.Name, info.Topic, opts)
		if err != nil {
			g.close()
			return nil, fmt.Errorf("processor: %w", err)
		}
		if reload != "" {
			a.log.Info("global store: full reload from its topic", "store", info.Spec.Name, "topic", info.Topic, "reason", reload)
		}
		gs := &globalStore{info: info, st: st, parts: parts, pos: st.Position(), lag: map[int32]int64{}, moved: map[int32]int64{}}
		g.stores = append(g.stores, gs)
		g.byName[info.Spec.Name] = st
	}
	if err := g.restore(ctx); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

// restore checks every store's position against its topic, opens the
// consumer there and reads until every partition reaches the last stable
// offset it had when restore began.
func (g *globalStores) restore(ctx context.Context) error {
	a := g.a
	started := time.Now()
	topics := a.topo.GlobalTopics()
	var starts, ends, stable kadm.ListedOffsets
	err := retry.Do(ctx, a.log, "list global topic offsets", func(ctx context.Context) error {
		var err error
		if starts, err = a.adm.ListStartOffsets(ctx, topics...); err == nil {
			err = starts.Error()
		}
		if err == nil {
			if ends, err = a.adm.ListEndOffsets(ctx, topics...); err == nil {
				err = ends.Error()
			}
		}
		if err == nil {
			// read_committed reads up to the last stable offset.
			if stable, err = a.adm.ListCommittedOffsets(ctx, topics...); err == nil {
				err = stable.Error()
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("processor: global stores: list offsets of %v: %w", topics, err)
	}
	assign := map[string]map[int32]kgo.Offset{}
	target := map[*globalStore]map[int32]int64{}
	for _, gs := range g.stores {
		if reason := gs.outOfRange(starts, ends); reason != "" {
			a.log.Warn("global store: full reload from its topic", "store", gs.info.Spec.Name, "topic", gs.info.Topic, "reason", reason)
			if err := gs.st.Reset(); err != nil {
				return fmt.Errorf("processor: %w", err)
			}
			gs.pos = map[int32]int64{}
		}
		assign[gs.info.Topic] = map[int32]kgo.Offset{}
		target[gs] = map[int32]int64{}
		for p := range gs.parts {
			off, ok := gs.pos[p]
			if ok {
				assign[gs.info.Topic][p] = kgo.NewOffset().At(off)
			} else {
				assign[gs.info.Topic][p] = kgo.NewOffset().AtStart()
				if s, found := starts.Lookup(gs.info.Topic, p); found {
					off = s.Offset
				}
			}
			gs.pos[p] = off
			if l, found := stable.Lookup(gs.info.Topic, p); found && l.Offset > off {
				target[gs][p] = l.Offset
			}
		}
	}
	cl, err := kgo.NewClient(a.clientOpts(
		kgo.ConsumePartitions(assign),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Markers move the position: a partition whose last records
		// are a transaction's ends at the offset after its marker.
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(250*time.Millisecond),
		// One poll is one Apply (one Badger transaction per store, split
		// only when too big): bound it as the changelog restore does.
		kgo.FetchMaxPartitionBytes(2<<20),
		kgo.FetchMaxBytes(4<<20),
		// A position that falls below the log start while running
		// (retention) reads on from the start; restore checks positions
		// against the offsets before it opens the consumer.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)...)
	if err != nil {
		return fmt.Errorf("processor: global stores: consumer: %w", err)
	}
	g.cl = cl
	var n int64
	lastMove, lastBehind := time.Now(), int64(-1)
	for {
		var behind int64
		var where []string
		for gs, tps := range target {
			for p, end := range tps {
				if gs.pos[p] < end {
					behind += end - gs.pos[p]
					where = append(where, fmt.Sprintf("%s/%d at %d of %d", gs.info.Topic, p, gs.pos[p], end))
				}
			}
		}
		if behind == 0 {
			break
		}
		// Markers move the position, so the end is always reached; if it
		// is not, say where it stands rather than wait silently.
		if behind != lastBehind {
			lastMove, lastBehind = time.Now(), behind
		} else if time.Since(lastMove) > 30*time.Second {
			lastMove = time.Now()
			a.log.Warn("global stores: restore made no progress for 30s", "partitions", where)
		}
		applied, err := g.poll(ctx)
		if err != nil {
			return fmt.Errorf("processor: global stores: restore: %w", err)
		}
		n += applied
		g.m.restored.Add(float64(applied))
	}
	a.log.Info("global stores restored", "stores", len(g.stores), "records", n, "duration", time.Since(started).Round(time.Millisecond))
	return nil
}

// outOfRange says why a recorded position cannot be resumed from: a
// partition position past the topic's end (the topic was recreated) or
// below its start (the records between are gone), or "" when it can.
func (gs *globalStore) outOfRange(starts, ends kadm.ListedOffsets) string {
	for p, off := range gs.pos {
		if p >= gs.parts {
			return fmt.Sprintf("partition %d is gone (the topic has %d)", p, gs.parts)
		}
		if e, ok := ends.Lookup(gs.info.Topic, p); ok && off > e.Offset {
			return fmt.Sprintf("partition %d: position %d is past the topic's end %d (recreated?)", p, off, e.Offset)
		}
		if s, ok := starts.Lookup(gs.info.Topic, p); ok && off < s.Offset {
			return fmt.Sprintf("partition %d: position %d is below the topic's start %d", p, off, s.Offset)
		}
	}
	return ""
}

// keep reads the global topics on until ctx is done, so the global stores
// follow their topics while tasks run. Errors the client retries by itself
// (a broker restart, a leader move) are logged and waited out with a
// backoff; anything else ends it, and Run, with the error.
func (g *globalStores) keep(ctx context.Context) error {
	for ctx.Err() == nil {
		if _, err := g.poll(ctx); err != nil {
			if ctx.Err() != nil {
				break
			}
			return fmt.Errorf("processor: global stores: %w", err)
		}
	}
	return nil
}

// poll fetches once and applies what it got, one Apply per store: the
// records and the new positions in one Badger transaction.
func (g *globalStores) poll(ctx context.Context) (int64, error) {
	fs := g.cl.PollFetches(ctx)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var ferr error
	var transient bool
	fs.EachError(func(t string, p int32, err error) {
		if retry.Transient(err) {
			transient = true
			g.a.log.Warn("global stores: fetch failed, retrying", "topic", t, "partition", p, "err", err)
			return
		}
		ferr = errors.Join(ferr, fmt.Errorf("fetch %s/%d: %w", t, p, err))
	})
	if ferr != nil {
		return 0, ferr
	}
	if transient {
		_ = retry.Sleep(ctx, g.backoff.Next())
	} else {
		g.backoff.Reset()
	}
	byTopic := map[string]*globalStore{}
	for _, gs := range g.stores {
		byTopic[gs.info.Topic] = gs
	}
	var n int64
	var bad error
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		gs := byTopic[fp.Topic]
		if gs == nil || bad != nil {
			return
		}
		for _, r := range fp.Records {
			if r.Offset < gs.pos[fp.Partition] {
				continue
			}
			// A transaction marker or a null key: nothing to store.
			keep := !r.Attrs.IsControl() && r.Key != nil
			value := r.Value
			if keep && gs.info.Nulls != nil {
				nullKey, tombstone := gs.info.Nulls(r.Key, r.Value)
				keep = !nullKey
				if tombstone {
					value = nil
				}
			}
			if keep {
				if keep, bad = g.check(ctx, gs, r); bad != nil {
					return
				}
			}
			gs.moved[fp.Partition] = r.Offset + 1
			gs.pos[fp.Partition] = r.Offset + 1
			if !keep {
				continue
			}
			rec := changelog.GlobalRecord{Key: r.Key}
			if value != nil {
				rec.Value = topology.EncodeTimestamped(make([]byte, 0, 8+len(value)), r.Timestamp.UnixMilli(), value)
			}
			gs.batch = append(gs.batch, rec)
		}
		if fp.LastStableOffset >= 0 {
			gs.lag[fp.Partition] = max(fp.LastStableOffset-gs.pos[fp.Partition], 0)
		}
	})
	if bad != nil {
		return 0, bad
	}
	for _, gs := range g.stores {
		if len(gs.moved) == 0 {
			continue
		}
		if err := gs.st.Apply(gs.batch, gs.moved); err != nil {
			return n, err
		}
		n += int64(len(gs.batch))
		g.m.applied.WithLabelValues(gs.info.Spec.Name).Add(float64(len(gs.batch)))
		var lag int64
		for _, l := range gs.lag {
			lag += l
		}
		g.m.lag.WithLabelValues(gs.info.Spec.Name).Set(float64(lag))
		clear(gs.batch)
		gs.batch = gs.batch[:0]
		clear(gs.moved)
	}
	return n, nil
}

// check decodes a global record before it is stored: an undecodable one
// would fail every lookup of its key, blaming the stream records that make
// them. It fails the app, naming the record, or with a dead-letter topic
// is skipped (keep false): the key keeps its previous value, as with Kafka
// Streams' LogAndContinueExceptionHandler. It is not dead-lettered: every
// instance reads every global record, on every reload.
//
// A record the serdes could not judge because their schema registry did
// not answer (serde.RegistryUnavailable) is decoded again after a pause,
// as a stream source's transaction is redone, until the registry answers
// or ctx ends: a registry being restarted must not stop the app.
func (g *globalStores) check(ctx context.Context, gs *globalStore, r *kgo.Record) (keep bool, err error) {
	if gs.info.Check == nil {
		return true, nil
	}
	at := recordKey{r.Topic, r.Partition, r.Offset}
	for attempt := 1; ; attempt++ {
		err = gs.info.Check(r.Key, r.Value)
		if err == nil {
			return true, nil
		}
		if !serde.RegistryUnavailable(err) {
			break
		}
		d := registryBackoff(attempt)
		g.a.log.Warn("schema registry unavailable: the global record is decoded again after a pause",
			"store", gs.info.Spec.Name, "record", at.String(), "attempt", attempt, "pause", d, "err", err)
		if err := retry.Sleep(ctx, d); err != nil {
			return false, fmt.Errorf("global store %q: record %s: waiting for the schema registry: %w", gs.info.Spec.Name, at, err)
		}
	}
	if !errors.Is(err, topology.ErrDeserialize) {
		return false, fmt.Errorf("global store %q: record %s: %w", gs.info.Spec.Name, at, err)
	}
	g.a.metrics.deserializationErrors.Inc()
	if g.a.cfg.OnDeserializationError != DeadLetterOnDeserializationError {
		return false, fmt.Errorf("global store %q: record %s: %w", gs.info.Spec.Name, at, err)
	}
	g.a.log.Warn("global store: skipping an undecodable record", "store", gs.info.Spec.Name, "record", at.String(), "err", err)
	return false, nil
}

// taskStores are the stores tasks look global stores up in (nil-safe).
func (g *globalStores) taskStores() map[string]store.Store {
	if g == nil {
		return nil
	}
	return g.byName
}

// close stops the consumer and closes the stores; every task must be
// closed (their operators read the stores).
func (g *globalStores) close() {
	if g == nil {
		return
	}
	g.a.global.CompareAndSwap(g, nil)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	if g.cl != nil {
		g.cl.Close()
	}
	for _, gs := range g.stores {
		if err := gs.st.Close(); err != nil {
			g.a.log.Warn("close global store", "store", gs.info.Spec.Name, "err", err)
		}
	}
}
