package frontier

import (
	"testing"
	"time"
)

// BenchmarkTick is one record-loop iteration as the runtime would drive the
// controller: report a millisecond of arrivals, processing and outputs, then
// Tick, acking each commit 10ms after it starts.
func BenchmarkTick(b *testing.B) {
	c, err := NewController(Options{})
	if err != nil {
		b.Fatal(err)
	}
	now := t0
	var doneAt time.Time
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		c.ObserveArrivals(now, 3)
		c.ObserveProcessed(now, 3, 300*time.Microsecond)
		c.ObserveOutput(now, "", now, 3)
		if c.inFlight && !now.Before(doneAt) {
			c.ObserveCommitFinished(now, CommitAck{})
		}
		if d := c.Tick(now); d.Commit {
			c.ObserveCommitStarted(now)
			doneAt = now.Add(10 * time.Millisecond)
		}
	}
}

// BenchmarkTickReplan is the worst case: every Tick re-solves the model.
func BenchmarkTickReplan(b *testing.B) {
	c, err := NewController(Options{Tenants: map[string]TenantOptions{"a": {StalenessTarget: 100 * time.Millisecond}, "b": {}}})
	if err != nil {
		b.Fatal(err)
	}
	now := t0
	for i := 0; i < 1000; i++ {
		now = now.Add(time.Millisecond)
		c.ObserveArrivals(now, 3)
		c.ObserveProcessed(now, 3, 300*time.Microsecond)
		c.ObserveOutput(now, "a", now, 3)
	}
	b.ReportAllocs()
	for b.Loop() {
		c.replanDue = true
		c.Tick(now)
	}
}
