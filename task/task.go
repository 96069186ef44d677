package task

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"

	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// Sentinel errors of the task core.
var (
	// ErrUnknownTopic: a record for a topic the task does not read.
	ErrUnknownTopic = errors.New("task: topic not read by task")
	// ErrWrongPartition: a record of another partition than the task's.
	ErrWrongPartition = errors.New("task: record of another partition")
	// ErrClosed: the task was closed.
	ErrClosed = errors.New("task: task closed")
)

// Collector receives the records a task produces, in production order. rec
// and its slices are only valid during the call. An error fails the record
// (or punctuation) being processed.
type Collector interface {
	Collect(task topology.TaskID, rec *topology.OutputRecord) error
}

// CollectorFunc adapts a function to a Collector.
type CollectorFunc func(task topology.TaskID, rec *topology.OutputRecord) error

func (f CollectorFunc) Collect(task topology.TaskID, rec *topology.OutputRecord) error {
	return f(task, rec)
}

// Params are what a task is built from: which sub-topology and partition it
// runs, and what it needs from its runtime. They are not called Config
// because processor.Config configures the service.
type Params struct {
	Topology    *topology.Topology
	SubTopology int
	Partition   int32
	// Stores opens the task's stores (memstore in the test driver, Badger
	// with changelogs in the service).
	Stores store.Provider
	// Output receives produced records.
	Output Collector
	// PartitionCount returns a sink topic's partition count; user
	// partitioners need it. Nil means every topic has one partition.
	PartitionCount func(topic string) (int32, error)
	// WallClock is the runtime's time in ms when the task starts; Punctuate
	// moves it on.
	WallClock int64
	// Resume is the task's time at the last commit, so a record that was
	// late before a restart or an abort is late after it too. The zero
	// value starts every clock at -1.
	Resume Clocks
	// Restore, when set, brings the opened stores up to date before the
	// processors' Init runs (the service restores them from their
	// changelogs here), so a processor that reads its store in Init sees
	// restored state, as it does in the test driver. An error fails
	// New.
	Restore func(stores []OpenStore) error
	// GlobalStores are the instance's global stores (topology.GlobalTable)
	// by name: shared by every task, safe for concurrent reads, filled by
	// the runtime outside the task. The task looks them up for its
	// operators but neither opens, commits nor closes them.
	GlobalStores map[string]store.Store
}

// Clocks are a task's notions of time that outlive it: each input's stream
// time and each windowed operator's clock (topology.ClockKeeper), in ms.
// The service stores them with every commit and passes them back as
// Params.Resume.
type Clocks struct {
	Inputs    map[string]int64 // by input topic
	Operators map[string]int64 // by operator clock name
}

// OpenStore is a store instance a task opened.
type OpenStore struct {
	Spec  store.Spec
	Store store.Store
}

// input is the task's view of one source topic partition.
type input struct {
	topic string
	src   topology.Source
	time  int64 // stream time of this input, -1 before its first record
}

// Task runs one sub-topology for one partition. It is not safe for
// concurrent use: its runtime calls it from one goroutine.
type Task struct {
	id          topology.TaskID
	cfg         Params
	inst        *topology.Instance
	stores      []OpenStore
	storeByName map[string]store.Store
	inputs      map[string]*input
	inputList   []*input
	cur         *input
	meta        topology.RecordMeta
	inputTS     int64
	inRecord    bool
	tenant      string // of the record being processed (topology.TenantKeeper)
	lastTenant  string // the tenant of the last record Process delivered, until TakeTenant
	held        int    // updates held back since TakeHeld (topology.ContextKeeper)
	heldTenant  string // the tenant of the last of them
	punctuating bool
	streamTime  int64
	clocks      map[string]func() int64 // operator clocks, by name
	wall        int64
	lateness    int64
	schedules   []*schedule
	due         []*schedule // runDue's scratch, reused
	metrics     Metrics
	closed      bool
}

// New opens the task's stores, restores them (Params.Restore) and
// instantiates its sub-topology, whose processors' Init then runs.
func New(cfg Params) (*Task, error) {
	if cfg.Topology == nil || cfg.Stores == nil || cfg.Output == nil {
		return nil, fmt.Errorf("task: new task %d_%d: Topology, Stores and Output are required", cfg.SubTopology, cfg.Partition)
	}
	subs := cfg.Topology.SubTopologies()
	if cfg.SubTopology < 0 || cfg.SubTopology >= len(subs) {
		return nil, fmt.Errorf("task: new task %d_%d: topology has %d sub-topologies", cfg.SubTopology, cfg.Partition, len(subs))
	}
	t := &Task{
		id:          topology.TaskID{SubTopology: cfg.SubTopology, Partition: cfg.Partition},
		cfg:         cfg,
		storeByName: map[string]store.Store{},
		inputs:      map[string]*input{},
		streamTime:  -1,
		clocks:      map[string]func() int64{},
		wall:        cfg.WallClock,
		lateness:    cfg.Topology.AllowedLateness().Milliseconds(),
		metrics:     newMetrics(),
	}
	for _, spec := range subs[cfg.SubTopology].Stores {
		s, err := cfg.Stores.Open(spec, cfg.Partition)
		if err != nil {
			t.closeStores()
			return nil, errorf(t, "open store %q: %w", spec.Name, err)
		}
		t.stores = append(t.stores, OpenStore{Spec: spec, Store: s})
		t.storeByName[spec.Name] = s
	}
	if cfg.Restore != nil {
		if err := cfg.Restore(t.Stores()); err != nil {
			t.closeStores()
			return nil, err
		}
	}
	inst, err := cfg.Topology.Instantiate(cfg.SubTopology, (*env)(t))
	if err != nil {
		t.closeStores()
		return nil, err
	}
	t.inst = inst
	for _, topic := range inst.Topics() {
		src, _ := inst.Source(topic)
		in := &input{topic: topic, src: src, time: -1}
		if st, ok := cfg.Resume.Inputs[topic]; ok && st >= 0 {
			in.time = st
			t.streamTime = max(t.streamTime, st)
		}
		t.inputs[topic] = in
		t.inputList = append(t.inputList, in)
	}
	return t, nil
}

func errorf(t *Task, format string, args ...any) error {
	return fmt.Errorf("task %s: "+format, append([]any{t.id}, args...)...)
}

// ID names the task.
func (t *Task) ID() topology.TaskID { return t.id }

// Topics are the source topics the task reads (partition ID().Partition of
// each), sorted.
func (t *Task) Topics() []string { return t.inst.Topics() }

// Stores are the stores the task opened, in declaration order, with their
// specs: what the runtime checkpoints, restores and closes.
func (t *Task) Stores() []OpenStore { return append([]OpenStore(nil), t.stores...) }

// Process runs one input record through the sub-topology, then fires the
// stream-time punctuators it made due. Outputs reach the Collector before
// Process returns.
func (t *Task) Process(rec *topology.InputRecord) error {
	if t.closed {
		return ErrClosed
	}
	in := t.inputs[rec.Topic]
	if in == nil {
		return errorf(t, "%w: %q", ErrUnknownTopic, rec.Topic)
	}
	if rec.Partition != t.id.Partition {
		return errorf(t, "%w: %s/%d", ErrWrongPartition, rec.Topic, rec.Partition)
	}
	t.cur = in
	t.meta = topology.RecordMeta{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}
	t.inputTS = rec.Timestamp
	t.inRecord = true
	t.tenant = ""
	err := in.src.Deliver(rec)
	t.lastTenant = t.tenant
	t.inRecord, t.tenant = false, ""
	if err != nil {
		return errorf(t, "%w", err)
	}
	t.metrics.Processed++
	return t.runDue(topology.StreamTime, t.streamTime)
}

// Flush forwards the updates the task's operators hold back
// (topology.WithRecordCache) through the rest of the sub-topology: their
// outputs reach the Collector before it returns. The runtime calls it
// before every commit, so a transaction carries what its inputs produced.
func (t *Task) Flush() error {
	if t.closed {
		return ErrClosed
	}
	if err := t.inst.Flush(); err != nil {
		return errorf(t, "%w", err)
	}
	return nil
}

// TakeHeld returns how many updates the task's record caches
// (topology.WithRecordCache) held back since the last call, and the tenant
// of the last of them, then forgets them. They reach the Collector only
// at Flush; a runtime that schedules commits by pending outputs counts
// them as pending now.
func (t *Task) TakeHeld() (n int, tenant string) {
	n, tenant = t.held, t.heldTenant
	t.held, t.heldTenant = 0, ""
	return n, tenant
}

// TakeTenant returns the tenant the source named for the last record
// Process delivered (topology.WithTenant, or the tenant carried through a
// repartition topic): the tenant that record's outputs carry, "" for none
// or when its decoding failed. It then forgets it, so a record the runtime
// skipped without Process (a known poison record) reports "". The
// runtime charges the record to that tenant's rate limit.
func (t *Task) TakeTenant() string {
	tenant := t.lastTenant
	t.lastTenant = ""
	return tenant
}

// Punctuate moves the task's wall clock to now (ms; it never goes back) and
// fires the wall-clock punctuators that are due.
func (t *Task) Punctuate(now int64) error {
	if t.closed {
		return ErrClosed
	}
	if now > t.wall {
		t.wall = now
	}
	return t.runDue(topology.WallClockTime, t.wall)
}

// StreamTime is the largest event time processed, -1 before any record.
// Every output produced so far derives from inputs no later than it.
func (t *Task) StreamTime() int64 { return t.streamTime }

// Watermark is the minimum over the task's inputs of (input stream time −
// allowed lateness), or math.MinInt64 before any input has a record. Inputs
// that have not had a record yet do not hold it back, so one idle topic
// cannot stall a task; the runtime should treat a watermark as provisional
// until every input has been read.
func (t *Task) Watermark() int64 {
	wm := int64(math.MaxInt64)
	for _, in := range t.inputList {
		if in.time >= 0 && in.time-t.lateness < wm {
			wm = in.time - t.lateness
		}
	}
	if wm == math.MaxInt64 {
		return math.MinInt64
	}
	return wm
}

// InputStreamTime is the stream time of one input topic, -1 before its
// first record.
func (t *Task) InputStreamTime(topic string) int64 {
	if in := t.inputs[topic]; in != nil {
		return in.time
	}
	return -1
}

// Metrics returns a snapshot of the task's counters.
func (t *Task) Metrics() Metrics { return t.metrics.clone() }

// WindowsClosed is Metrics().WindowsClosed without the copy: the record
// loop reads it after every record.
func (t *Task) WindowsClosed() int64 { return t.metrics.WindowsClosed }

// DroppedBy yields the task's dropped-record counts by operator and reason
// as they stand, without the copy Metrics makes: the service exports them
// on every iteration of its record loop. Do not call the task while
// iterating.
func (t *Task) DroppedBy() iter.Seq2[DropKey, int64] { return maps.All(t.metrics.DroppedBy) }

// Close closes the processors, then the stores, and returns every error.
func (t *Task) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	var errs []error
	if err := t.inst.Close(); err != nil {
		errs = append(errs, errorf(t, "close processors: %w", err))
	}
	if err := t.closeStores(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (t *Task) closeStores() error {
	var errs []error
	for _, s := range t.stores {
		if err := s.Store.Close(); err != nil {
			errs = append(errs, errorf(t, "close store %q: %w", s.Spec.Name, err))
		}
	}
	return errors.Join(errs...)
}
