package frontier

import (
	"math"
	"time"
)

// TokenBucket is a deterministic token-bucket rate limiter: it refills at
// Rate tokens per second up to Burst and is told the time on every call.
// The zero value admits nothing; build one with NewTokenBucket.
type TokenBucket struct {
	rate, burst float64
	tokens      float64
	last        time.Time
}

// NewTokenBucket returns a full bucket as of now.
func NewTokenBucket(now time.Time, rate, burst float64) TokenBucket {
	return TokenBucket{rate: rate, burst: burst, tokens: burst, last: now}
}

func (b *TokenBucket) refill(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = math.Min(b.burst, b.tokens+b.rate*d.Seconds())
		b.last = now
	}
}

// Take admits n tokens if available and returns (true, 0); otherwise it
// takes nothing and returns false with how long until n tokens will be
// there. A request larger than Burst is admitted when the bucket is full,
// leaving it in debt, so a big batch is delayed rather than refused
// forever.
func (b *TokenBucket) Take(now time.Time, n float64) (bool, time.Duration) {
	b.refill(now)
	need := math.Min(n, b.burst)
	if b.tokens >= need {
		b.tokens -= n
		return true, 0
	}
	if b.rate <= 0 {
		return false, time.Duration(math.MaxInt64)
	}
	return false, time.Duration(math.Ceil((need - b.tokens) / b.rate * 1e9))
}

// Tokens returns the tokens available at now (negative while in debt).
func (b *TokenBucket) Tokens(now time.Time) float64 {
	b.refill(now)
	return b.tokens
}

// tenant is the controller's per-tenant state: its target, its limiter and
// its outputs not yet in a commit.
type tenant struct {
	name    string
	target  time.Duration
	limited bool
	bucket  TokenBucket
	pending batch
}

// batch summarises outputs awaiting commit: how many, the oldest input
// time, and the sum of input times (nanoseconds since the controller's
// epoch, as a float64 so hours of millions of records cannot overflow) for
// the mean.
type batch struct {
	n      int64
	oldest time.Time
	sumIn  float64
}

func (b *batch) add(in time.Time, n int, epoch time.Time) {
	if b.n == 0 || in.Before(b.oldest) {
		b.oldest = in
	}
	b.n += int64(n)
	b.sumIn += float64(n) * float64(in.Sub(epoch))
}

func (b *batch) merge(o batch) {
	if o.n == 0 {
		return
	}
	if b.n == 0 || o.oldest.Before(b.oldest) {
		b.oldest = o.oldest
	}
	b.n += o.n
	b.sumIn += o.sumIn
}
