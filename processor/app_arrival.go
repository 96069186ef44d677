package processor

import "time"

// arrival is the staleness origin the frontier controller is given for the
// output being collected: when its input reached this process, the time
// the poll that returned it came back (records the client prefetched count
// from the poll that handed them to the record loop), or earlier, its
// broker append time when the input topic records LogAppendTime: that
// includes the time the record waited in the broker behind the consumer,
// the measured consumer lag time. It is never the record's event time
// (CreateTime), which producers set and which can be seconds off: a
// controller that measured from it would see staleness it cannot change.
// An append time later than the poll (clocks of different machines) is
// ignored. A record that waited in a partition admission control held
// originates when the hold was released, if that came after its poll
// (partQueue.origin). Outputs without a current input record (wall-clock
// punctuations) originate now, except the updates a record cache held
// back: they originate when the oldest record processed since the last
// flush arrived (app_flush.go), which over- rather than understates them.
//
// The event-time based staleness of outputs (txn.oldest, the per-tenant
// and per-sink metrics the README documents) is unchanged: it answers a
// different question, how far behind event time the outputs are.
func (s *session) arrival() time.Time {
	raw := s.cur.raw
	if raw == nil && s.held.flushing && !s.held.since.IsZero() {
		return s.held.since
	}
	if raw == nil || s.polled.IsZero() {
		return s.now()
	}
	if raw.Attrs.TimestampType() == 1 && raw.Timestamp.Before(s.polled) {
		return raw.Timestamp // LogAppendTime
	}
	return s.polled
}
