package soak

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The state check holds the service's changelog to the input log. Every
// restore, standby and snapshot tail rebuilds a task's state from its
// changelog, so the changelog is the state: if it ever says something the
// input does not, a later failover serves it. The outputs alone cannot
// show that, because a state that went wrong after its last output is
// never output.
//
// Under exactly-once every transaction writes, into the changelog
// partition of the task it processed, the state records it changed and
// then one position record: the input offset its state reflects (the
// offsets the same transaction commits). So, reading a changelog
// partition read_committed from the start, at each position record P the
// state replayed so far must be exactly the counts of the task's valid
// input records below P, key by key. The check replays every partition
// and compares at every position record, which catches a transaction that
// committed state without its input (a zombie's write, an aborted write
// read as committed), input counted twice or skipped, and a position that
// moves back.
//
// The format is tidemark's changelog format, decoded here without
// importing tidemark (as the output checker decodes the decimal strings
// countsvc writes): a key-value record's key is 'k' then the user key, its
// value the 8-byte big-endian timestamp then the count as 8 big-endian
// bytes; the position record's key is the single byte 'p', its value a
// uvarint count of entries, each a uvarint-length topic, a big-endian
// uint32 partition and a big-endian uint64 offset. Compaction could drop a
// key's records that a later one replaces and make an early position look
// wrong; the changelog topics keep the broker's default 1 GiB segments,
// and a scenario writes a few MiB, so the cleaner never runs during one.

// Changelog key tags (changelog/keys.go, changelog/position_record.go).
const (
	changelogTagKeyValue = 'k'
	changelogTagPosition = 'p'
)

// changelogRecord is one committed changelog record.
type changelogRecord struct {
	Offset     int64
	Key, Value []byte
}

// StateReport is what the state check found.
type StateReport struct {
	// Partitions counts the changelog partitions read, Records their
	// state records, Positions their position records (each a check of
	// every key the transactions since the previous one touched).
	Partitions, Records, Positions int
	// Wrong counts keys whose replayed count at a position record is not
	// the input's below the position; Back position records lower than
	// the one before; Trailing partitions whose last records have no
	// position after them; Behind partitions whose last position is
	// short of the input's end; Malformed undecodable records;
	// OffsetsDiffer partitions whose group offset, committed in the same
	// transactions, is not their last position.
	Wrong, Back, Trailing, Behind, Malformed, OffsetsDiffer int
	Examples                                                []string
}

// Findings counts everything the check found wrong.
func (r StateReport) Findings() int {
	return r.Wrong + r.Back + r.Trailing + r.Behind + r.Malformed + r.OffsetsDiffer
}

// Clean reports whether the check found nothing wrong.
func (r StateReport) Clean() bool { return r.Findings() == 0 }

func (r StateReport) String() string {
	return fmt.Sprintf("%d changelog partitions, %d state records, %d positions checked; %d wrong counts, %d positions moved back, %d partitions with state past their last position, %d partitions whose state stops short of the input, %d malformed records, %d group offsets not at the last position",
		r.Partitions, r.Records, r.Positions, r.Wrong, r.Back, r.Trailing, r.Behind, r.Malformed, r.OffsetsDiffer)
}

func (r *StateReport) example(format string, args ...any) {
	if len(r.Examples) < maxExamples {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// inputRecord is one record of an input partition: its offset, and its
// key when it is valid (poison pills count for the position, not a key).
type inputRecord struct {
	offset int64
	key    string
	valid  bool
}

// partitionInput returns each input partition's records in offset order.
func partitionInput(in InputLog) map[int32][]inputRecord {
	out := map[int32][]inputRecord{}
	for k, cs := range in.Offsets {
		for _, c := range cs {
			out[c.Partition] = append(out[c.Partition], inputRecord{offset: c.Offset, key: k, valid: true})
		}
	}
	for c := range in.Poison {
		out[c.Partition] = append(out[c.Partition], inputRecord{offset: c.Offset})
	}
	for _, recs := range out {
		slices.SortFunc(recs, func(a, b inputRecord) int { return cmp.Compare(a.offset, b.offset) })
	}
	return out
}

// CheckState replays each changelog partition (its committed records in
// offset order) and holds it to the input log at every position record
// (see above). inTopic is the input topic; changelog partition p is the
// task of input partition p. committed, when not nil, is the group's
// committed offset of each input partition, which the transactions that
// wrote the positions committed too: it must be the last position.
func CheckState(changelog map[int32][]changelogRecord, in InputLog, inTopic string, committed map[int32]int64) StateReport {
	var rp StateReport
	input := partitionInput(in)
	for _, p := range slices.Sorted(maps.Keys(changelog)) {
		rp.Partitions++
		last := checkStatePartition(&rp, p, changelog[p], input[p], inTopic)
		if off, ok := committed[p]; committed != nil && (!ok || off != last) {
			rp.OffsetsDiffer++
			rp.example("changelog partition %d: last position %d, the group's committed offset %d (committed: %v)", p, last, off, ok)
		}
	}
	// A partition with input but no changelog at all never committed.
	for p, recs := range input {
		if _, ok := changelog[p]; !ok && len(recs) > 0 {
			rp.Behind++
			rp.example("changelog partition %d: empty, its input partition holds %d records", p, len(recs))
		}
	}
	return rp
}

// checkStatePartition checks one changelog partition and returns its last
// position.
func checkStatePartition(rp *StateReport, p int32, recs []changelogRecord, input []inputRecord, inTopic string) int64 {
	state := map[string]int64{} // replayed
	want := map[string]int64{}  // the input's below the last position
	touched := map[string]bool{}
	next, pos := 0, int64(0) // input records below pos are in want
	trailing := false
	for _, r := range recs {
		switch {
		case len(r.Key) == 1 && r.Key[0] == changelogTagPosition:
			// A position without the task's input (a task that had
			// neither processed nor committed any) reflects no input.
			at, ok := positionOf(r.Value, inTopic, p)
			if !ok {
				rp.Malformed++
				rp.example("changelog partition %d offset %d: undecodable position record of %d bytes", p, r.Offset, len(r.Value))
				continue
			}
			rp.Positions++
			trailing = false
			if at < pos {
				rp.Back++
				rp.example("changelog partition %d offset %d: position %d after position %d", p, r.Offset, at, pos)
				continue
			}
			for ; next < len(input) && input[next].offset < at; next++ {
				if ir := input[next]; ir.valid {
					want[ir.key]++
					touched[ir.key] = true
				}
			}
			pos = at
			for _, k := range slices.Sorted(maps.Keys(touched)) {
				if state[k] != want[k] {
					rp.Wrong++
					rp.example("changelog partition %d offset %d: key %s counts %d, the input below position %d holds %d", p, r.Offset, k, state[k], at, want[k])
				}
			}
			clear(touched)
		case len(r.Key) > 1 && r.Key[0] == changelogTagKeyValue:
			rp.Records++
			k := string(r.Key[1:])
			n, ok := int64(0), r.Value == nil // a tombstone: the key is gone
			if len(r.Value) == 16 {
				n, ok = int64(binary.BigEndian.Uint64(r.Value[8:])), true
			}
			if !ok {
				rp.Malformed++
				rp.example("changelog partition %d offset %d: key %s: value of %d bytes, want 16", p, r.Offset, k, len(r.Value))
				continue
			}
			state[k], touched[k], trailing = n, true, true
		default:
			rp.Malformed++
			rp.example("changelog partition %d offset %d: unknown key %q", p, r.Offset, r.Key)
		}
	}
	if trailing {
		rp.Trailing++
		rp.example("changelog partition %d: state records after its last position %d", p, pos)
	}
	if end := inputEnd(input); pos < end {
		rp.Behind++
		rp.example("changelog partition %d: last position %d, the input partition ends at %d", p, pos, end)
	}
	return pos
}

// inputEnd is the offset after a partition's last record.
func inputEnd(input []inputRecord) int64 {
	if len(input) == 0 {
		return 0
	}
	return input[len(input)-1].offset + 1
}

// positionOf decodes a position record's offset for topic/partition: 0
// when it has none; ok is false when it does not decode.
func positionOf(b []byte, topic string, partition int32) (at int64, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return 0, false
	}
	b = b[w:]
	for range n {
		l, w := binary.Uvarint(b)
		if w <= 0 || l > uint64(len(b)-w) || uint64(len(b)-w)-l < 12 {
			return 0, false
		}
		t := string(b[w : w+int(l)])
		b = b[w+int(l):]
		part, off := int32(binary.BigEndian.Uint32(b)), int64(binary.BigEndian.Uint64(b[4:]))
		b = b[12:]
		if t == topic && part == partition {
			at = off
		}
	}
	return at, len(b) == 0
}

// ReadChangelog reads topic's committed records, read_committed, from the
// start to the barrier of b in each of its partitions.
func ReadChangelog(ctx context.Context, brokers []string, topic string, b Barriers) (map[int32][]changelogRecord, error) {
	want := b.want[topic]
	if len(want) == 0 {
		return nil, fmt.Errorf("soak: no barriers in %s", topic)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := map[int32][]changelogRecord{}
	reached := map[int32]bool{}
	for len(reached) < len(want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("soak: read %s: %w (%d of %d partitions read to their barrier)", topic, ctx.Err(), len(reached), len(want))
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				ferr = errors.Join(ferr, fmt.Errorf("partition %d: %w", p, err))
			}
		})
		if ferr != nil {
			return nil, fmt.Errorf("soak: read %s: %w", topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if reached[r.Partition] {
				return
			}
			if headerValue(r, barrierHeader) != "" {
				if string(r.Value) == b.nonce {
					reached[r.Partition] = true
				}
				return
			}
			out[r.Partition] = append(out[r.Partition], changelogRecord{Offset: r.Offset, Key: r.Key, Value: r.Value})
		})
	}
	return out, nil
}

// committedOffsets returns group's committed offsets of topic's
// partitions.
func committedOffsets(ctx context.Context, brokers []string, group, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("soak: committed offsets of %s: %w", group, err)
	}
	out := map[int32]int64{}
	for p, o := range offs[topic] {
		out[p] = o.At
	}
	return out, nil
}
