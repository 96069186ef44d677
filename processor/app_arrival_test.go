package processor

import (
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestArrivalIsPollTimeNotEventTime: the controller's staleness origin is
// when the input reached the process (or its broker append time, which
// includes the consumer lag), never the producer's event time.
func TestArrivalIsPollTimeNotEventTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	polled := now.Add(-20 * time.Millisecond)
	// RecordAttrs has no exported constructor; a record fetched from a
	// LogAppendTime topic carries bit 3 of its attributes (a uint8).
	var logAppend kgo.RecordAttrs
	*(*uint8)(unsafe.Pointer(&logAppend)) = 0b1000
	if logAppend.TimestampType() != 1 {
		t.Fatalf("test setup: timestamp type %d, want 1", logAppend.TimestampType())
	}
	for _, tt := range []struct {
		name string
		raw  *kgo.Record
		want time.Time
	}{
		{"event time seconds behind: poll time", &kgo.Record{Timestamp: now.Add(-5 * time.Second)}, polled},
		{"event time in the future: poll time", &kgo.Record{Timestamp: now.Add(5 * time.Second)}, polled},
		{"log append time before the poll: append time (consumer lag)", &kgo.Record{Timestamp: polled.Add(-300 * time.Millisecond), Attrs: logAppend}, polled.Add(-300 * time.Millisecond)},
		{"log append time after the poll (clock skew): poll time", &kgo.Record{Timestamp: polled.Add(time.Second), Attrs: logAppend}, polled},
		{"no input record (punctuation): now", nil, now},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &session{now: func() time.Time { return now }, polled: polled, cur: current{raw: tt.raw}}
			if got := s.arrival(); !got.Equal(tt.want) {
				t.Errorf("arrival = %v, want %v", got, tt.want)
			}
		})
	}
}
