package tidemarktest

import "github.com/tidemark-streams/tidemark/topology"

// topicLog holds serialized records in one arena, so that collecting an
// output costs no allocation per record once the arena has grown.
type topicLog struct {
	recs  []logRec
	arena []byte
	read  int
}

type logRec struct {
	topic      string
	partition  int32
	offset     int64
	ts         int64
	kOff, kLen int // kLen -1: null key
	vOff, vLen int // vLen -1: tombstone
	headers    []topology.Header
	tenant     string // OutputRecord.Tenant
}

func (l *topicLog) put(b []byte) (off, n int) {
	if b == nil {
		return 0, -1
	}
	off = len(l.arena)
	l.arena = append(l.arena, b...)
	return off, len(b)
}

func (l *topicLog) add(rec *topology.OutputRecord, p int32, offset int64) {
	r := logRec{topic: rec.Topic, partition: p, offset: offset, ts: rec.Timestamp, tenant: rec.Tenant}
	r.kOff, r.kLen = l.put(rec.Key)
	r.vOff, r.vLen = l.put(rec.Value)
	if len(rec.Headers) > 0 {
		r.headers = make([]topology.Header, len(rec.Headers))
		for i, h := range rec.Headers {
			r.headers[i] = topology.Header{Key: h.Key, Value: append([]byte(nil), h.Value...)}
		}
	}
	l.recs = append(l.recs, r)
}

// slice returns a record's key or value: nil for a null one (n < 0), and
// never nil for an empty one, which slicing an empty arena would give.
func (l *topicLog) slice(off, n int) []byte {
	if n < 0 {
		return nil
	}
	if n == 0 {
		return []byte{}
	}
	return l.arena[off : off+n : off+n]
}

func (l *topicLog) input(i int, in *topology.InputRecord) {
	r := &l.recs[i]
	*in = topology.InputRecord{Topic: r.topic, Partition: r.partition, Offset: r.offset, Timestamp: r.ts,
		Key: l.slice(r.kOff, r.kLen), Value: l.slice(r.vOff, r.vLen), Headers: r.headers}
}

func (l *topicLog) reset() {
	l.recs, l.arena, l.read = l.recs[:0], l.arena[:0], 0
}
