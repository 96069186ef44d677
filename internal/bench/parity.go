package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ParityWorkloads are the workloads `bench parity` compares: the per-key
// count, the tumbling-window count (final results only), the stream-stream
// inner, left and outer joins, the session-window count (final results
// only) and a table re-keyed and counted (a subtraction for every update).
var ParityWorkloads = []string{"count", "windowed", "join", "left-join", "outer-join", "session", "table-agg", "table-join"}

// parityJoins are the join workloads and the peers' workload that runs
// each: two inputs, compared as multisets of pairs.
var parityJoins = map[string]string{"join": "stream-join", "left-join": "stream-left-join", "outer-join": "stream-outer-join",
	"table-join": "table-left-join"}

// ParityOptions configure RunParity. Zero fields take defaults from
// EnsureDefaults.
type ParityOptions struct {
	Brokers   []string
	Workloads []string
	// Seed draws the input (default: the time); the report logs it.
	Seed uint64
	// Records per workload (default 20000; the join splits them over its
	// two inputs), Keys the Zipf-skewed key space (default 200).
	Records, Keys int
	Partitions    int32
	// WindowSize and Grace of the windowed count (default 2s, 500ms);
	// JoinWindow and Grace are the joins' (default ±1s); SessionGap and
	// Grace the session count's (default 500ms).
	WindowSize, Grace, JoinWindow, SessionGap time.Duration
	// Step is the mean event-time advance per record (default 10ms).
	Step    time.Duration
	Env     Env
	WorkDir string
}

// EnsureDefaults fills zero fields and validates the rest.
func (o *ParityOptions) EnsureDefaults() error {
	if len(o.Brokers) == 0 {
		return errors.New("bench parity: Brokers is required")
	}
	if len(o.Workloads) == 0 {
		o.Workloads = ParityWorkloads
	}
	for _, w := range o.Workloads {
		if !slices.Contains(ParityWorkloads, w) {
			return fmt.Errorf("bench parity: unknown workload %q (want one of %v)", w, ParityWorkloads)
		}
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	o.Records = cmp.Or(o.Records, 20_000)
	o.Keys = cmp.Or(o.Keys, 200)
	if o.Keys < 3 {
		return fmt.Errorf("bench parity: Keys %d: want at least 3", o.Keys)
	}
	o.Partitions = cmp.Or(o.Partitions, 4)
	o.WindowSize = cmp.Or(o.WindowSize, 2*time.Second)
	o.Grace = cmp.Or(o.Grace, 500*time.Millisecond)
	o.JoinWindow = cmp.Or(o.JoinWindow, time.Second)
	o.SessionGap = cmp.Or(o.SessionGap, 500*time.Millisecond)
	o.Step = cmp.Or(o.Step, 10*time.Millisecond)
	base := Options{Brokers: o.Brokers, Env: o.Env, WorkDir: o.WorkDir}
	if err := base.EnsureDefaults(); err != nil {
		return err
	}
	o.Env, o.WorkDir = base.Env, base.WorkDir
	return nil
}

// paritySystems are the two systems compared: Kafka Streams with its
// defaults under exactly_once_v2 (record cache on, 100 ms commits) and
// tidemark's adaptive policy.
var paritySystems = []System{
	{Name: "kstreams", Kind: "kstreams"},
	{Name: "tidemark-adaptive", Kind: "tidemark", Policy: "adaptive"},
}

// RunParity runs Kafka Streams and tidemark one after the other on the
// same input of every workload, reads both outputs read_committed to the
// end, and compares them. A workload that fails records its error and the
// run goes on.
func RunParity(ctx context.Context, o ParityOptions, progress func(string)) (*ParityReport, error) {
	if err := o.EnsureDefaults(); err != nil {
		return nil, err
	}
	if err := checkWorkers(paritySystems); err != nil {
		return nil, err
	}
	cl, err := driverClient(ctx, o.Brokers)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	h := &harness{o: Options{Brokers: o.Brokers, Partitions: o.Partitions, WorkDir: o.WorkDir, Env: o.Env}, cl: cl, adm: kadm.NewClient(cl), progress: progress}
	now := time.Now()
	rep := &ParityReport{Started: now, Machine: machine(), Seed: o.Seed, BaseMs: parityBase(now),
		Options: fmt.Sprintf("records=%d keys=%d partitions=%d window=%s grace=%s join-window=±%s session-gap=%s step=%s",
			o.Records, o.Keys, o.Partitions, o.WindowSize, o.Grace, o.JoinWindow, o.SessionGap, o.Step)}
	progress(fmt.Sprintf("parity: seed %d, base time %d ms", o.Seed, rep.BaseMs))
	for _, w := range o.Workloads {
		rep.Workloads = append(rep.Workloads, h.parity(ctx, o, w, rep.BaseMs))
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	rep.Duration = time.Since(rep.Started).Round(time.Second).String()
	return rep, nil
}

// parity runs one workload on both systems and compares their outputs.
func (h *harness) parity(ctx context.Context, o ParityOptions, w string, base int64) ParityWorkload {
	res := ParityWorkload{Workload: w, RecordsIn: o.Records}
	shape := parityShape{Records: o.Records, Keys: o.Keys, Base: base, Step: o.Step.Milliseconds(),
		Late: (o.WindowSize + o.Grace).Milliseconds(), LateShare: 0.05}
	peer, window, join := parityWorkload(o, w)
	switch {
	case w == "table-join":
		shape.TwoInputs = true // the table (parityTableJoinInput)
	case join:
		// Late past what the join's stores keep: before + after + grace.
		shape.Late, shape.TwoInputs = (2*o.JoinWindow + o.Grace).Milliseconds(), true
	case w == "session":
		// Late past a session's close: gap + grace.
		shape.Late = (o.SessionGap + o.Grace).Milliseconds()
	case w == "table-agg":
		// Deletes of rows, present or not; timestamps do not order a
		// table's updates (offsets do), so out-of-order ones stay.
		shape.Tombstones = 0.05
	}
	input := parityInput(o.Seed, shape)
	if w == "table-join" {
		input = parityTableJoinInput(o.Seed, shape)
	}
	res.RecordsIn = len(input)
	h.seq++
	id := fmt.Sprintf("parity-%d-%s-%d", time.Now().Unix(), w, h.seq)
	in, in2 := id+"-in", ""
	topics := []string{in}
	if join {
		in2 = id + "-in2"
		topics = append(topics, in2)
	}
	var jobs []Job
	defer func() {
		for _, j := range jobs {
			h.cleanup(j)
		}
	}()
	for _, s := range paritySystems {
		job := Job{Brokers: o.Brokers, Workload: peer, AppID: id + "-" + s.Name, Input: in, Table: in2,
			Output: id + "-" + s.Name + "-out", Partitions: o.Partitions, StateDir: filepath.Join(o.WorkDir, id+"-"+s.Name),
			Policy: s.Policy, WindowSize: window, Grace: o.Grace}
		jobs = append(jobs, job)
		topics = append(topics, job.Output)
	}
	if err := h.createTopics(ctx, topics...); err != nil {
		res.Error = err.Error()
		return res
	}
	h.progress(fmt.Sprintf("parity %s: producing %d records", w, len(input)))
	if err := produceParity(ctx, h.cl, in, in2, input); err != nil {
		res.Error = err.Error()
		return res
	}
	outs := make([][]outRecord, len(paritySystems))
	for i, s := range paritySystems {
		if w == "session" && s.Kind == "kstreams" {
			// Without its record cache: with it, an update reaches the
			// suppression only at a cache flush (a commit, by wall-clock
			// time), and whether a session that a later record merges was
			// already emitted as final depends on that timing, not on the
			// input (README, Results parity).
			s.NoCache = true
		}
		h.progress(fmt.Sprintf("parity %s: running %s", w, s.Name))
		recs, err := h.runToEnd(ctx, s, jobs[i])
		if err != nil {
			res.Error = fmt.Sprintf("%s: %v", s.Name, err)
			return res
		}
		outs[i] = recs
	}
	ks, tm := outs[0], outs[1]
	res.Streams = ParitySide{System: paritySystems[0].Name, Outputs: len(ks)}
	res.Tidemark = ParitySide{System: paritySystems[1].Name, Outputs: len(tm)}
	if join {
		compareEntries(&res, pairCounts(tm), pairCounts(ks))
		res.Tidemark.Total, res.Streams.Total = int64(len(tm)), int64(len(ks))
	} else if w == "table-agg" {
		compareEntries(&res, nonZero(finalValues(tm)), nonZero(finalValues(ks)))
	} else {
		compareEntries(&res, finalValues(tm), finalValues(ks))
	}
	h.progress(fmt.Sprintf("parity %s: tidemark %d entries, Kafka Streams %d, %d mismatches", w, res.Tidemark.Entries, res.Streams.Entries, res.Mismatches))
	return res
}

// parityWorkload is the workload both systems run for parity workload w,
// its window (the tumbling window, the joins' time difference or the
// session gap), and whether it joins two inputs.
func parityWorkload(o ParityOptions, w string) (peer string, window time.Duration, join bool) {
	if peer, ok := parityJoins[w]; ok {
		return peer, o.JoinWindow, true
	}
	if w == "session" {
		return w, o.SessionGap, false
	}
	return w, o.WindowSize, false
}

// produceParity writes the input in order (per partition, the order the
// systems read it in) and waits until the broker has it all.
func produceParity(ctx context.Context, cl *kgo.Client, in, in2 string, recs []parityRecord) error {
	errs := make(chan error, 1)
	for _, r := range recs {
		topic := in
		if r.Second {
			topic = in2
		}
		kr := &kgo.Record{Topic: topic, Key: []byte(r.Key), Value: []byte(r.Value), Timestamp: time.UnixMilli(r.Ts)}
		if r.Tombstone {
			kr.Value = nil
		}
		cl.Produce(ctx, kr, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("bench parity: produce input: %w", err)
	}
	select {
	case err := <-errs:
		return fmt.Errorf("bench parity: produce input: %w", err)
	default:
		return nil
	}
}

// runToEnd runs s on job until its group has committed the end of every
// input, stops it, and reads its output read_committed to the end.
func (h *harness) runToEnd(ctx context.Context, s System, job Job) ([]outRecord, error) {
	if err := os.MkdirAll(job.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	p, err := s.start(ctx, h.o.Env, job)
	if err != nil {
		return nil, err
	}
	inputs := []string{job.Input}
	if job.Table != "" {
		inputs = append(inputs, job.Table)
	}
	for _, topic := range inputs {
		if _, err = throughput(ctx, h.adm, job.AppID, topic, p.readyAt, 5*time.Minute); err != nil {
			break
		}
	}
	if err == nil {
		// The inputs' transactions are in: now the records they wrote to
		// repartition topics must be consumed too (table-agg), or the
		// output misses the last updates of every group.
		err = h.drainRepartitions(ctx, job.AppID, 5*time.Minute)
	}
	if exited := p.exitedEarly(); exited != nil && err == nil {
		err = exited
	}
	p.stop()
	if err != nil {
		return nil, err
	}
	return readToEnd(ctx, h.o.Brokers, job.Output, 4*time.Second)
}

// drainRepartitions waits until the group app has committed the end of
// each of its repartition topics ("<app>-…-repartition", both systems'
// naming).
func (h *harness) drainRepartitions(ctx context.Context, app string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	topics, err := h.adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	for _, t := range topics.Sorted() {
		if !strings.HasPrefix(t.Topic, app+"-") || !strings.HasSuffix(t.Topic, "-repartition") {
			continue
		}
		for {
			p, err := groupProgress(ctx, h.adm, app, t.Topic)
			if err == nil && p.committed >= p.end {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("bench parity: group %s did not finish %s in %s (committed %d of %d)", app, t.Topic, timeout, p.committed, p.end)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

// readToEnd reads topic read_committed from the start until no record has
// come for quiet (the writer has stopped: nothing more will).
func readToEnd(ctx context.Context, brokers []string, topic string, quiet time.Duration) ([]outRecord, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []outRecord
	for {
		pctx, cancel := context.WithTimeout(ctx, quiet)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && ferr == nil {
				ferr = fmt.Errorf("read %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, outRecord{Key: string(r.Key), Value: string(r.Value)})
			n++
		})
		if n == 0 {
			return out, nil
		}
	}
}
