package topology

import "time"

// Operator options are typed by the operators they apply to, so an option
// given to an operator it does not apply to is a compile error rather than a
// Build error. Each operator takes the option type of its family:
//
//	Option               every operator: Named only
//	SourceOption         Stream, StreamOf: Named, WithTimestampExtractor, WithTenant, SkipUndecodable
//	SinkOption           To: Named, WithPartitioner, WithPlacement
//	RepartitionOption    Repartition, GroupBy, GroupByKey, Table.GroupBy: Named, WithPartitioner, WithPlacement, WithPartitions
//	StoreOption          Table, ToTable, GlobalTable, Count, Reduce and Aggregate of grouped streams and
//	                     tables, cogroup Aggregate, stream-stream joins, Deduplicate, Table.Suppress:
//	                     Named, WithoutChangelog, WithChangelogConfig (not GlobalTable: its topic is its changelog),
//	                     and (tables and non-windowed aggregations only, else a Build error) WithTTL;
//	                     Versioned too, which only Table and ToTable accept (Build checks)
//	SlidingWindowOption  sliding-window aggregations: the StoreOptions and EmitFinal
//	WindowOption         tumbling, hopping and session-window aggregations and cogroups: the SlidingWindowOptions
//	                     and WithRetention
//	ProcessOption        Process: Named, WithStores
//
// The interfaces nest accordingly: a SinkOption is also a RepartitionOption; a
// StoreOption is also a SlidingWindowOption, which is also a WindowOption; an
// Option (what Named returns) is every one of them. The types of a
// timestamp extractor and a partitioner are still checked by Build against
// the operator's K and V: Go cannot give Named one type that fits every
// operator and also let an option's type carry K and V.
//
// Stateless operators (Filter, Map, Peek, ...), table operators computed on
// read, and stream-table, stream-global, table-table and foreign-key joins
// take Option: a name.

// option is what every option does: set fields of an operator's opConfig.
type option interface{ apply(*opConfig) }

// WindowOption configures a tumbling, hopping or session-window aggregation.
type WindowOption interface {
	option
	windowOption()
}

// SlidingWindowOption configures a sliding-window aggregation (and, being a
// WindowOption, any windowed aggregation).
type SlidingWindowOption interface {
	WindowOption
	slidingWindowOption()
}

// StoreOption configures an operator that owns a store (and, being a
// SlidingWindowOption, any windowed aggregation).
type StoreOption interface {
	SlidingWindowOption
	storeOption()
}

// RepartitionOption configures an operator that writes a repartition topic.
type RepartitionOption interface {
	option
	repartitionOption()
}

// SinkOption configures a sink (To), and, being a RepartitionOption, any
// repartition.
type SinkOption interface {
	RepartitionOption
	sinkOption()
}

// SourceOption configures a source (Stream, StreamOf).
type SourceOption interface {
	option
	sourceOption()
}

// ProcessOption configures a Processor API operator (Process).
type ProcessOption interface {
	option
	processOption()
}

// Option applies to every operator; Named is the only one.
type Option interface {
	SourceOption
	SinkOption
	StoreOption
	ProcessOption
}

// The concrete option types, one per set of families.
type (
	optFunc        func(*opConfig)
	windowOpt      struct{ optFunc }
	slidingOpt     struct{ windowOpt }
	storeOpt       struct{ slidingOpt }
	repartitionOpt struct{ optFunc }
	sinkOpt        struct{ repartitionOpt }
	sourceOpt      struct{ optFunc }
	processOpt     struct{ optFunc }
	nameOpt        string
)

func (f optFunc) apply(c *opConfig)       { f(c) }
func (windowOpt) windowOption()           {}
func (slidingOpt) slidingWindowOption()   {}
func (storeOpt) storeOption()             {}
func (repartitionOpt) repartitionOption() {}
func (sinkOpt) sinkOption()               {}
func (sourceOpt) sourceOption()           {}
func (processOpt) processOption()         {}

func (n nameOpt) apply(c *opConfig)  { c.name = string(n) }
func (nameOpt) windowOption()        {}
func (nameOpt) slidingWindowOption() {}
func (nameOpt) storeOption()         {}
func (nameOpt) repartitionOption()   {}
func (nameOpt) sinkOption()          {}
func (nameOpt) sourceOption()        {}
func (nameOpt) processOption()       {}

type opConfig struct {
	name          string
	topicBase     string           // a repartition topic's base name when not the node's (ToTable)
	extractor     any              // func(Record[K, V], int64) int64 for the source's K, V
	tenant        any              // func(K, V) string for the source's K, V (WithTenant)
	partitioner   any              // func(topic string, key K, value V, n int32) int32
	placement     *TenantPlacement // WithPlacement (placement.go)
	partitions    int32
	hasPartitions bool
	emitFinal     bool
	retention     time.Duration
	hasRetention  bool
	stores        []string
	notLogged     bool
	changelogConf map[string]string
	skipBad       bool
	ttl           time.Duration // WithTTL (ttl.go)
	hasTTL        bool
	ttlAllowed    bool          // set by the operators that honour WithTTL
	versioned     bool          // Versioned: the table keeps history
	history       time.Duration // Versioned's history
	cacheKeys     int           // WithRecordCache (cache.go)
	hasCache      bool
	cacheAllowed  bool // set by the operators that honour WithRecordCache

	// routedPartitioner: partitioner sends each record back to the task
	// that holds its key (the foreign-key join's responses), so it is no
	// custom layout of the topic for queries (PartitionedTopics).
	routedPartitioner bool
}

func newOpConfig[O option](opts []O) *opConfig {
	c := &opConfig{}
	for _, o := range opts {
		o.apply(c)
	}
	return c
}

// repartitions says whether options that only a repartition uses were set.
func (c *opConfig) repartitions() bool {
	return c.partitioner != nil || c.hasPartitions || c.placement != nil
}

// Named names an operator. A named stateful operator also names its store
// (changelog "<app>-<name>-changelog"); a named GroupBy or Repartition names
// its topic ("<app>-<name>-repartition"). Name every stateful operator whose
// state must survive topology changes.
func Named(name string) Option { return nameOpt(name) }

// WithTimestampExtractor sets the event time of records from a source: f gets
// the decoded record (Timestamp is the Kafka record timestamp) and the
// partition's current stream time. A negative result drops the record (counted
// as an invalid timestamp). K and V must match the source's types (Build
// checks).
func WithTimestampExtractor[K, V any](f func(rec Record[K, V], partitionTime int64) int64) SourceOption {
	return sourceOpt{func(c *opConfig) { c.extractor = f }}
}

// WithPartitioner chooses sink partitions; n is the topic's partition count.
// K and V must match the sink's types (Build checks).
func WithPartitioner[K, V any](f func(topic string, key K, value V, n int32) int32) SinkOption {
	return sinkOpt{repartitionOpt{func(c *opConfig) { c.partitioner = f }}}
}

// WithPartitions fixes the partition count of a repartition topic. Without it
// the runtime chooses (by default, the partition count of the upstream
// source topics).
func WithPartitions(n int32) RepartitionOption {
	return repartitionOpt{func(c *opConfig) { c.partitions = n; c.hasPartitions = true }}
}

// EmitFinal makes a windowed aggregation emit one result per window, once the
// window has closed (stream time ≥ window end + grace), instead of one per
// update. Kafka Streams calls this EmitStrategy.onWindowClose, and
// suppress(untilWindowCloses(...)) does the same; tidemark has no
// untilWindowCloses Suppression. To rate-limit a table's updates instead,
// see Table.Suppress.
func EmitFinal() SlidingWindowOption {
	return slidingOpt{windowOpt{func(c *opConfig) { c.emitFinal = true }}}
}

// WithRetention keeps windows and sessions queryable for d of stream time
// after they end. It must be at least the grace period; the default is the
// grace period.
func WithRetention(d time.Duration) WindowOption {
	return windowOpt{func(c *opConfig) { c.retention = d; c.hasRetention = true }}
}

// WithStores connects a Processor API operator to stores added with
// Builder.AddStore.
func WithStores(names ...string) ProcessOption {
	return processOpt{func(c *opConfig) { c.stores = append(c.stores, names...) }}
}

// WithoutChangelog makes the operator's store unlogged: it is rebuilt by
// reprocessing, not restored from a changelog.
func WithoutChangelog() StoreOption {
	return storeOpt{slidingOpt{windowOpt{func(c *opConfig) { c.notLogged = true }}}}
}

// WithChangelogConfig overrides topic configs of the operator's changelog.
func WithChangelogConfig(conf map[string]string) StoreOption {
	return storeOpt{slidingOpt{windowOpt{func(c *opConfig) { c.changelogConf = conf }}}}
}

// SkipUndecodable makes a source drop records whose key or value its serdes
// cannot decode (counted as DropUndecodable) instead of failing the task. Use
// it for topics that may carry poison pills; the default fails loudly.
func SkipUndecodable() SourceOption {
	return sourceOpt{func(c *opConfig) { c.skipBad = true }}
}
