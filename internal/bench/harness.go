package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Result is one measurement.
type Result struct {
	System   string `json:"system"`
	Workload string `json:"workload"`
	// Phase is "max" (throughput on pre-produced input), "rate" (staleness
	// at a fixed input rate) or "resume" (restart after SIGKILL).
	Phase      string  `json:"phase"`
	Rate       float64 `json:"rate,omitempty"`       // target input rate, records/s
	Throughput float64 `json:"throughput,omitempty"` // records/s
	P50        float64 `json:"staleness_p50_ms,omitempty"`
	P99        float64 `json:"staleness_p99_ms,omitempty"`
	P999       float64 `json:"staleness_p999_ms,omitempty"`
	Outputs    int64   `json:"outputs,omitempty"`
	CPUSeconds float64 `json:"cpu_seconds"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	ResumeSec  float64 `json:"resume_seconds,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// Report is a whole run.
type Report struct {
	Started  time.Time `json:"started"`
	Machine  string    `json:"machine"`
	Options  string    `json:"options"`
	Results  []Result  `json:"results"`
	Duration string    `json:"duration"`
}

// Run measures every system on every workload, then the rate sweep, then
// resume. A system that fails records the error and the run goes on.
func Run(ctx context.Context, o Options, progress func(string)) (*Report, error) {
	if err := o.EnsureDefaults(); err != nil {
		return nil, err
	}
	cl, err := driverClient(ctx, o.Brokers)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	h := &harness{o: o, cl: cl, adm: adm, progress: progress}
	rep := &Report{Started: time.Now(), Machine: machine(), Options: fmt.Sprintf("records=%d keys=%d sequential-keys=%v partitions=%d quick=%v",
		o.Records, o.Keys, o.SequentialKeys, o.Partitions, o.Quick)}
	maxOf := map[string]map[string]float64{}
	for _, w := range o.Workloads {
		maxOf[w] = map[string]float64{}
		for _, s := range o.Systems {
			r := h.max(ctx, w, s)
			maxOf[w][s.Name] = r.Throughput
			rep.Results = append(rep.Results, r)
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
		}
	}
	for _, w := range o.SweepWorkloads {
		base := math.Inf(1)
		for _, v := range maxOf[w] {
			if v > 0 {
				base = math.Min(base, v)
			}
		}
		if math.IsInf(base, 1) {
			continue
		}
		rates := o.Rates
		if len(rates) == 0 {
			for _, f := range o.SweepFractions {
				rates = append(rates, f*base)
			}
		}
		for _, rate := range rates {
			for _, s := range o.Systems {
				rep.Results = append(rep.Results, h.rate(ctx, w, s, rate))
				if ctx.Err() != nil {
					return rep, ctx.Err()
				}
			}
		}
	}
	if o.Resume {
		for _, s := range o.Systems {
			rep.Results = append(rep.Results, h.resume(ctx, "count", s))
		}
	}
	rep.Duration = time.Since(rep.Started).Round(time.Second).String()
	return rep, nil
}

type harness struct {
	o        Options
	cl       *kgo.Client
	adm      *kadm.Client
	progress func(string)
	seq      int
}

func (h *harness) job(ctx context.Context, w string, s System) (Job, error) {
	h.seq++
	id := fmt.Sprintf("bench-%d-%s-%s-%d", time.Now().Unix(), w, s.Name, h.seq)
	job := Job{Brokers: h.o.Brokers, Workload: w, AppID: id, Input: id + "-in", Output: id + "-out",
		Partitions: h.o.Partitions, StateDir: filepath.Join(h.o.WorkDir, id),
		CommitInterval: s.CommitInterval, Policy: s.Policy, Threads: s.Threads, Pipelined: s.Pipelined, RecordCache: s.RecordCache, P99Tolerance: s.P99Tolerance, WindowSize: h.o.WindowSize, Grace: h.o.Grace}
	topics := []string{job.Input, job.Output}
	if w == "join" {
		job.Table = id + "-table"
		topics = append(topics, job.Table)
	}
	if err := h.createTopics(ctx, topics...); err != nil {
		return job, err
	}
	if w == "join" {
		if err := produceTable(ctx, h.cl, job, h.o.Keys); err != nil {
			return job, err
		}
	}
	return job, nil
}

// createTopics creates topics of Options.Partitions partitions and waits
// until the broker lists them.
func (h *harness) createTopics(ctx context.Context, topics ...string) error {
	resp, err := h.adm.CreateTopics(ctx, h.o.Partitions, 1, nil, topics...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("bench: create topics: %w", err)
	}
	return waitTopics(ctx, h.adm, topics)
}

// loadedJob is a fresh job whose input holds the pre-produced records.
func (h *harness) loadedJob(ctx context.Context, w string, s System) (Job, error) {
	job, err := h.job(ctx, w, s)
	if err != nil {
		return job, err
	}
	return job, preProduce(ctx, h.cl, job, h.o.Records, h.o.Keys, h.o.SequentialKeys)
}

func (h *harness) max(ctx context.Context, w string, s System) Result {
	res := Result{System: s.Name, Workload: w, Phase: "max"}
	h.progress(fmt.Sprintf("max throughput: %s on %s (%d records)", s.Name, w, h.o.Records))
	job, err := h.loadedJob(ctx, w, s)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	p, err := s.start(ctx, h.o.Env, job)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	before := p.usage()
	res.Throughput, err = throughput(ctx, h.adm, job.AppID, job.Input, p.readyAt, 5*time.Minute)
	after := p.usage()
	p.stop()
	h.cleanup(job)
	if err != nil {
		res.Error = err.Error()
	}
	res.CPUSeconds = (after.CPU - before.CPU).Seconds()
	res.PeakRSSMiB = float64(after.PeakRSS) / (1 << 20)
	h.progress(fmt.Sprintf("  %s %s: %.0f records/s, %.1f CPU s, %.0f MiB", s.Name, w, res.Throughput, res.CPUSeconds, res.PeakRSSMiB))
	return res
}

func (h *harness) rate(ctx context.Context, w string, s System, rate float64) Result {
	res := Result{System: s.Name, Workload: w, Phase: "rate", Rate: math.Round(rate)}
	h.progress(fmt.Sprintf("staleness: %s on %s at %.0f records/s", s.Name, w, rate))
	job, err := h.job(ctx, w, s)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	p, err := s.start(ctx, h.o.Env, job)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	before := p.usage()
	from := time.Now().Add(h.o.Warmup)
	dctx, dcancel := context.WithTimeout(ctx, h.o.Warmup+h.o.Measure)
	defer dcancel()
	// The watcher runs past the drive so the last commits are seen.
	wctx, wcancel := context.WithTimeout(ctx, h.o.Warmup+h.o.Measure+2*time.Second)
	defer wcancel()
	type watched struct {
		st  *Staleness
		err error
	}
	done := make(chan watched, 1)
	go func() { st, err := watch(wctx, h.o.Brokers, job.Output, from); done <- watched{st, err} }()
	sent, err := drive(dctx, h.cl, job, rate, h.o.Keys)
	got := <-done
	after := p.usage()
	if exited := p.exitedEarly(); exited != nil && err == nil {
		err = exited
	}
	p.stop()
	h.cleanup(job)
	if err == nil {
		err = got.err
	}
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.Throughput = float64(sent) / (h.o.Warmup + h.o.Measure).Seconds()
	res.Outputs = got.st.Count
	if err := noOutputs(sent, res.Outputs, h.o.Measure); err != nil {
		res.Error = err.Error()
	}
	res.P50, res.P99, res.P999 = got.st.Quantile(50), got.st.Quantile(99), got.st.Quantile(99.9)
	res.CPUSeconds = (after.CPU - before.CPU).Seconds()
	res.PeakRSSMiB = float64(after.PeakRSS) / (1 << 20)
	h.progress(fmt.Sprintf("  p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms over %d outputs", res.P50, res.P99, res.P999, res.Outputs))
	return res
}

// resume loads the pre-produced input into the system's state, runs it in
// steady state at a modest rate for a few seconds, SIGKILLs it while input
// keeps arriving, restarts it on the same state directory and group, and
// times the restart until the first output of an input sent after the
// restart is visible: process start, group join, restore of the changelog
// tail, processing and a commit.
func (h *harness) resume(ctx context.Context, w string, s System) Result {
	res := Result{System: s.Name, Workload: w, Phase: "resume"}
	h.progress(fmt.Sprintf("resume after SIGKILL: %s on %s (%d keys of state)", s.Name, w, h.o.Keys))
	job, err := h.loadedJob(ctx, w, s)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	p, err := s.start(ctx, h.o.Env, job)
	if err == nil {
		_, err = throughput(ctx, h.adm, job.AppID, job.Input, p.readyAt, 10*time.Minute)
	}
	if err != nil {
		res.Error = err.Error()
		return res
	}
	const steadyRate = 2000
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	go func() { _, _ = drive(dctx, h.cl, job, steadyRate, h.o.Keys) }()
	select { // steady state: commits are small again
	case <-time.After(3 * time.Second):
	case <-ctx.Done():
		return res
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	restart := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer wcancel()
	first := make(chan time.Time, 1)
	go func() { first <- firstOutputAfter(wctx, h.o.Brokers, job.Output, restart) }()
	p2, err := s.start(ctx, h.o.Env, job)
	at := <-first
	dcancel()
	if err == nil {
		p2.stop()
	}
	h.cleanup(job)
	switch {
	case err != nil:
		res.Error = err.Error()
	case at.IsZero():
		res.Error = "no output after restart within 2 minutes"
	default:
		res.ResumeSec = at.Sub(restart).Seconds()
		h.progress(fmt.Sprintf("  resumed in %.2f s", res.ResumeSec))
	}
	return res
}

func firstOutputAfter(ctx context.Context, brokers []string, topic string, t time.Time) time.Time {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond),
		// The output topic was created moments ago: look again soon if the
		// first metadata answer does not have it yet.
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return time.Time{}
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		var seen time.Time
		fs.EachRecord(func(r *kgo.Record) {
			if seen.IsZero() && !r.Timestamp.Before(t.Truncate(time.Millisecond)) {
				seen = time.Now()
			}
		})
		if !seen.IsZero() {
			return seen
		}
	}
	return time.Time{}
}

func (h *harness) cleanup(job Job) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := deleteJobTopics(ctx, h.cl, job); err != nil && h.progress != nil {
		h.progress("  cleanup: " + err.Error())
	}
	_ = os.RemoveAll(job.StateDir)
}

// deleteJobTopics deletes the job's topics (its input, outputs and table
// and the systems' internal topics, which share the application id
// prefix) and waits until the broker no longer lists any of them, in two
// listings half a second apart (a topic created moments before may not be
// listed yet). A run that leaves its topics behind fills the broker with
// partitions and data that slow every run after it, so a failed listing or
// a deletion the broker has not applied yet is retried until ctx ends, not
// ignored.
func deleteJobTopics(ctx context.Context, cl *kgo.Client, job Job) error {
	adm := kadm.NewClient(cl)
	owned := func(t string) bool {
		return t == job.Input || t == job.Output || (job.Table != "" && t == job.Table) ||
			strings.HasPrefix(t, job.AppID+"-")
	}
	var left []string
	var lastErr error
	for clean := 0; ; {
		listed, err := brokerTopics(ctx, cl)
		if err != nil {
			lastErr = fmt.Errorf("list topics: %w", err)
		} else {
			left = left[:0]
			for _, t := range listed {
				if owned(t) {
					left = append(left, t)
				}
			}
			if len(left) == 0 {
				if clean++; clean == 2 {
					return nil
				}
				if !sleepCtx(ctx, 500*time.Millisecond) {
					return nil // none listed when last asked
				}
				continue
			}
			clean = 0
			// Sorted and unique: the broker refuses every topic named
			// twice in one DeleteTopics request (INVALID_REQUEST).
			slices.Sort(left)
			left = slices.Compact(left)
			resp, err := adm.DeleteTopics(ctx, left...)
			if err == nil {
				err = deleteErrors(resp)
			}
			lastErr = err
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return fmt.Errorf("delete topics %v: %w", left, errors.Join(lastErr, ctx.Err()))
		}
	}
}

// brokerTopics lists the broker's topics as it knows them now. Not
// kadm's ListTopics: that answers from the client's metadata cache, which
// keeps a topic the client produced to for a while after its deletion (so
// a job's input seemed to outlive every delete), and may not have a topic
// another client created moments ago.
func brokerTopics(ctx context.Context, cl *kgo.Client) ([]string, error) {
	req := kmsg.NewPtrMetadataRequest() // Topics nil: all of them
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range resp.Topics {
		if t.Topic != nil && t.ErrorCode == 0 {
			names = append(names, *t.Topic)
		}
	}
	return names, nil
}

// deleteErrors is resp's errors but UNKNOWN_TOPIC_OR_PARTITION: a topic
// already gone is what the caller wants.
func deleteErrors(resp kadm.DeleteTopicResponses) error {
	var errs []error
	for _, r := range resp.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			errs = append(errs, fmt.Errorf("%s: %w", r.Topic, r.Err))
		}
	}
	return errors.Join(errs...)
}

// waitTopics waits until the broker's metadata serves every topic with its
// partitions, so no system starts before its input exists for it.
func waitTopics(ctx context.Context, adm *kadm.Client, topics []string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		details, err := adm.ListTopics(ctx, topics...)
		ready := err == nil
		for _, t := range topics {
			if d, ok := details[t]; !ok || d.Err != nil || len(d.Partitions) == 0 {
				ready = false
			}
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: topics %v not served 15s after creation", topics)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func machine() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s, %d cores", host, runtime.NumCPU())
}
