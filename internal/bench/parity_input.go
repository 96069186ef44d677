package bench

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// parityRecord is one input record of `bench parity`: Second puts it on
// the join's second input.
type parityRecord struct {
	Second bool
	Key    string
	Value  string
	Ts     int64 // ms
	// Tombstone: a record with a null value (Value is unused).
	Tombstone bool
}

// parityShape is how parityInput draws timestamps.
type parityShape struct {
	Records, Keys int
	// Base is the first record's timestamp (ms).
	Base int64
	// Step is the mean event-time advance between records (ms).
	Step int64
	// Late is how far behind event time a late record is at least: the
	// window plus its grace, so it falls behind its window's close.
	Late int64
	// LateShare is the share of records Late or more behind (0.05).
	LateShare float64
	// TwoInputs splits the records evenly over two inputs (the join).
	TwoInputs bool
	// Tombstones is the share of records with a null value (the table
	// aggregation's deletes; 0 elsewhere).
	Tombstones float64
}

// parityInput draws the input of `bench parity` from seed: Zipf-skewed keys
// (a few hot, a long cold tail), event time advancing by a random step, of
// which 10% are 0 (equal timestamps), and besides records on time, 15%
// out of order by up to Late, LateShare Late to 2×Late behind, and 3% with
// exactly the timestamp of an earlier record. The same seed and shape give
// the same records.
func parityInput(seed uint64, s parityShape) []parityRecord {
	r := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	zipf := rand.NewZipf(r, 1.1, 2, uint64(s.Keys-1))
	out := make([]parityRecord, 0, s.Records)
	t := s.Base
	for i := range s.Records {
		if r.Float64() >= 0.1 {
			t += r.Int64N(2*s.Step + 1)
		}
		ts := t
		switch p := r.Float64(); {
		case p < s.LateShare:
			ts = t - s.Late - r.Int64N(s.Late+1)
		case p < s.LateShare+0.15:
			ts = t - r.Int64N(s.Late)
		case p < s.LateShare+0.18 && len(out) > 0:
			ts = out[r.IntN(len(out))].Ts
		}
		rec := parityRecord{Key: fmt.Sprintf("k%04d", zipf.Uint64()), Ts: max(ts, 0)}
		if s.TwoInputs && r.IntN(2) == 1 {
			rec.Second = true
			rec.Value = fmt.Sprintf("R%d", i)
		} else if s.TwoInputs {
			rec.Value = fmt.Sprintf("L%d", i)
		} else {
			rec.Value = fmt.Sprintf("v%d", i)
		}
		if s.Tombstones > 0 && r.Float64() < s.Tombstones {
			rec.Tombstone, rec.Value = true, ""
		}
		out = append(out, rec)
	}
	return out
}

// parityBase is a base timestamp for a run starting at now: a whole
// minute an hour back, recent enough that the broker's retention keeps the
// input and outputs.
func parityBase(now time.Time) int64 {
	return now.Add(-time.Hour).Truncate(time.Minute).UnixMilli()
}

// parityTableJoinInput is the stream-table join's input: the stream is
// parityInput's one-input records, and before it, on the second input (the
// table), updates of a quarter as many rows, Zipf-skewed over the same keys,
// 5% of them deletes, all timestamped ten minutes and more before Base,
// before every stream record. Both systems process a task's inputs in
// timestamp order and wait for a partition with records on the broker
// (KIP-695), so every stream record meets each table row's last value: the
// expected pairs follow from the input alone, whatever the fetch timing.
func parityTableJoinInput(seed uint64, s parityShape) []parityRecord {
	stream := parityInput(seed, parityShape{Records: s.Records, Keys: s.Keys, Base: s.Base, Step: s.Step, Late: s.Late, LateShare: s.LateShare})
	r := rand.New(rand.NewPCG(seed^0x7ab1e, seed))
	zipf := rand.NewZipf(r, 1.1, 2, uint64(s.Keys-1))
	n := s.Records / 4
	out := make([]parityRecord, 0, n+len(stream))
	for i := range n {
		rec := parityRecord{Second: true, Key: fmt.Sprintf("k%04d", zipf.Uint64()), Value: fmt.Sprintf("T%d", i),
			Ts: s.Base - 10*60_000 + int64(i)}
		if r.Float64() < 0.05 {
			rec.Tombstone, rec.Value = true, ""
		}
		out = append(out, rec)
	}
	return append(out, stream...)
}
