package processor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidemark-streams/tidemark/frontier"
)

// The failure hazard's files in the state directory.
const (
	// hazardFileName holds the learned failure hazard
	// (frontier.HazardState as JSON), rewritten atomically on every
	// failure, every hazardSaveInterval of uptime and when Run returns.
	hazardFileName = "hazard.json"
	// runningMarkerName exists while Run runs: written when it starts,
	// removed when it returns. Found at start, it means the previous
	// process died without returning (SIGKILL, OOM, a lost node), which
	// counts as a failure.
	runningMarkerName = "running"
)

// hazardSaveInterval is how often the hazard is saved while nothing fails:
// it bounds the uptime a crash makes the estimate forget.
var hazardSaveInterval = 5 * time.Minute

// Failure causes, the values of tidemark_failures_total's cause label and
// of the /frontier availability section's last_cause: unclean_start (the
// previous process died without shutting down), the session restart
// causes that lose work or state (fenced, transaction_timeout,
// outcome_unknown, restart, rebuild; see restartCause) and fatal (Run returned an error). Transient
// restarts (a broker outage) do not count: they say nothing about this
// process, and would raise every instance's hazard at once.
const failureUnclean = "unclean_start"

// appHazard is the App's failure hazard, learned across sessions and
// restarts: one frontier.Hazard, handed to every session's commit
// controller and checkpoint scheduler, restored from and saved to the
// state directory. It also holds what the /frontier endpoint shows of the
// checkpoint scheduler's decisions. Safe for concurrent use.
type appHazard struct {
	est     *frontier.Hazard
	dir     string
	log     *slog.Logger
	unclean bool // the running marker was found at start
	// instance is the App's instance id, in the running marker: a start
	// refused the locked directory names the holder (stateDirHolder).
	instance string

	saveMu sync.Mutex // one save at a time
	failed *prometheus.CounterVec

	mu     sync.Mutex
	ckpt   frontier.CheckpointDecision // the latest decision
	recent []checkpointTrace           // the latest checkpoints, oldest first
	total  uint64
	by     map[string]uint64
	gauge  prometheus.Gauge // tidemark_checkpoint_interval_seconds
}

// checkpointTrace is one checkpoint: the decision that started it and what
// it cost.
type checkpointTrace struct {
	Start      time.Time `json:"start"`
	Reason     string    `json:"reason"`
	IntervalS  float64   `json:"interval_seconds"`
	DalyS      float64   `json:"daly_seconds"`
	CapS       float64   `json:"cap_seconds,omitempty"`
	CostMs     float64   `json:"cost_ms"` // δ planned with
	MTBFS      float64   `json:"mtbf_seconds"`
	ReplayS    float64   `json:"replay_seconds"`
	TookMs     float64   `json:"took_ms,omitempty"` // measured, once finished
	Bytes      int64     `json:"bytes,omitempty"`
	Err        string    `json:"err,omitempty"`
	inProgress bool
}

const recentCheckpoints = 16

// startHazard creates the App's hazard, restores it from the state
// directory, counts an unclean start and writes the running marker. Run
// calls it once the state directory is open (and locked).
func (a *App) startHazard(now time.Time) error {
	est, err := frontier.NewHazard(frontier.HazardOptions{MeanTimeBetweenFailures: a.cfg.Checkpoint.MeanTimeBetweenFailures})
	if err != nil {
		return fmt.Errorf("processor: failure hazard: %w", err)
	}
	h := &appHazard{est: est, dir: a.cfg.StateDir, instance: a.cfg.InstanceID, log: a.log, by: map[string]uint64{}}
	if old := a.hazard.Load(); old != nil {
		// A second Run of the App: same metrics, fresh state from disk.
		h.failed, h.gauge = old.failed, old.gauge
	} else {
		a.registerHazardMetrics(h)
	}
	if b, err := os.ReadFile(filepath.Join(h.dir, hazardFileName)); err == nil {
		var st frontier.HazardState
		if err := json.Unmarshal(b, &st); err == nil {
			err = est.Restore(st)
		}
		if err != nil {
			a.log.Warn("failure hazard: unreadable state; starting from the prior", "file", hazardFileName, "err", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		a.log.Warn("failure hazard: read state; starting from the prior", "err", err)
	}
	est.Advance(now)
	if _, err := os.Stat(filepath.Join(h.dir, runningMarkerName)); err == nil {
		h.unclean = true
		a.log.Warn("unclean start: the previous process did not shut down (killed, out of memory, node lost); counting a failure",
			"marker", filepath.Join(h.dir, runningMarkerName))
		h.failure(now, failureUnclean)
	} else {
		h.save()
	}
	a.hazard.Store(h)
	a.log.Info("failure hazard", "mtbf", est.MTBF().Round(time.Second), "failures", est.State().FailuresTotal)
	return nil
}

// registerHazardMetrics adds the hazard's metrics to the App's registry,
// once: the hazard and MTBF are read at scrape time from the hazard the App
// holds (the prior before Run).
func (a *App) registerHazardMetrics(h *appHazard) {
	m := a.metrics
	labels := prometheus.Labels{"app": a.topo.Application()}
	rate := func() float64 {
		if h := a.hazard.Load(); h != nil {
			return h.est.Rate()
		}
		return 1 / a.cfg.Checkpoint.MeanTimeBetweenFailures.Seconds()
	}
	h.failed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_failures_total",
		Help:        "Failures counted into the failure hazard, by cause: unclean_start (the previous process died without shutting down), fenced, transaction_timeout, outcome_unknown, restart, rebuild (session restarts that lost work or state), fatal (Run returned an error).",
		ConstLabels: labels}, []string{"cause"})
	for _, cause := range []string{"unclean_start", "fenced", "transaction_timeout", "outcome_unknown", "restart", "rebuild", "fatal"} {
		h.failed.WithLabelValues(cause) // exported at 0 from the start (appMetrics.initLabels)
	}
	h.gauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_checkpoint_interval_seconds",
		Help: "Checkpoint interval planned by the checkpoint scheduler: Daly's rule for the measured checkpoint cost and the learned hazard, capped by the restore target.", ConstLabels: labels})
	hazard := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tidemark_failure_hazard_per_hour",
		Help: "Learned failure hazard (failures per hour of uptime), across sessions and restarts.", ConstLabels: labels},
		func() float64 { return rate() * 3600 })
	mtbf := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tidemark_failure_mtbf_seconds",
		Help: "Learned mean time between failures (1/hazard).", ConstLabels: labels},
		func() float64 { return 1 / rate() })
	for _, c := range []prometheus.Collector{h.failed, h.gauge, hazard, mtbf} {
		m.reg.MustRegister(c)
		m.registered = append(m.registered, c)
	}
}

// failure counts a failure of cause at now and saves the hazard.
func (h *appHazard) failure(now time.Time, cause string) {
	h.est.ObserveFailure(now, cause)
	h.failed.WithLabelValues(cause).Inc()
	h.save()
}

// sessionFailed counts a session's end that lost work or state; see the
// failure causes.
func (h *appHazard) sessionFailed(cause string) {
	switch cause {
	case "fenced", "transaction_timeout", "outcome_unknown", "restart", "rebuild":
		h.failure(time.Now(), cause)
	}
}

// keep saves the hazard every hazardSaveInterval until done is closed.
func (h *appHazard) keep(done <-chan struct{}) {
	t := time.NewTicker(hazardSaveInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			h.est.Advance(now)
			h.save()
		}
	}
}

// stop ends the App's run: a Run that returned err counts a fatal failure;
// the hazard is saved and the running marker removed, so that the next
// start is clean.
func (h *appHazard) stop(err error) {
	now := time.Now()
	h.est.Advance(now)
	if err != nil {
		h.failure(now, "fatal")
	} else {
		h.save()
	}
	h.est.Pause()
	if rerr := os.Remove(filepath.Join(h.dir, runningMarkerName)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		h.log.Warn("failure hazard: remove the running marker", "err", rerr)
	}
}

// save writes the hazard to the state directory atomically (a temporary
// file renamed over the old one), and the running marker if it is missing
// (a rebuild moves the whole directory aside). Failing to save only costs
// the estimate some memory: it is logged, not returned.
func (h *appHazard) save() {
	h.saveMu.Lock()
	defer h.saveMu.Unlock()
	b, err := json.MarshalIndent(h.est.State(), "", "  ")
	if err == nil {
		err = writeFileAtomic(h.dir, hazardFileName, append(b, '\n'))
	}
	if err != nil {
		h.log.Warn("failure hazard: save", "err", err)
	}
	marker := filepath.Join(h.dir, runningMarkerName)
	if _, err := os.Stat(marker); errors.Is(err, fs.ErrNotExist) {
		host, _ := os.Hostname()
		b, _ := json.Marshal(map[string]any{"pid": os.Getpid(), "host": host, "instance": h.instance, "started": time.Now().UTC()})
		if err := writeFileAtomic(h.dir, runningMarkerName, append(b, '\n')); err != nil {
			h.log.Warn("failure hazard: write the running marker; an unclean stop will go unnoticed", "err", err)
		}
	}
}

// writeFileAtomic replaces dir/name with data: written to a temporary file
// in dir, synced, renamed over name, and the directory synced, so that a
// crash leaves the old file or the new one, never a torn one.
func writeFileAtomic(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// observeCheckpointDecision records the scheduler's latest decision (the
// interval gauge, /frontier), and a trace when it starts a checkpoint.
func (h *appHazard) observeCheckpointDecision(now time.Time, d frontier.CheckpointDecision, start bool) {
	h.gauge.Set(d.Interval.Seconds())
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ckpt = d
	if !start {
		return
	}
	h.total++
	h.by[d.Reason.String()]++
	tr := checkpointTrace{Start: now, Reason: d.Reason.String(), IntervalS: d.Interval.Seconds(), DalyS: d.Daly.Seconds(),
		CostMs: ms(d.Cost), MTBFS: d.MTBF.Seconds(), ReplayS: d.Replay.Seconds(), inProgress: true}
	if d.Cap < 1000*time.Hour {
		tr.CapS = d.Cap.Seconds()
	}
	if len(h.recent) == recentCheckpoints {
		h.recent = append(h.recent[:0], h.recent[1:]...)
	}
	h.recent = append(h.recent, tr)
}

// observeCheckpointDone completes the latest checkpoint's trace.
func (h *appHazard) observeCheckpointDone(took time.Duration, bytes int64, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.recent); n > 0 && h.recent[n-1].inProgress {
		tr := &h.recent[n-1]
		tr.inProgress, tr.TookMs, tr.Bytes = false, ms(took), bytes
		if err != nil {
			tr.Err = err.Error()
		}
	}
}

// availabilityJSON is the /frontier endpoint's availability section.
type availabilityJSON struct {
	HazardPerHour    float64        `json:"hazard_per_hour"`
	MTBFSeconds      float64        `json:"mtbf_seconds"`
	PriorMTBFSeconds float64        `json:"prior_mtbf_seconds"`
	Failures         float64        `json:"failures"` // discounted evidence
	FailuresTotal    int64          `json:"failures_total"`
	UptimeSeconds    float64        `json:"uptime_seconds"`
	LastFailure      *time.Time     `json:"last_failure,omitempty"`
	LastCause        string         `json:"last_cause,omitempty"`
	UncleanStart     bool           `json:"unclean_start"`
	Checkpoint       checkpointJSON `json:"checkpoint"`
}

type checkpointJSON struct {
	IntervalSeconds      float64           `json:"interval_seconds"`
	Bound                string            `json:"bound"`
	Reason               string            `json:"reason"` // of the latest decision
	DalySeconds          float64           `json:"daly_seconds"`
	CapSeconds           float64           `json:"cap_seconds,omitempty"`
	CostMs               float64           `json:"cost_ms"`
	MTBFSeconds          float64           `json:"mtbf_seconds"`
	ReplaySeconds        float64           `json:"replay_seconds"`
	RestoreTargetSeconds float64           `json:"restore_target_seconds"`
	Checkpoints          uint64            `json:"checkpoints"`
	ByReason             map[string]uint64 `json:"by_reason"`
	Recent               []checkpointTrace `json:"recent"`
}

// availability is the /frontier endpoint's view of the hazard and the
// checkpoint cadence; nil before Run.
func (a *App) availability() *availabilityJSON {
	h := a.hazard.Load()
	if h == nil {
		return nil
	}
	st := h.est.State()
	out := &availabilityJSON{HazardPerHour: st.RatePerHour, MTBFSeconds: st.MTBFSeconds, PriorMTBFSeconds: st.PriorMTBF,
		Failures: st.Failures, FailuresTotal: st.FailuresTotal, UptimeSeconds: st.UptimeSeconds, LastCause: st.LastCause,
		UncleanStart: h.unclean}
	if !st.LastFailure.IsZero() {
		out.LastFailure = &st.LastFailure
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.ckpt
	out.Checkpoint = checkpointJSON{IntervalSeconds: d.Interval.Seconds(), Bound: d.Bound.String(), Reason: d.Reason.String(),
		DalySeconds: d.Daly.Seconds(), CostMs: ms(d.Cost), MTBFSeconds: d.MTBF.Seconds(), ReplaySeconds: d.Replay.Seconds(),
		RestoreTargetSeconds: a.cfg.Checkpoint.RestoreTarget.Seconds(), Checkpoints: h.total, ByReason: map[string]uint64{},
		Recent: append([]checkpointTrace{}, h.recent...)}
	if d.Cap < 1000*time.Hour {
		out.Checkpoint.CapSeconds = d.Cap.Seconds()
	}
	for r, n := range h.by {
		out.Checkpoint.ByReason[r] = n
	}
	return out
}
