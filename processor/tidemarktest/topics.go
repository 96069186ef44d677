package tidemarktest

import (
	"fmt"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// InputTopic pipes typed records into one topic.
type InputTopic[K, V any] struct {
	d          *Driver
	topic      string
	ks         serde.Serde[K]
	vs         serde.Serde[V]
	kbuf, vbuf []byte
}

// Input returns a handle piping K, V records into topic.
func Input[K, V any](d *Driver, topic string, keys serde.Serde[K], values serde.Serde[V]) *InputTopic[K, V] {
	return &InputTopic[K, V]{d: d, topic: topic, ks: keys, vs: values}
}

// Pipe sends one record with event time ts (ms) and processes it, and
// everything it loops back, before returning.
func (in *InputTopic[K, V]) Pipe(key K, value V, ts int64) error {
	return in.PipeRecord(topology.Record[K, V]{Key: key, Value: value, Timestamp: ts})
}

// PipeTombstone sends a record with a null value.
func (in *InputTopic[K, V]) PipeTombstone(key K, ts int64) error {
	return in.PipeRecord(topology.Record[K, V]{Key: key, Timestamp: ts, Tombstone: true})
}

// PipeRecord sends rec, headers, tombstone and null-key flags included. It
// goes to the partition the default partitioner picks for its key bytes
// (partition 0 for a null key: see PipeRecordTo to spread them, as a
// producer would).
func (in *InputTopic[K, V]) PipeRecord(rec topology.Record[K, V]) error {
	return in.PipeRecordTo(rec, -1)
}

// PipeNullKey sends a record with a null key (not the encoding of the zero
// K) to partition.
func (in *InputTopic[K, V]) PipeNullKey(value V, ts int64, partition int32) error {
	return in.PipeRecordTo(topology.Record[K, V]{Value: value, Timestamp: ts, NullKey: true}, partition)
}

// PipeRecordTo sends rec to partition, as a producer choosing the partition
// itself would; -1 picks it from the key bytes as PipeRecord does. A record
// sent to another partition than its key's breaks co-partitioning, like on
// Kafka.
func (in *InputTopic[K, V]) PipeRecordTo(rec topology.Record[K, V], partition int32) error {
	var key []byte
	var err error
	if !rec.NullKey {
		if in.kbuf, err = in.ks.Encode(in.kbuf[:0], rec.Key); err != nil {
			return fmt.Errorf("tidemarktest: encode key for %q: %w", in.topic, err)
		}
		key = in.kbuf
		if key == nil {
			key = []byte{}
		}
	}
	var value []byte
	if !rec.Tombstone {
		if in.vbuf, err = in.vs.Encode(in.vbuf[:0], rec.Value); err != nil {
			return fmt.Errorf("tidemarktest: encode value for %q: %w", in.topic, err)
		}
		value = in.vbuf
		if value == nil {
			value = []byte{}
		}
	}
	return in.d.pipe(in.topic, partition, key, value, rec.Timestamp, rec.Headers)
}

// OutputTopic reads typed records the topology wrote to one topic, in the
// order they were produced (across partitions).
type OutputTopic[K, V any] struct {
	d     *Driver
	topic string
	ks    serde.Serde[K]
	vs    serde.Serde[V]
}

// Output returns a reader of topic.
func Output[K, V any](d *Driver, topic string, keys serde.Serde[K], values serde.Serde[V]) *OutputTopic[K, V] {
	return &OutputTopic[K, V]{d: d, topic: topic, ks: keys, vs: values}
}

// OutputRecord is a record read from an output topic.
type OutputRecord[K, V any] struct {
	topology.Record[K, V]
	Partition int32
	Offset    int64
	// Tenant is the tenant the task attributed the record to (see
	// topology.WithTenant).
	Tenant string
}

// Len is the number of unread records.
func (o *OutputTopic[K, V]) Len() int {
	l := o.d.logs[o.topic]
	if l == nil {
		return 0
	}
	return len(l.recs) - l.read
}

// ReadAll returns the unread records and marks them read.
func (o *OutputTopic[K, V]) ReadAll() ([]OutputRecord[K, V], error) {
	l := o.d.logs[o.topic]
	if l == nil {
		return nil, nil
	}
	var out []OutputRecord[K, V]
	for ; l.read < len(l.recs); l.read++ {
		r := &l.recs[l.read]
		rec := OutputRecord[K, V]{Partition: r.partition, Offset: r.offset, Tenant: r.tenant}
		rec.Timestamp, rec.Headers = r.ts, r.headers
		var err error
		if r.kLen < 0 {
			rec.NullKey = true
		} else if rec.Key, err = o.ks.Decode(l.slice(r.kOff, r.kLen)); err != nil {
			return out, fmt.Errorf("tidemarktest: %s@%d: decode key: %w", o.topic, r.offset, err)
		}
		if r.vLen < 0 {
			rec.Tombstone = true
		} else if rec.Value, err = o.vs.Decode(l.slice(r.vOff, r.vLen)); err != nil {
			return out, fmt.Errorf("tidemarktest: %s@%d: decode value: %w", o.topic, r.offset, err)
		}
		out = append(out, rec)
	}
	l.reset()
	return out, nil
}

// ReadKeyValues returns the unread records as key-value pairs.
func (o *OutputTopic[K, V]) ReadKeyValues() ([]topology.KeyValue[K, V], error) {
	recs, err := o.ReadAll()
	out := make([]topology.KeyValue[K, V], len(recs))
	for i, r := range recs {
		out[i] = topology.KeyValue[K, V]{Key: r.Key, Value: r.Value}
	}
	return out, err
}

// Discard drops the unread records without decoding them (benchmarks).
func (o *OutputTopic[K, V]) Discard() {
	if l := o.d.logs[o.topic]; l != nil {
		l.reset()
	}
}
