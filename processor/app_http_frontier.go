package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tidemark-streams/tidemark/frontier"
)

// Frontier returns the application's committed output frontier of every
// sink as this instance knows it (the frontier topic as its watcher read
// it, and its own commits): per partition the highest committed offset and
// the sink's watermark. Under at-least-once, or without PublishFrontier,
// it knows only its own tasks, so a sink any other instance feeds shows no
// watermark.
func (a *App) Frontier() map[string]frontier.Frontier {
	view, _, _ := a.frontierView()
	out := map[string]frontier.Frontier{}
	for _, sink := range a.frontierSinks() {
		if st, ok := view.Sink(sink); ok {
			out[sink] = st.Frontier()
		}
	}
	return out
}

// ControllerSnapshot is the frontier controller's state after the last commit.
func (a *App) ControllerSnapshot() frontier.Snapshot {
	a.pub.mu.RLock()
	defer a.pub.mu.RUnlock()
	return a.pub.snapshot
}

type frontierJSON struct {
	Instance   string                      `json:"instance"`
	Sinks      map[string]sinkFrontierJSON `json:"sinks"`
	Controller controllerJSON              `json:"controller"`
	// Tenants: per tenant (app_tenants.go), this instance's committed
	// outputs to user sinks and its staleness quantiles.
	Tenants map[string]tenantJSON `json:"tenants,omitempty"`
	// Availability: the learned failure hazard and the checkpoint
	// cadence (app_hazard.go).
	Availability *availabilityJSON `json:"availability,omitempty"`
	// Threads: with more than one stream thread, each thread's group
	// instance id and controller; Controller is the stalest thread's
	// (app_threads.go).
	Threads []threadJSON `json:"threads,omitempty"`
}

type sinkFrontierJSON struct {
	Partitions     []frontier.Mark     `json:"partitions"`
	WatermarkMs    int64               `json:"watermark_ms"`
	Covers         *bool               `json:"covers,omitempty"`
	Tasks          []frontier.TaskMark `json:"tasks"`
	Uncovered      []frontier.TaskRef  `json:"uncovered,omitempty"`
	UncoveredCount int                 `json:"uncovered_count,omitempty"`
	Publishers     []string            `json:"publishers"`
	Own            *ownFrontierJSON    `json:"own,omitempty"`
}

type ownFrontierJSON struct {
	Offsets []int64             `json:"offsets"`
	Tasks   []frontier.TaskMark `json:"tasks"`
}

type controllerJSON struct {
	Policy             string  `json:"policy"`
	IntervalMs         float64 `json:"interval_ms"`
	PredictedStaleness float64 `json:"predicted_staleness_ms"`
	ObservedStaleness  float64 `json:"observed_staleness_ms"`
	CommitLatencyMs    float64 `json:"commit_latency_ms"`
	ArrivalRate        float64 `json:"arrival_rate"`
	Utilization        float64 `json:"utilization"`
	Commits            uint64  `json:"commits"`
	Aborts             uint64  `json:"aborts"`
	// Controller v2 (frontier/p99.go, feedback.go, broker.go): the p99
	// it predicts for the chosen interval and the p99 it observed over
	// its last commits (staleness from input arrival), the feedback
	// correction I (T = optimum·(1−I)), the measured commit rate and the
	// regressed latency per commit/s, the service time s, the commit cost
	// c and the record-loop time the last commit blocked. Added fields
	// only: earlier consumers keep working.
	PredictedP99Ms float64 `json:"predicted_p99_ms"`
	ObservedP99Ms  float64 `json:"observed_p99_ms"`
	Correction     float64 `json:"correction"`
	CommitRate     float64 `json:"commit_rate"`
	LatencySlopeMs float64 `json:"latency_slope_ms_per_commit_s"`
	ServiceTimeUs  float64 `json:"service_time_us"`
	CommitCostMs   float64 `json:"commit_cost_ms"`
	BlockedMs      float64 `json:"blocked_ms"`
	// The size fit (frontier/fit.go): commit cost and latency per record
	// a commit carries; commit_cost_ms is then the per-commit part. And
	// the load λ·(s + cost per record) with the overload and draining
	// flags the interval rules branch on.
	CostPerRecordUs    float64 `json:"cost_per_record_us"`
	LatencyPerRecordUs float64 `json:"latency_per_record_us"`
	Load               float64 `json:"load"`
	Overloaded         bool    `json:"overloaded"`
	Draining           bool    `json:"draining"`
}

// controllerJSONOf is the /frontier view of a controller snapshot.
func controllerJSONOf(snap frontier.Snapshot) controllerJSON {
	return controllerJSON{
		Policy: string(snap.Policy), IntervalMs: ms(snap.Interval), PredictedStaleness: ms(snap.PredictedStaleness),
		ObservedStaleness: ms(snap.ObservedStaleness), CommitLatencyMs: ms(snap.CommitLatency),
		// Before the controller has planned (a commit of frontier records
		// alone can come first), its utilisation is +Inf, which JSON
		// cannot carry.
		ArrivalRate: finite(snap.ArrivalRate), Utilization: finite(snap.Utilization), Commits: snap.Commits, Aborts: snap.Aborts,
		PredictedP99Ms: finite(ms(snap.PredictedP99)), ObservedP99Ms: ms(snap.ObservedP99), Correction: snap.Correction,
		CommitRate: finite(snap.CommitRate), LatencySlopeMs: 1000 * snap.LatencySlope, ServiceTimeUs: 1000 * ms(snap.ServiceTime),
		CommitCostMs: ms(snap.CommitCost), BlockedMs: ms(snap.Blocked),
		CostPerRecordUs: 1000 * ms(snap.CostPerRecord), LatencyPerRecordUs: 1000 * ms(snap.LatencyPerRecord),
		Load: finite(snap.Load), Overloaded: snap.Overloaded, Draining: snap.Draining,
	}
}

func ms(d interface{ Seconds() float64 }) float64 { return d.Seconds() * 1000 }

// finite is x, or 0 for NaN and ±Inf.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// serveFrontier answers GET /frontier[?sink=S&covers=T] for the whole
// application, from the frontier topic this instance tails (read to its
// end as of the request; 503 when it cannot be) and its own commits:
//
//	{
//	  "instance": "inst-a",
//	  "sinks": {
//	    "<sink>": {
//	      "partitions": [{"offset": 120, "watermark_ms": 9999}, …],
//	                        // per partition: the next offset after the highest committed
//	                        // output any instance published; the sink's watermark
//	      "watermark_ms": 9999, // every output with timestamp ≤ this is committed;
//	                        // -9223372036854775808: nothing is
//	      "covers": true,   // with covers=T (ms since the epoch): T ≤ watermark_ms, and every
//	                        // partition's last stable offset has reached its offset, so the
//	                        // outputs are readable by read_committed consumers
//	      "tasks": [{"sub_topology": 0, "partition": 1, "watermark_ms": 9999, "idle": true}, …],
//	                        // every task feeding the sink: the greatest mark any instance published
//	      "uncovered": [{"sub_topology": 0, "partition": 2}], "uncovered_count": 1,
//	                        // tasks no instance published a mark for: nothing is covered
//	      "publishers": ["out@inst-a", "out@inst-b"], // the frontier records read
//	      "own": {"offsets": [120, -1], "tasks": [...]} // this instance's committed record
//	    }
//	  },
//	  "controller": {…}, // the commit controller's last decision and measurements
//	  "tenants": {"acme": {"outputs": 120, "staleness_p50_ms": 80, "staleness_p99_ms": 210}, …}
//	                        // per tenant (topology.WithTenant; "" untenanted, "other" past
//	                        // the first 100, "other\uFFFD" a tenant named "other"): this
//	                        // instance's committed outputs to user
//	                        // sinks, staleness quantiles over its last 1024 commits
//	  "availability": {"hazard_per_hour": 0.08, "mtbf_seconds": 43200, "failures_total": 1,
//	                   "last_cause": "unclean_start", "unclean_start": true, …,
//	                   "checkpoint": {"interval_seconds": 131.4, "bound": "daly", "daly_seconds": 131.4,
//	                                  "cost_ms": 100, "mtbf_seconds": 43200, "replay_seconds": 0.2,
//	                                  "restore_target_seconds": 30, "checkpoints": 3,
//	                                  "by_reason": {"daly": 3}, "recent": [{…}, …]}}
//	                        // the failure hazard learned across sessions and restarts, and
//	                        // the checkpoint scheduler's latest decision and checkpoints
//	}
//
// sink=S restricts the answer to S (404 when the application does not
// write S).
func (a *App) serveFrontier(w http.ResponseWriter, r *http.Request) {
	var covers *int64
	if c := r.URL.Query().Get("covers"); c != "" {
		v, err := strconv.ParseInt(c, 10, 64)
		if err != nil {
			http.Error(w, "covers: want event time in ms since the epoch", http.StatusBadRequest)
			return
		}
		covers = &v
	}
	only := r.URL.Query().Get("sink")
	snap := a.ControllerSnapshot()
	out := frontierJSON{Instance: a.cfg.InstanceID, Sinks: map[string]sinkFrontierJSON{}, Controller: controllerJSONOf(snap),
		Tenants: a.tenants.snapshot(), Availability: a.availability(), Threads: a.threadsJSON()}
	// Answer as of the request: the watcher first reads what was committed
	// before it.
	if _, watcher, _ := a.frontierView(); watcher != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		err := watcher.Sync(ctx)
		cancel()
		if err != nil {
			http.Error(w, fmt.Sprintf("frontier: read the frontier topic: %v", err), http.StatusServiceUnavailable)
			return
		}
	}
	view, watcher, own := a.frontierView()
	for _, sink := range a.frontierSinks() {
		if only != "" && sink != only {
			continue
		}
		st, ok := view.Sink(sink)
		if !ok {
			st = frontier.SinkStatus{Sink: sink, WatermarkMs: frontier.NoWatermark}
		}
		sf := sinkFrontierJSON{Partitions: st.Partitions, WatermarkMs: st.WatermarkMs, Tasks: st.Tasks,
			Uncovered: st.Uncovered, UncoveredCount: st.UncoveredCount, Publishers: st.Keys}
		if sf.Partitions == nil {
			sf.Partitions = []frontier.Mark{}
		}
		if rec, ok := own[sink]; ok {
			sf.Own = &ownFrontierJSON{Offsets: rec.Offsets, Tasks: rec.Tasks}
		}
		if covers != nil {
			c := st.Covers(time.UnixMilli(*covers))
			if c && watcher != nil {
				ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
				readable, err := watcher.Readable(ctx, st)
				cancel()
				if err != nil {
					http.Error(w, fmt.Sprintf("covers: end offsets of %s: %v", sink, err), http.StatusServiceUnavailable)
					return
				}
				c = readable
			}
			sf.Covers = &c
		}
		out.Sinks[sink] = sf
	}
	if only != "" && len(out.Sinks) == 0 {
		http.Error(w, fmt.Sprintf("no sink %q", only), http.StatusNotFound)
		return
	}
	b, err := json.Marshal(out)
	if err != nil {
		http.Error(w, fmt.Sprintf("frontier: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}
