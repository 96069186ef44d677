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
	if slept := time.Since(start); slept > 50*time.Millisecond {
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
