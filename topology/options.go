package topology

import "time"

// Option configures one DSL operator. Options that do not apply to an
// operator are rejected by Build with an error naming the operator, so a
// misplaced option never silently does nothing.
type Option func(*opConfig)

type opConfig struct {
	name          string
	extractor     any // func(Record[K, V], int64) int64 for the source's K, V
	partitioner   any // func(topic string, key K, value V, n int32) int32
	partitions    int32
	emitFinal     bool
	retention     time.Duration
	hasRetention  bool
	stores        []string
	notLogged     bool
	changelogConf map[string]string
	skipBad       bool
	used          map[string]bool
}

func newOpConfig(opts []Option) *opConfig {
	c := &opConfig{used: map[string]bool{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Named names an operator. A named stateful operator also names its store
// (changelog "<app>-<name>-changelog"); a named GroupBy or Repartition names
// its topic ("<app>-<name>-repartition"). Name every stateful operator whose
// state must survive topology changes.
func Named(name string) Option { return func(c *opConfig) { c.name = name } }

// WithTimestampExtractor sets the event time of records from a source: f gets
// the decoded record (Timestamp is the Kafka record timestamp) and the
// partition's current stream time. A negative result drops the record (counted
// as an invalid timestamp). K and V must match the source's types.
func WithTimestampExtractor[K, V any](f func(rec Record[K, V], partitionTime int64) int64) Option {
	return func(c *opConfig) { c.extractor = f; c.used["extractor"] = true }
}

// WithPartitioner chooses sink partitions; n is the topic's partition count.
// K and V must match the sink's types.
func WithPartitioner[K, V any](f func(topic string, key K, value V, n int32) int32) Option {
	return func(c *opConfig) { c.partitioner = f; c.used["partitioner"] = true }
}

// WithPartitions fixes the partition count of a repartition topic. Without it
// the runtime chooses (by default, the partition count of the upstream
// source topics).
func WithPartitions(n int32) Option {
	return func(c *opConfig) { c.partitions = n; c.used["partitions"] = true }
}

// EmitFinal makes a windowed aggregation emit one result per window, once the
// window has closed (stream time ≥ window end + grace), instead of one per
// update. Kafka Streams calls this EmitStrategy.onWindowClose.
func EmitFinal() Option { return func(c *opConfig) { c.emitFinal = true; c.used["emitFinal"] = true } }

// WithRetention keeps windows and sessions queryable for d of stream time
// after they end. It must be at least the grace period; the default is the
// grace period.
func WithRetention(d time.Duration) Option {
	return func(c *opConfig) { c.retention = d; c.hasRetention = true; c.used["retention"] = true }
}

// WithStores connects a Processor API operator to stores added with
// Builder.AddStore.
func WithStores(names ...string) Option {
	return func(c *opConfig) { c.stores = append(c.stores, names...); c.used["stores"] = true }
}

// WithoutChangelog makes the operator's store unlogged: it is rebuilt by
// reprocessing, not restored from a changelog.
func WithoutChangelog() Option {
	return func(c *opConfig) { c.notLogged = true; c.used["logging"] = true }
}

// WithChangelogConfig overrides topic configs of the operator's changelog.
func WithChangelogConfig(conf map[string]string) Option {
	return func(c *opConfig) { c.changelogConf = conf; c.used["logging"] = true }
}

// SkipUndecodable makes a source drop records whose key or value its serdes
// cannot decode (counted as DropUndecodable) instead of failing the task. Use
// it for topics that may carry poison pills; the default fails loudly.
func SkipUndecodable() Option {
	return func(c *opConfig) { c.skipBad = true; c.used["skipUndecodable"] = true }
}
