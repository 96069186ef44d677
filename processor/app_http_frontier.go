package processor

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/tidemark-streams/tidemark/frontier"
)

// Frontier returns the committed output frontier of every sink.
func (a *App) Frontier() map[string]frontier.Frontier {
	a.pub.mu.RLock()
	defer a.pub.mu.RUnlock()
	out := make(map[string]frontier.Frontier, len(a.pub.frontiers))
	for k, v := range a.pub.frontiers {
		out[k] = frontier.Frontier{Sink: v.Sink, Marks: append([]frontier.Mark(nil), v.Marks...)}
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
	Sinks      map[string]sinkFrontierJSON `json:"sinks"`
	Controller controllerJSON              `json:"controller"`
}

type sinkFrontierJSON struct {
	Partitions  []frontier.Mark `json:"partitions"`
	WatermarkMs int64           `json:"watermark_ms"`
	Covers      *bool           `json:"covers,omitempty"`
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
}

func ms(d interface{ Seconds() float64 }) float64 { return d.Seconds() * 1000 }

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
	out := frontierJSON{Sinks: map[string]sinkFrontierJSON{}, Controller: controllerJSON{
		Policy: string(snap.Policy), IntervalMs: ms(snap.Interval), PredictedStaleness: ms(snap.PredictedStaleness),
		ObservedStaleness: ms(snap.ObservedStaleness), CommitLatencyMs: ms(snap.CommitLatency),
		ArrivalRate: snap.ArrivalRate, Utilization: snap.Utilization, Commits: snap.Commits, Aborts: snap.Aborts,
	}}
	for sink, f := range a.Frontier() {
		if only != "" && sink != only {
			continue
		}
		sf := sinkFrontierJSON{Partitions: f.Marks, WatermarkMs: f.WatermarkMs()}
		if covers != nil {
			c := f.WatermarkMs() != frontier.NoWatermark && f.WatermarkMs() >= *covers
			sf.Covers = &c
		}
		out.Sinks[sink] = sf
	}
	if only != "" && len(out.Sinks) == 0 {
		http.Error(w, fmt.Sprintf("no sink %q", only), http.StatusNotFound)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
