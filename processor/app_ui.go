package processor

import (
	"context"
	_ "embed"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tidemark-streams/tidemark/frontier"
)

// The web view at /ui: one HTML page with its script inline (no external
// scripts, fonts or stylesheets) that polls the JSON endpoints below once
// a second and draws its charts and the topology graph itself.
//
//	GET /ui                       the page
//	GET /ui/api/series?since=N    the samples with seq > N (all kept ones without since)
//	GET /ui/api/frontier          committed output frontier per sink partition, as this instance knows it
//	GET /ui/api/topology          the topology: sub-topologies, nodes, stores, topics
//
// The samples are taken once a second by a goroutine Run starts and stops,
// and kept in a ring of uiSamples.

//go:embed ui/index.html
var uiPage []byte

const (
	// uiSamples bounds the ring: ten minutes at one sample a second.
	uiSamples = 600
	// uiEvery is the sampling period.
	uiEvery = time.Second
	// uiStaleWindow is how far back a sample's staleness quantiles look:
	// the commits that ended in it.
	uiStaleWindow = 5 * time.Second
	// uiStaleCap bounds the commits kept per sink within the window.
	uiStaleCap = 4096
)

// uiSample is one second of the App as the page charts it. Rates are per
// second over the time since the previous sample.
type uiSample struct {
	Seq    uint64 `json:"seq"`
	TimeMs int64  `json:"t"`
	// InputRate is input records processed per second; OutputRate output
	// records committed per second.
	InputRate  float64 `json:"input_rate"`
	OutputRate float64 `json:"output_rate"`
	// Lag is the records behind the input end offsets at the last fetch.
	Lag float64 `json:"lag"`
	// The controller's last decision: the commit interval it chose, the
	// staleness it predicts for it, and its smoothed observed staleness.
	IntervalMs  float64 `json:"interval_ms"`
	PredictedMs float64 `json:"predicted_ms"`
	ObservedMs  float64 `json:"observed_ms"`
	// CommitRate and AbortRate are transactions per second.
	CommitRate float64 `json:"commit_rate"`
	AbortRate  float64 `json:"abort_rate"`
	// Staleness is per sink topic, over the commits that ended in the last
	// uiStaleWindow: commit time minus the oldest input time among the
	// commit's outputs to that sink. A sink without such commits is absent.
	Staleness map[string]uiQuantiles `json:"staleness"`
	// RestoreRemaining is the changelog records left to restore per task
	// (0 once restored), for the tasks this instance runs.
	RestoreRemaining map[string]float64 `json:"restore_remaining"`
}

type uiQuantiles struct {
	P50     float64 `json:"p50_ms"`
	P99     float64 `json:"p99_ms"`
	Commits int     `json:"commits"`
}

// uiState is the sampler's ring and the per-sink staleness observations
// the commits leave for it. Commits write from the loop goroutine, the
// sampler and HTTP handlers read: all under mu.
type uiState struct {
	mu    sync.Mutex
	ring  []uiSample // oldest first once full: ring[next:] then ring[:next]
	next  int
	seq   uint64
	stale map[string][]staleObs // per sink, ending time ascending
}

type staleObs struct {
	at time.Time
	ms float64
}

// observeStaleness records one commit's staleness of sink.
func (u *uiState) observeStaleness(sink string, at time.Time, d time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.stale == nil {
		u.stale = map[string][]staleObs{}
	}
	obs := append(u.stale[sink], staleObs{at: at, ms: float64(d) / float64(time.Millisecond)})
	if len(obs) > uiStaleCap {
		obs = slices.Delete(obs, 0, len(obs)-uiStaleCap)
	}
	u.stale[sink] = obs
}

// staleness returns the quantiles of every sink over the window ending at
// now, dropping older observations.
func (u *uiState) staleness(now time.Time) map[string]uiQuantiles {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := map[string]uiQuantiles{}
	for sink, obs := range u.stale {
		i := sort.Search(len(obs), func(i int) bool { return now.Sub(obs[i].at) <= uiStaleWindow })
		obs = slices.Delete(obs, 0, i)
		u.stale[sink] = obs
		if len(obs) == 0 {
			continue
		}
		vals := make([]float64, len(obs))
		for i, o := range obs {
			vals[i] = o.ms
		}
		sort.Float64s(vals)
		out[sink] = uiQuantiles{P50: quantile(vals, 0.5), P99: quantile(vals, 0.99), Commits: len(vals)}
	}
	return out
}

// quantile is the nearest-rank q-quantile of sorted vals.
func quantile(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func (u *uiState) add(s uiSample) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seq++
	s.Seq = u.seq
	if len(u.ring) < uiSamples {
		u.ring = append(u.ring, s)
		return
	}
	u.ring[u.next] = s
	u.next = (u.next + 1) % uiSamples
}

// since returns the kept samples with Seq > seq, oldest first.
func (u *uiState) since(seq uint64) []uiSample {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]uiSample, 0, len(u.ring))
	for _, part := range [][]uiSample{u.ring[u.next:], u.ring[:u.next]} {
		for _, s := range part {
			if s.Seq > seq {
				out = append(out, s)
			}
		}
	}
	return out
}

// uiCounters are the running totals a sample takes differences of.
type uiCounters struct {
	at                       time.Time
	in, out, commits, aborts float64
}

// runUISampler samples the App once a second until ctx is done.
func (a *App) runUISampler(ctx context.Context) {
	tick := time.NewTicker(uiEvery)
	defer tick.Stop()
	prev := a.uiCounters(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			prev = a.uiSample(now, prev)
		}
	}
}

func (a *App) uiCounters(now time.Time) uiCounters {
	m := a.metrics
	in, _ := collectSum(m.recordsIn, "")
	out, _ := collectSum(m.recordsOut, "")
	commits, _ := collectSum(m.commits, "")
	aborts, _ := collectSum(m.aborts, "")
	return uiCounters{at: now, in: in, out: out, commits: commits, aborts: aborts}
}

// uiSample takes a sample at now and returns the counters the next one
// differs from.
func (a *App) uiSample(now time.Time, prev uiCounters) uiCounters {
	cur := a.uiCounters(now)
	secs := cur.at.Sub(prev.at).Seconds()
	rate := func(c, p float64) float64 {
		if secs <= 0 || c < p {
			return 0
		}
		return (c - p) / secs
	}
	snap := a.ControllerSnapshot()
	lag, _ := collectSum(a.metrics.lag, "")
	_, restore := collectSum(a.metrics.restoreRemaining, "task")
	s := uiSample{
		TimeMs:           now.UnixMilli(),
		InputRate:        rate(cur.in, prev.in),
		OutputRate:       rate(cur.out, prev.out),
		Lag:              lag,
		IntervalMs:       ms(snap.Interval),
		PredictedMs:      uiDuration(snap.PredictedStaleness),
		ObservedMs:       ms(snap.ObservedStaleness),
		CommitRate:       rate(cur.commits, prev.commits),
		AbortRate:        rate(cur.aborts, prev.aborts),
		Staleness:        a.ui.staleness(now),
		RestoreRemaining: restore,
	}
	a.ui.add(s)
	return cur
}

// uiDuration is d in ms, or 0 for the "never" the controller predicts
// before it has measured anything (an hour or more).
func uiDuration(d time.Duration) float64 {
	if d >= time.Hour {
		return 0
	}
	return ms(d)
}

// collectSum sums the values of c's series (counters and gauges); with
// label set, it also returns them by that label's value.
func collectSum(c prometheus.Collector, label string) (float64, map[string]float64) {
	ch := make(chan prometheus.Metric, 16)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var sum float64
	var by map[string]float64
	if label != "" {
		by = map[string]float64{}
	}
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		var v float64
		switch {
		case d.Counter != nil:
			v = d.Counter.GetValue()
		case d.Gauge != nil:
			v = d.Gauge.GetValue()
		default:
			continue
		}
		sum += v
		if by != nil {
			for _, lp := range d.Label {
				if lp.GetName() == label {
					by[lp.GetValue()] = v
				}
			}
		}
	}
	return sum, by
}

func (a *App) serveUI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(uiPage)
}

func (a *App) serveUISeries(w http.ResponseWriter, r *http.Request) {
	var since uint64
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "since: want a sample sequence number"})
			return
		}
		since = n
	}
	writeJSON(w, http.StatusOK, struct {
		App      string     `json:"app"`
		Instance string     `json:"instance"`
		Ready    bool       `json:"ready"`
		EveryMs  int64      `json:"every_ms"`
		Samples  []uiSample `json:"samples"`
	}{a.topo.Application(), a.cfg.InstanceID, a.Ready(), uiEvery.Milliseconds(), a.ui.since(since)})
}

type uiSinkFrontier struct {
	Sink        string          `json:"sink"`
	WatermarkMs int64           `json:"watermark_ms"`
	Partitions  []frontier.Mark `json:"partitions"`
}

// serveUIFrontier answers the page's frontier table from what this
// instance has already read of the frontier topic and its own commits
// (GET /frontier reads the topic to its end first; the page polls).
func (a *App) serveUIFrontier(w http.ResponseWriter, _ *http.Request) {
	view, _, _ := a.frontierView()
	out := []uiSinkFrontier{}
	for _, sink := range a.frontierSinks() {
		sf := uiSinkFrontier{Sink: sink, WatermarkMs: frontier.NoWatermark, Partitions: []frontier.Mark{}}
		if st, ok := view.Sink(sink); ok {
			sf.WatermarkMs = st.WatermarkMs
			if st.Partitions != nil {
				sf.Partitions = st.Partitions
			}
		}
		out = append(out, sf)
	}
	writeJSON(w, http.StatusOK, struct {
		NoWatermark int64            `json:"no_watermark"`
		Sinks       []uiSinkFrontier `json:"sinks"`
	}{frontier.NoWatermark, out})
}

type uiNode struct {
	Name       string   `json:"name"`
	Kind       string   `json:"kind"` // Source, Processor, Sink
	Operator   string   `json:"operator,omitempty"`
	Topics     []string `json:"topics,omitempty"`
	Stores     []string `json:"stores,omitempty"`
	Successors []string `json:"successors,omitempty"`
}

type uiSubTopology struct {
	ID    int      `json:"id"`
	Nodes []uiNode `json:"nodes"`
}

type uiStore struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Changelog string `json:"changelog,omitempty"`
}

// serveUITopology answers the topology as the page draws it.
func (a *App) serveUITopology(w http.ResponseWriter, _ *http.Request) {
	d := a.topo.Describe()
	subs := make([]uiSubTopology, 0, len(d.SubTopologies))
	for _, st := range d.SubTopologies {
		us := uiSubTopology{ID: st.ID, Nodes: make([]uiNode, 0, len(st.Nodes))}
		for _, n := range st.Nodes {
			us.Nodes = append(us.Nodes, uiNode{Name: n.Name, Kind: n.Kind.String(), Operator: n.Operator,
				Topics: n.Topics, Stores: n.Stores, Successors: n.Successors})
		}
		subs = append(subs, us)
	}
	stores := []uiStore{}
	for _, s := range a.topo.Stores() {
		stores = append(stores, uiStore{Name: s.Spec.Name, Kind: s.Spec.Kind.String(), Changelog: s.Changelog})
	}
	internal := []string{}
	for _, t := range a.topo.RepartitionTopics() {
		internal = append(internal, t.Name)
	}
	for _, t := range a.topo.ChangelogTopics() {
		internal = append(internal, t.Name)
	}
	writeJSON(w, http.StatusOK, struct {
		App            string          `json:"app"`
		SubTopologies  []uiSubTopology `json:"sub_topologies"`
		Stores         []uiStore       `json:"stores"`
		SourceTopics   []string        `json:"source_topics"`
		SinkTopics     []string        `json:"sink_topics"`
		InternalTopics []string        `json:"internal_topics"`
	}{a.topo.Application(), subs, stores, a.topo.SourceTopics(), a.frontierSinks(), internal})
}
