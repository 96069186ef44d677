package soak

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The checker is independent of the service: it decodes outputs as the
// decimal strings the service promises, keeps its own per-key sequence, and
// takes its expectation from the input log. It never imports the service,
// the topology or tidemark's serdes.

// Dead-letter headers the service writes (processor's deadLetter).
const (
	hdrSourceTopic     = "tidemark.source.topic"
	hdrSourcePartition = "tidemark.source.partition"
	hdrSourceOffset    = "tidemark.source.offset"
)

// barrierHeader marks the records the checker itself writes at the end of
// every output and dead-letter partition, once the service is stopped: a
// read_committed reader that reaches one has read every committed record
// before it (an open transaction in front of it holds it back).
const barrierHeader = "soak.barrier"

// InputLog is what the input topic holds: the service's real input.
type InputLog struct {
	Records int
	PerKey  map[string]int // valid records per key
	Poison  map[Coord]bool // poison pills by coordinate
	Valid   map[Coord]bool // valid records by coordinate, to recognise a wrongly dead-lettered one
	// Times holds each key's valid records' timestamps (ms) in offset
	// order, to tell when a failing key's count ran ahead of its input.
	Times map[string][]int64
	// Offsets holds each key's valid records' coordinates, to check the
	// interactive queries' answers (CheckQueries).
	Offsets map[string][]Coord
}

// ScanInput reads topic from the start to its end offsets. The producer is
// stopped and not transactional, so every offset below the end is a record.
func ScanInput(ctx context.Context, brokers []string, topic string) (InputLog, error) {
	log := InputLog{PerKey: map[string]int{}, Poison: map[Coord]bool{}, Valid: map[Coord]bool{}, Times: map[string][]int64{}, Offsets: map[string][]Coord{}}
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return log, err
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	adm.Close()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return log, fmt.Errorf("soak: end offsets of %s: %w", topic, err)
	}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			remaining[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return log, err
	}
	defer cl.Close()
	for len(remaining) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return log, fmt.Errorf("soak: scan %s: %w (%d partitions not read to the end)", topic, ctx.Err(), len(remaining))
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := remaining[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			log.Records++
			c := Coord{r.Partition, r.Offset}
			if headerValue(r, PoisonHeader) != "" {
				log.Poison[c] = true
			} else {
				log.Valid[c] = true
				log.PerKey[string(r.Key)]++
				log.Times[string(r.Key)] = append(log.Times[string(r.Key)], r.Timestamp.UnixMilli())
				log.Offsets[string(r.Key)] = append(log.Offsets[string(r.Key)], c)
			}
			if r.Offset == end-1 {
				delete(remaining, r.Partition)
			}
		})
	}
	return log, nil
}

// Anomaly is one output that breaks a key's sequence, or one final count
// that is off.
type Anomaly struct {
	Kind      string // decrease, repeat, gap, malformed, misrouted, lost, duplicated, unexpected
	Key       string
	Partition int32
	Offset    int64
	Prev      int64 // the key's value before this output (or the expected count)
	Value     int64 // this output's value (or the final count)
	At        time.Duration
	Note      string
}

func (a Anomaly) String() string {
	switch a.Kind {
	case "lost", "duplicated", "unexpected":
		s := fmt.Sprintf("%s key=%s final=%d want=%d (last output %d@%d at +%s)", a.Kind, a.Key, a.Value, a.Prev, a.Partition, a.Offset, a.At.Round(time.Millisecond))
		if a.Note != "" {
			s += "; " + a.Note
		}
		return s
	}
	return fmt.Sprintf("%s key=%s partition=%d offset=%d previous=%d value=%d at +%s", a.Kind, a.Key, a.Partition, a.Offset, a.Prev, a.Value, a.At.Round(time.Millisecond))
}

type keyState struct {
	last      int64
	partition int32
	offset    int64
	at        time.Duration
	history   []output
}

// output is one output of a key, kept to localise a failing key.
type output struct {
	value     int64
	ts        int64 // ms
	partition int32
	offset    int64
}

// Watcher consumes the output and dead-letter topics from the start,
// read_committed, for the whole scenario: it checks each output as it
// becomes visible and measures how long outputs stall while input flows.
type Watcher struct {
	cl           *kgo.Client
	in, out, dlq string
	start        time.Time

	mu        sync.Mutex
	next      map[string]map[int32]int64 // topic → partition → next offset (re-deliveries are skipped)
	keys      map[string]*keyState
	outputs   int
	counts    map[string]int // decrease, repeat, gap, malformed, misrouted
	examples  []Anomaly
	dead      map[Coord]int
	deadAt    map[Coord][]Coord // input coordinate → its dead-letter records
	dlqOther  []string          // dead-letter records that are not from the input topic
	dlqN      int
	barriers  map[string]map[int32]bool
	early     map[string]map[int32]string // barrier nonces read before Reach
	nonce     string
	measuring bool
	lastOut   time.Time
	maxStall  time.Duration
	stallEnd  time.Duration
	err       error
}

// maxExamples bounds the examples kept per kind.
const maxExamples = 5

func NewWatcher(brokers []string, in, out, dlq string, start time.Time) (*Watcher, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(out, dlq),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	return &Watcher{cl: cl, in: in, out: out, dlq: dlq, start: start,
		next: map[string]map[int32]int64{out: {}, dlq: {}}, keys: map[string]*keyState{},
		counts: map[string]int{}, dead: map[Coord]int{}, barriers: map[string]map[int32]bool{out: {}, dlq: {}},
		early: map[string]map[int32]string{out: {}, dlq: {}},
	}, nil
}

// Run consumes until ctx is done.
func (w *Watcher) Run(ctx context.Context) {
	for {
		fs := w.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		w.mu.Lock()
		sawOutput := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < w.next[r.Topic][r.Partition] {
				return
			}
			w.next[r.Topic][r.Partition] = r.Offset + 1
			if headerValue(r, barrierHeader) != "" {
				if string(r.Value) == w.nonce {
					w.barriers[r.Topic][r.Partition] = true
				} else {
					w.early[r.Topic][r.Partition] = string(r.Value)
				}
				return
			}
			if r.Topic == w.out {
				sawOutput = true
				w.onOutput(r)
			} else {
				w.onDeadLetter(r)
			}
		})
		if sawOutput {
			// The window opens at the first output: the service's start is
			// not a stall.
			if w.measuring && !w.lastOut.IsZero() && now.Sub(w.lastOut) > w.maxStall {
				w.maxStall, w.stallEnd = now.Sub(w.lastOut), now.Sub(w.start)
			}
			w.lastOut = now
		}
		w.mu.Unlock()
	}
}

// Close stops the consumer; Run must have returned.
func (w *Watcher) Close() { w.cl.Close() }

func (w *Watcher) anomaly(a Anomaly) {
	w.counts[a.Kind]++
	n := 0
	for _, e := range w.examples {
		if e.Kind == a.Kind {
			n++
		}
	}
	if n < maxExamples {
		w.examples = append(w.examples, a)
	}
}

func (w *Watcher) onOutput(r *kgo.Record) {
	w.outputs++
	key := string(r.Key)
	at := r.Timestamp.Sub(w.start)
	v, err := strconv.ParseInt(string(r.Value), 10, 64)
	if err != nil {
		w.anomaly(Anomaly{Kind: "malformed", Key: key, Partition: r.Partition, Offset: r.Offset, At: at})
		return
	}
	ks := w.keys[key]
	if ks == nil {
		ks = &keyState{partition: r.Partition}
		w.keys[key] = ks
	}
	if ks.partition != r.Partition {
		w.anomaly(Anomaly{Kind: "misrouted", Key: key, Partition: r.Partition, Offset: r.Offset, Prev: ks.last, Value: v, At: at})
	}
	switch prev := ks.last; {
	case v == prev+1:
	case v == prev:
		w.anomaly(Anomaly{Kind: "repeat", Key: key, Partition: r.Partition, Offset: r.Offset, Prev: prev, Value: v, At: at})
	case v < prev:
		w.anomaly(Anomaly{Kind: "decrease", Key: key, Partition: r.Partition, Offset: r.Offset, Prev: prev, Value: v, At: at})
	default:
		w.anomaly(Anomaly{Kind: "gap", Key: key, Partition: r.Partition, Offset: r.Offset, Prev: prev, Value: v, At: at})
	}
	ks.last, ks.offset, ks.at = v, r.Offset, at
	ks.history = append(ks.history, output{v, r.Timestamp.UnixMilli(), r.Partition, r.Offset})
}

// OutputOf finds key's output of count in what the watcher read. Run must
// have returned.
func (w *Watcher) OutputOf(key string, count int64) (Coord, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ks := w.keys[key]
	if ks == nil {
		return Coord{}, false
	}
	// In a passing run a key's outputs are its counts 1, 2, … in order.
	if i := int(count) - 1; i >= 0 && i < len(ks.history) && ks.history[i].value == count {
		return Coord{ks.history[i].partition, ks.history[i].offset}, true
	}
	for _, o := range ks.history {
		if o.value == count {
			return Coord{o.partition, o.offset}, true
		}
	}
	return Coord{}, false
}

// aheadOfInput finds a key's first output whose count is ahead of its
// input: count v stamped earlier than the key's v-th input record. A count
// is stamped with the latest timestamp it aggregates, so a record counted
// twice shows here first. It is a hint for the report, not a verdict.
func aheadOfInput(history []output, times []int64, start time.Time) string {
	prefixMax := make([]int64, len(times))
	for i, t := range times {
		prefixMax[i] = t
		if i > 0 && prefixMax[i-1] > t {
			prefixMax[i] = prefixMax[i-1]
		}
	}
	rel := func(ms int64) time.Duration { return time.UnixMilli(ms).Sub(start).Round(time.Millisecond) }
	for _, o := range history {
		switch {
		case o.value < 1:
		case int(o.value) > len(times):
			return fmt.Sprintf("first count beyond the input: %d at %d@%d stamped +%s", o.value, o.partition, o.offset, rel(o.ts))
		case o.ts < prefixMax[o.value-1]:
			return fmt.Sprintf("first count ahead of its input: %d at %d@%d stamped +%s, but input #%d of the key is stamped +%s",
				o.value, o.partition, o.offset, rel(o.ts), o.value, rel(prefixMax[o.value-1]))
		}
	}
	return ""
}

func (w *Watcher) onDeadLetter(r *kgo.Record) {
	w.dlqN++
	topic := headerValue(r, hdrSourceTopic)
	p, perr := strconv.ParseInt(headerValue(r, hdrSourcePartition), 10, 32)
	o, oerr := strconv.ParseInt(headerValue(r, hdrSourceOffset), 10, 64)
	if topic == "" || perr != nil || oerr != nil {
		w.dlqOther = append(w.dlqOther, fmt.Sprintf("dead-letter %d@%d without origin headers (topic %q partition %q offset %q)",
			r.Partition, r.Offset, topic, headerValue(r, hdrSourcePartition), headerValue(r, hdrSourceOffset)))
		return
	}
	if topic != w.in {
		w.dlqOther = append(w.dlqOther, fmt.Sprintf("dead-letter %d@%d comes from topic %q, not the input %q", r.Partition, r.Offset, topic, w.in))
		return
	}
	c := Coord{int32(p), o}
	w.dead[c]++
	if w.deadAt == nil {
		w.deadAt = map[Coord][]Coord{}
	}
	w.deadAt[c] = append(w.deadAt[c], Coord{r.Partition, r.Offset})
}

// Measure starts (true) or ends (false) the window in which a gap between
// two visible outputs counts as a stall: while input is produced, from the
// first visible output on.
func (w *Watcher) Measure(on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if !on && w.measuring && !w.lastOut.IsZero() && now.Sub(w.lastOut) > w.maxStall {
		w.maxStall, w.stallEnd = now.Sub(w.lastOut), now.Sub(w.start)
	}
	w.measuring = on
}

// Progress says how far the visible outputs are from want: keys whose last
// output is below their expected count, the records those keys miss, and
// poison pills not yet dead-lettered.
func (w *Watcher) Progress(want InputLog) (keysBehind, missing, poisonMissing int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, n := range want.PerKey {
		var last int64
		if ks := w.keys[k]; ks != nil {
			last = ks.last
		}
		if last < int64(n) {
			keysBehind++
			missing += n - int(last)
		}
	}
	for c := range want.Poison {
		if w.dead[c] == 0 {
			poisonMissing++
		}
	}
	return
}

// Stall returns the longest stall measured and when it ended.
func (w *Watcher) Stall() (time.Duration, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxStall, w.stallEnd
}

// Outputs is the number of output records read so far.
func (w *Watcher) Outputs() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.outputs
}

// Barriers is the set of barrier records written once the service is
// stopped, one per output and dead-letter partition.
type Barriers struct {
	nonce string
	want  map[string]map[int32]bool
}

// WriteBarriers writes a barrier record to every partition of topics (the
// output, dead-letter and changelog topics). Call it only once the service
// is stopped: a reader that has reached all of them has read every
// committed record.
func WriteBarriers(ctx context.Context, brokers []string, topics ...string) (Barriers, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return Barriers{}, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return Barriers{}, fmt.Errorf("soak: partitions of %s: %w", strings.Join(topics, ", "), err)
	}
	b := Barriers{nonce: strconv.FormatInt(time.Now().UnixNano(), 36), want: map[string]map[int32]bool{}}
	var recs []*kgo.Record
	ends.Each(func(o kadm.ListedOffset) {
		recs = append(recs, &kgo.Record{Topic: o.Topic, Partition: o.Partition, Key: []byte("soak-barrier"),
			Value: []byte(b.nonce), Headers: []kgo.RecordHeader{{Key: barrierHeader, Value: []byte("1")}}})
		if b.want[o.Topic] == nil {
			b.want[o.Topic] = map[int32]bool{}
		}
		b.want[o.Topic][o.Partition] = true
	})
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return Barriers{}, fmt.Errorf("soak: write barriers: %w", err)
	}
	return b, nil
}

// Reach waits until the watcher has read every barrier of b.
func (w *Watcher) Reach(ctx context.Context, b Barriers) error {
	w.mu.Lock()
	w.nonce = b.nonce
	// A barrier read before the nonce was known counts too.
	for t, ps := range w.early {
		for p, v := range ps {
			if v == b.nonce {
				w.barriers[t][p] = true
			}
		}
	}
	w.mu.Unlock()
	for {
		var pending []string
		w.mu.Lock()
		for t, ps := range b.want {
			if t != w.out && t != w.dlq {
				continue // a topic the watcher does not read
			}
			for p := range ps {
				if !w.barriers[t][p] {
					pending = append(pending, fmt.Sprintf("%s/%d", t, p))
				}
			}
		}
		w.mu.Unlock()
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			sort.Strings(pending)
			return fmt.Errorf("read_committed reader did not reach the end of %s: a transaction left open holds back the last stable offset", strings.Join(pending, ", "))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Report compares everything the watcher read with the input log.
func (w *Watcher) Report(in InputLog) Report {
	inTopic := w.in
	w.mu.Lock()
	defer w.mu.Unlock()
	r := Report{
		Outputs: w.outputs, Decreases: w.counts["decrease"], Repeats: w.counts["repeat"], Gaps: w.counts["gap"],
		Malformed: w.counts["malformed"], Misrouted: w.counts["misrouted"],
		PoisonInLog: len(in.Poison), DeadLetterRecords: w.dlqN, MaxStall: w.maxStall, MaxStallAt: w.stallEnd,
	}
	r.Examples = append(r.Examples, w.examples...)
	for k, n := range in.PerKey {
		r.ValidInLog += n
		ks := w.keys[k]
		var last int64
		a := Anomaly{Key: k, Prev: int64(n), Partition: -1, Offset: -1}
		if ks != nil {
			last = ks.last
			a.Partition, a.Offset, a.At = ks.partition, ks.offset, ks.at
		}
		a.Value = last
		switch {
		case last < int64(n):
			r.Lost += n - int(last)
			r.KeysShort++
			a.Kind = "lost"
			r.finalExample(a)
		case last > int64(n):
			r.Duplicated += int(last) - n
			r.KeysOver++
			a.Kind = "duplicated"
			if ks != nil && r.wantsExample(a.Kind) {
				a.Note = aheadOfInput(ks.history, in.Times[k], w.start)
			}
			r.finalExample(a)
		}
	}
	for k, ks := range w.keys {
		if _, ok := in.PerKey[k]; !ok {
			r.Unexpected++
			r.Duplicated += int(ks.last)
			r.finalExample(Anomaly{Kind: "unexpected", Key: k, Value: ks.last, Partition: ks.partition, Offset: ks.offset, At: ks.at})
		}
	}
	for c := range in.Poison {
		switch n := w.dead[c]; {
		case n == 0:
			r.PoisonMissing++
			if len(r.DeadLetterIssues) < maxExamples {
				r.DeadLetterIssues = append(r.DeadLetterIssues, fmt.Sprintf("poison pill %s/%s not dead-lettered", inTopic, c))
			}
		case n > 1:
			r.PoisonDuplicated += n - 1
			r.PoisonDeadLettered++
			if len(r.DeadLetterIssues) < maxExamples {
				r.DeadLetterIssues = append(r.DeadLetterIssues, fmt.Sprintf("poison pill %s/%s dead-lettered %d times (dead-letter records %v)", inTopic, c, n, w.deadAt[c]))
			}
		default:
			r.PoisonDeadLettered++
		}
	}
	for c, n := range w.dead {
		if !in.Poison[c] {
			r.DeadLetterWrong += n
			if len(r.DeadLetterIssues) < 2*maxExamples {
				what := "not in the input log"
				if in.Valid[c] {
					what = "a valid record"
				}
				r.DeadLetterIssues = append(r.DeadLetterIssues, fmt.Sprintf("dead-lettered %s/%s is %s", inTopic, c, what))
			}
		}
	}
	r.DeadLetterWrong += len(w.dlqOther)
	for i, s := range w.dlqOther {
		if i < maxExamples {
			r.DeadLetterIssues = append(r.DeadLetterIssues, s)
		}
	}
	sort.SliceStable(r.Examples, func(i, j int) bool { return r.Examples[i].Kind < r.Examples[j].Kind })
	return r
}

func (r *Report) wantsExample(kind string) bool {
	n := 0
	for _, e := range r.Finals {
		if e.Kind == kind {
			n++
		}
	}
	return n < maxExamples
}

func (r *Report) finalExample(a Anomaly) {
	n := 0
	for _, e := range r.Finals {
		if e.Kind == a.Kind {
			n++
		}
	}
	if n < maxExamples {
		r.Finals = append(r.Finals, a)
	}
}

// Report is the checker's verdict on one scenario's outputs.
type Report struct {
	ValidInLog, PoisonInLog int
	Outputs                 int
	// Final counts against the input log: Lost is the records whose count
	// never became visible (final below expected), Duplicated the counts
	// beyond it (final above expected, or outputs for keys never produced).
	Lost, Duplicated, KeysShort, KeysOver, Unexpected int
	// Sequence breaks, output by output, in offset order per key.
	Decreases, Repeats, Gaps, Malformed, Misrouted int
	Examples                                       []Anomaly
	Finals                                         []Anomaly
	// Dead letters.
	DeadLetterRecords, PoisonDeadLettered, PoisonMissing, PoisonDuplicated, DeadLetterWrong int
	DeadLetterIssues                                                                        []string
	// MaxStall is the longest wait for the next visible output while input
	// was produced; MaxStallAt is when it ended (since the scenario start).
	MaxStall, MaxStallAt time.Duration
}

// Clean reports whether the outputs are exactly-once.
func (r Report) Clean() bool {
	return r.Lost == 0 && r.Duplicated == 0 && r.Decreases == 0 && r.Repeats == 0 && r.Gaps == 0 &&
		r.Malformed == 0 && r.Misrouted == 0 && r.PoisonMissing == 0 && r.PoisonDuplicated == 0 && r.DeadLetterWrong == 0
}

func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
