package changelog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// SleepPacer sleeps busy × (1−share)/share while others are active, and
// not at all otherwise; share 1 is no pacer.
func TestSleepPacerSleepsTheRestOfItsShare(t *testing.T) {
	active := true
	pace := SleepPacer(0.25, func() bool { return active })
	start := time.Now()
	if err := pace(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if slept := time.Since(start); slept < 60*time.Millisecond {
		t.Fatalf("slept %v after 20ms of work at share 0.25, want ≥ 60ms", slept)
	}
	active = false
	start = time.Now()
	_ = pace(context.Background(), time.Second)
	// A wrongful pace sleeps 3 s here (1 s of work at share 0.25).
	if slept := time.Since(start); slept > time.Second {
		t.Fatalf("slept %v with nothing else running, want no wait", slept)
	}
	if SleepPacer(1, func() bool { return true }) != nil {
		t.Fatal("share 1 must not pace")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	active = true
	if err := pace(ctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("pace with a cancelled context: %v, want context.Canceled", err)
	}
}

// A paced reader hands its reader's time to the pace function in
// stretches of at least paceEvery, and passes every byte through.
func TestPacedReaderReportsStretchesOfWork(t *testing.T) {
	var calls []time.Duration
	fn := func(_ context.Context, busy time.Duration) error {
		calls = append(calls, busy)
		return nil
	}
	src := bytes.Repeat([]byte("x"), 1000)
	r := &pacedReader{ctx: context.Background(), r: &slowReader{r: bytes.NewReader(src), d: 4 * time.Millisecond}, p: newPacer(fn)}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, src) {
		t.Fatalf("read %d bytes, err %v; want the %d bytes", len(got), err, len(src))
	}
	if len(calls) == 0 {
		t.Fatal("the pace function was never called")
	}
	for _, c := range calls {
		if c < paceEvery {
			t.Fatalf("a stretch of %v reported, want ≥ %v", c, paceEvery)
		}
	}
}

type slowReader struct {
	r io.Reader
	d time.Duration
}

func (s *slowReader) Read(b []byte) (int, error) {
	time.Sleep(s.d)
	return s.r.Read(b[:min(len(b), 100)])
}

// Workers that share one SleepPacer share its budget: two at once each
// sleep about twice as long as one alone, so that together they work at
// most share of the time.
func TestSleepPacerDividesTheShareAmongWorkers(t *testing.T) {
	const share, stretch, rounds = 0.5, 10 * time.Millisecond, 20
	b := &paceBudget{share: share}
	start := time.Unix(0, 0)
	wake := [2]time.Time{start, start}
	var work time.Duration
	for range rounds {
		for w := range 2 { // both work one stretch from when they woke
			end := wake[w].Add(stretch)
			d := b.spend(end, stretch)
			wake[w] = end.Add(d)
			work += stretch
		}
	}
	last := wake[0]
	if wake[1].After(last) {
		last = wake[1]
	}
	wall := last.Sub(time.Unix(0, 0))
	if got := float64(work) / float64(wall); got > share*1.1 {
		t.Fatalf("two workers did %v of work in %v of wall time (%.2f), want at most share %.2f", work, wall, got, share)
	}
	alone := &paceBudget{share: share}
	if d := alone.spend(time.Unix(1, 0), stretch); d != stretch {
		t.Fatalf("one worker alone slept %v after %v at share %.1f, want %v", d, stretch, share, stretch)
	}
}
