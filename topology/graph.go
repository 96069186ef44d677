package topology

import (
	"time"

	"github.com/tidemark-streams/tidemark/store"
)

// NodeKind says what a node of the graph does.
type NodeKind int

const (
	KindSource NodeKind = iota + 1
	KindProcessor
	KindSink
)

func (k NodeKind) String() string {
	switch k {
	case KindSource:
		return "Source"
	case KindProcessor:
		return "Processor"
	case KindSink:
		return "Sink"
	}
	return "Unknown"
}

// node is one vertex of the logical graph. Edges are untyped here; the typed
// connection between a node and its children is made by impl at
// instantiation, once per task, so records flow between typed instances
// without boxing.
type node struct {
	name     string
	kind     NodeKind
	op       string // operator kind, e.g. FILTER, AGGREGATE
	topics   []string
	internal bool // source or sink of a repartition topic
	parents  []*node
	children []*node
	stores   []string
	impl     nodeImpl
	seq      int
	// chain and pos drive generated names; see naming.go.
	chain string
	pos   int
	// numbered marks a generated name that shares its base with a
	// sibling's, so that declaration order decides which gets "-2"; see
	// naming.go.
	numbered bool
	// sub is the sub-topology id, set by Build.
	sub int
	// nullKeyRelaxed marks operators that handle null keys themselves (left
	// and outer joins, Kafka Streams' NULL_KEY_RELAXED_JOIN); keepNullKeys,
	// set by Build on repartition sinks, says one is downstream, so the
	// topic carries null keys instead of dropping them (nullkey.go).
	nullKeyRelaxed bool
	keepNullKeys   bool
}

// topics0 is the node's first topic, "" when it has none.
func (n *node) topics0() string {
	if len(n.topics) == 0 {
		return ""
	}
	return n.topics[0]
}

// nodeImpl creates the task-local instance of a node. children are the
// instances of the node's children, in the order of node.children; the
// implementation asserts them to the receiver type of its output.
type nodeImpl interface {
	instantiate(env *opEnv, children []any) (any, error)
}

// receiver is the typed input port of a node instance.
type receiver[K, V any] interface {
	process(rec Record[K, V]) error
}

// receiverFunc adapts a function to a receiver.
type receiverFunc[K, V any] func(rec Record[K, V]) error

func (f receiverFunc[K, V]) process(rec Record[K, V]) error { return f(rec) }

// closer is implemented by instances that hold resources or user code.
type closer interface{ close() error }

// forwarder sends a record to every child. With one child, the common case,
// it is a single interface call.
type forwarder[K, V any] struct {
	one  receiver[K, V]
	many []receiver[K, V]
}

func (f *forwarder[K, V]) forward(rec Record[K, V]) error {
	if f.one != nil {
		return f.one.process(rec)
	}
	for _, c := range f.many {
		if err := c.process(rec); err != nil {
			return err
		}
	}
	return nil
}

func forwarderOf[K, V any](env *opEnv, children []any) (forwarder[K, V], error) {
	var f forwarder[K, V]
	rs := make([]receiver[K, V], 0, len(children))
	for i, c := range children {
		r, ok := c.(receiver[K, V])
		if !ok {
			return f, errorf(env.node, "%w: child %d (%T) does not accept %T", ErrInvalidTopology, i, c, Record[K, V]{})
		}
		rs = append(rs, r)
	}
	if len(rs) == 1 {
		f.one = rs[0]
	} else {
		f.many = rs
	}
	return f, nil
}

// opFunc is the usual nodeImpl: a function making a typed instance from the
// typed forwarder to the children.
type opFunc[KIn, VIn, KOut, VOut any] func(env *opEnv, next forwarder[KOut, VOut]) (receiver[KIn, VIn], error)

func (f opFunc[KIn, VIn, KOut, VOut]) instantiate(env *opEnv, children []any) (any, error) {
	next, err := forwarderOf[KOut, VOut](env, children)
	if err != nil {
		return nil, err
	}
	return f(env, next)
}

// StoreInfo describes a store of the topology.
type StoreInfo struct {
	Spec store.Spec
	// Timestamped stores prefix every value with the 8-byte big-endian
	// timestamp of the record that last updated it (DSL aggregations and
	// tables); see DecodeTimestamped.
	Timestamped bool
	// Versioned stores keep every version of each key for History of stream
	// time (tables with the Versioned option), in the layout of
	// store.VersionedKeyValue: read them with store.NewVersioned.
	Versioned bool
	History   time.Duration
	// Changelog is the changelog topic, "" when the store is not logged.
	Changelog string
	// Nodes are the processors connected to the store.
	Nodes []string
	// TTL is the store's WithTTL, 0 without: a (timestamped key-value)
	// entry whose timestamp is older than stream time − TTL is expired.
	// TTLIndex names the store holding its expiry index and the stream
	// time queries check against (ExpiringKeyValue).
	TTL      time.Duration
	TTLIndex string
}

// InternalTopic is a topic the application creates and owns.
type InternalTopic struct {
	Name string
	// Partitions is the fixed partition count, or 0 when the runtime decides
	// (the upstream source topics' count for repartition topics, the store's
	// task count for changelogs).
	Partitions int32
	// Config holds topic configs (cleanup.policy, retention.ms).
	Config map[string]string
	// SizedByReader topics (without a fixed count) take the partition count
	// of the other inputs of the sub-topology that reads them, with which
	// they are co-partitioned, instead of the count of the sub-topology that
	// writes them: a foreign-key join's subscription and response topics,
	// and the repartition topic of a join input re-keyed before a join with
	// an input that is not.
	SizedByReader bool
}

// CopartitionGroup lists topics whose partition p must be processed by the
// same task: the inputs of a join. The runtime checks that they have the
// same partition count before it starts.
type CopartitionGroup struct {
	// Operator is the join that requires it.
	Operator string
	Topics   []string
}
