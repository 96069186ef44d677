// Package tidemarktest runs a topology in memory, deterministically and
// without a broker, through the same task.Task code the service (package
// processor) runs.
// It is modelled on Kafka Streams' TopologyTestDriver: pipe records with
// timestamps into input topics, read what the topology wrote to output
// topics, inspect stores, and advance the wall clock to fire punctuators.
//
// Records written to topics the topology also reads (repartition topics and
// user topics read back) are looped back in memory, breadth-first, before
// Pipe returns. Every topic has one partition unless WithPartitions says
// otherwise; records are partitioned with task.DefaultPartition, like
// the Java client, so co-partitioning behaves as it would on Kafka. Null
// keys and values are kept apart from empty ones all the way: pipe a record
// with Record.NullKey (PipeNullKey, PipeRecordTo to choose its partition as
// a producer spreading them would), and read NullKey and Tombstone back on
// OutputRecord.
package tidemarktest

import (
	"errors"
	"fmt"
	"time"

	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/store/memstore"
	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// Option configures a Driver.
type Option func(*config)

type config struct {
	wall       time.Time
	partitions map[string]int32
	defParts   int32
	provider   store.Provider
}

// WithWallClock sets the initial wall-clock time (default: the Unix epoch,
// so runs are reproducible).
func WithWallClock(t time.Time) Option { return func(c *config) { c.wall = t } }

// WithPartitions gives topic n partitions.
func WithPartitions(topic string, n int32) Option {
	return func(c *config) { c.partitions[topic] = n }
}

// WithDefaultPartitions gives every topic without WithPartitions n
// partitions (default 1).
func WithDefaultPartitions(n int32) Option { return func(c *config) { c.defParts = n } }

// WithStoreProvider replaces the in-memory stores.
func WithStoreProvider(p store.Provider) Option { return func(c *config) { c.provider = p } }

// Driver runs a topology. It is not safe for concurrent use.
type Driver struct {
	topo     *topology.Topology
	cfg      config
	tasks    map[topology.TaskID]*task.Task
	order    []*task.Task
	logs     map[string]*topicLog
	topics   map[string]*topicState
	loop     topicLog // records queued for loop-back
	queue    []queued
	wall     int64
	in       topology.InputRecord
	draining bool
	closed   bool
	globals  *globalStores // global.go
}

type queued struct {
	task *task.Task
	rec  int // index into loop.recs
}

// New creates one task per sub-topology and partition. It checks the
// topology's co-partitioning requirements against the configured partition
// counts, as the service will against the cluster's.
func New(topo *topology.Topology, opts ...Option) (*Driver, error) {
	cfg := config{wall: time.Unix(0, 0), partitions: map[string]int32{}, defParts: 1, provider: memstore.NewProvider()}
	for _, o := range opts {
		o(&cfg)
	}
	d := &Driver{
		topo:   topo,
		cfg:    cfg,
		tasks:  map[topology.TaskID]*task.Task{},
		logs:   map[string]*topicLog{},
		topics: map[string]*topicState{},
		wall:   cfg.wall.UnixMilli(),
	}
	for _, r := range topo.RepartitionTopics() {
		if _, set := cfg.partitions[r.Name]; !set && r.Partitions > 0 {
			cfg.partitions[r.Name] = r.Partitions
		}
	}
	// Repartition topics without a fixed count get their writer's input
	// count, as the service will create them. Writers come before readers
	// in sub-topology order, so one pass suffices for chains.
	// Topics sized by their reader take the count of the reader's other
	// inputs instead, and those of a co-partition group the group's.
	byReader := map[string]bool{}
	for _, r := range topo.RepartitionTopics() {
		byReader[r.Name] = r.SizedByReader
	}
	explicit := map[string]bool{}
	for topic := range cfg.partitions {
		explicit[topic] = true
	}
	for i, st := range topo.SubTopologies() {
		// The repartition topics of a co-partition group take the
		// group's count, as the service sizes them.
		for topic, n := range topo.CopartitionedCounts(i, func(topic string) (int32, bool) {
			return d.partitionCount(topic), true
		}) {
			if !explicit[topic] {
				cfg.partitions[topic] = n
			}
		}
		var n int32
		for _, topic := range st.SourceTopics {
			if !byReader[topic] {
				n = max(n, d.partitionCount(topic))
			}
		}
		for _, topic := range st.SourceTopics {
			if _, set := cfg.partitions[topic]; !set && byReader[topic] {
				cfg.partitions[topic] = n
			}
		}
		for _, topic := range st.SinkTopics {
			if _, set := cfg.partitions[topic]; !set && topo.IsRepartitionTopic(topic) && !byReader[topic] {
				cfg.partitions[topic] = n
			}
		}
	}
	if err := d.openGlobals(); err != nil {
		return nil, err
	}
	ids, err := task.IDs(topo, func(topic string) (int32, bool) { return d.partitionCount(topic), true })
	if err != nil {
		return nil, fmt.Errorf("tidemarktest: %w", err)
	}
	if err := topo.CheckPlacements(func(topic string) (int32, bool) { return d.partitionCount(topic), true }); err != nil {
		d.Close()
		return nil, fmt.Errorf("tidemarktest: %w", err)
	}
	for _, id := range ids {
		t, err := task.New(task.Params{
			Topology:    topo,
			SubTopology: id.SubTopology,
			Partition:   id.Partition,
			Stores:      cfg.provider,
			Output:      task.CollectorFunc(d.collect),
			PartitionCount: func(topic string) (int32, error) {
				return d.partitionCount(topic), nil
			},
			WallClock:    d.wall,
			GlobalStores: d.globals.byName,
		})
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("tidemarktest: %w", err)
		}
		d.tasks[id] = t
		d.order = append(d.order, t)
	}
	return d, nil
}

func (d *Driver) partitionCount(topic string) int32 {
	if n, ok := d.cfg.partitions[topic]; ok {
		return n
	}
	return d.cfg.defParts
}

// topicState caches what the driver knows about a topic, so that piping
// and collecting a record cost one map lookup each.
type topicState struct {
	partitions int32
	offsets    []int64
	repart     bool
	log        *topicLog    // nil for repartition topics
	tasks      []*task.Task // per partition; nil when no task reads it
}

func (d *Driver) topic(name string) *topicState {
	if ts := d.topics[name]; ts != nil {
		return ts
	}
	ts := &topicState{partitions: d.partitionCount(name), repart: d.topo.IsRepartitionTopic(name)}
	ts.offsets = make([]int64, ts.partitions)
	if !ts.repart {
		ts.log = &topicLog{}
		d.logs[name] = ts.log
	}
	if sub, ok := d.topo.SubTopologyOf(name); ok {
		ts.tasks = make([]*task.Task, ts.partitions)
		for p := range ts.tasks {
			ts.tasks[p] = d.tasks[topology.TaskID{SubTopology: sub, Partition: int32(p)}]
		}
	}
	d.topics[name] = ts
	return ts
}

// collect is every task's Collector: it keeps the record for Output readers
// (repartition topics excepted) and queues it for loop-back when the
// topology reads its topic.
func (d *Driver) collect(_ topology.TaskID, rec *topology.OutputRecord) error {
	if err := d.globals.update(rec.Topic, rec.Key, rec.Value, rec.Timestamp); err != nil {
		return err
	}
	ts := d.topic(rec.Topic)
	p := rec.Partition
	if p < 0 {
		p = task.DefaultPartition(rec.Key, ts.partitions)
	}
	if p >= ts.partitions {
		return fmt.Errorf("tidemarktest: partition %d of %q, which has %d", p, rec.Topic, ts.partitions)
	}
	off := ts.offsets[p]
	ts.offsets[p]++
	if ts.log != nil {
		ts.log.add(rec, p, off)
	}
	if ts.tasks != nil {
		t := ts.tasks[p]
		if t == nil {
			return fmt.Errorf("tidemarktest: no task for %s/%d", rec.Topic, p)
		}
		d.loop.add(rec, p, off)
		d.queue = append(d.queue, queued{task: t, rec: len(d.loop.recs) - 1})
	}
	return nil
}

// drain processes looped-back records until none are left.
func (d *Driver) drain() error {
	if d.draining {
		return nil
	}
	d.draining = true
	defer func() { d.draining = false }()
	for i := 0; i < len(d.queue); i++ {
		q := d.queue[i]
		d.loop.input(q.rec, &d.in)
		if err := processAndFlush(q.task, &d.in); err != nil {
			d.queue, d.loop.recs, d.loop.arena = d.queue[:0], d.loop.recs[:0], d.loop.arena[:0]
			return err
		}
	}
	d.queue = d.queue[:0]
	d.loop.reset()
	return nil
}

// pipe sends one serialized record to the task reading partition p of
// topic (p < 0: the default partitioner's choice for key).
func (d *Driver) pipe(topic string, p int32, key, value []byte, ts0 int64, headers []topology.Header) error {
	if d.closed {
		return errors.New("tidemarktest: driver closed")
	}
	if d.globals.reads(topic) {
		return d.globals.update(topic, key, value, ts0)
	}
	ts := d.topic(topic)
	if ts.tasks == nil {
		return fmt.Errorf("tidemarktest: topology does not read topic %q", topic)
	}
	if p < 0 {
		p = task.DefaultPartition(key, ts.partitions)
	} else if p >= ts.partitions {
		return fmt.Errorf("tidemarktest: partition %d of %q, which has %d", p, topic, ts.partitions)
	}
	t := ts.tasks[p]
	off := ts.offsets[p]
	ts.offsets[p]++
	d.in = topology.InputRecord{Topic: topic, Partition: p, Offset: off, Key: key, Value: value, Timestamp: ts0, Headers: headers}
	if err := processAndFlush(t, &d.in); err != nil {
		return err
	}
	return d.drain()
}

// processAndFlush processes one record and forwards what record caches
// (topology.WithRecordCache) hold, as if every input committed: a test
// sees each update, as with Kafka Streams' TopologyTestDriver.
func processAndFlush(t *task.Task, in *topology.InputRecord) error {
	if err := t.Process(in); err != nil {
		return err
	}
	return t.Flush()
}

// AdvanceWallClock moves the wall clock forward and fires the wall-clock
// punctuators of every task that are due.
func (d *Driver) AdvanceWallClock(by time.Duration) error {
	d.wall += by.Milliseconds()
	for _, t := range d.order {
		if err := t.Punctuate(d.wall); err != nil {
			return err
		}
		if err := t.Flush(); err != nil {
			return err
		}
		if err := d.drain(); err != nil {
			return err
		}
	}
	return nil
}

// WallClock is the driver's current wall-clock time.
func (d *Driver) WallClock() time.Time { return time.UnixMilli(d.wall) }

// Tasks are the driver's tasks, by sub-topology then partition.
func (d *Driver) Tasks() []*task.Task { return append([]*task.Task(nil), d.order...) }

// Metrics sums the counters of every task, including dropped records.
func (d *Driver) Metrics() task.Metrics {
	var m task.Metrics
	for _, t := range d.order {
		m = m.Add(t.Metrics())
	}
	return m
}

// Store returns the instance of the named store in the task of partition p.
func (d *Driver) Store(name string, p int32) (store.Store, error) {
	for _, t := range d.order {
		if t.ID().Partition != p {
			continue
		}
		for _, s := range t.Stores() {
			if s.Spec.Name == name {
				return s.Store, nil
			}
		}
	}
	return nil, fmt.Errorf("tidemarktest: no store %q in partition %d", name, p)
}

// stores returns every partition's instance of the named store.
func (d *Driver) stores(name string) ([]store.Store, error) {
	var out []store.Store
	for _, t := range d.order {
		for _, s := range t.Stores() {
			if s.Spec.Name == name {
				out = append(out, s.Store)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("tidemarktest: no store %q", name)
	}
	return out, nil
}

// Close closes every task.
func (d *Driver) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	for _, t := range d.order {
		errs = append(errs, t.Close())
	}
	errs = append(errs, d.globals.close())
	return errors.Join(errs...)
}
