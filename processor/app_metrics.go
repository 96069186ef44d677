package processor

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tidemark-streams/tidemark/frontier"
)

// appMetrics are the Prometheus metrics of one App, on a registry of its own
// so several apps can live in one process.
type appMetrics struct {
	reg *prometheus.Registry
	// registered lists every collector on reg: the test that checks the
	// dashboard and alert rules in deploy/ name only metrics that exist
	// describes them.
	registered            []prometheus.Collector
	recordsIn, recordsOut prometheus.Counter
	processing            prometheus.Histogram
	commitLatency         *prometheus.HistogramVec
	endLatency            prometheus.Histogram
	commits               *prometheus.CounterVec
	aborts                *prometheus.CounterVec
	taskRecordsIn         *prometheus.CounterVec
	taskLag               *prometheus.GaugeVec
	sessionRestarts       *prometheus.CounterVec
	fencedTxns            prometheus.Counter
	peersRemoved          prometheus.Counter
	stateRebuilds         prometheus.Counter
	stuckThreads          prometheus.Gauge
	// outOfContact reads contactFn at scrape time (app_contact.go).
	outOfContact          prometheus.GaugeFunc
	contactFn             atomic.Pointer[func() float64]
	processingErrors      *prometheus.CounterVec
	productionErrors      *prometheus.CounterVec
	dropped               *droppedRecords
	commitPhase           *prometheus.HistogramVec
	produceRetries        prometheus.Counter
	reflectedSkipped      prometheus.Counter
	interval              prometheus.Gauge
	predicted             prometheus.Gauge
	predictedHist         prometheus.Histogram
	observedStaleness     prometheus.Histogram
	tenantOutputs         *prometheus.CounterVec   // app_tenants.go
	tenantStaleness       *prometheus.HistogramVec // app_tenants.go
	utilization           prometheus.Gauge
	lag                   prometheus.Gauge
	tasks                 prometheus.Gauge
	restoredRecords       prometheus.Counter
	restoreRemaining      *prometheus.GaugeVec
	deserializationErrors prometheus.Counter
	deadLettered          prometheus.Counter
	checkpoints           *prometheus.CounterVec
	checkpointSeconds     prometheus.Histogram
	snap                  *snapshotMetrics // app_snapshot.go
	// repartitionPurged and repartitionPurgeErrors count the purger's
	// work (app_purge.go).
	repartitionPurged      prometheus.Counter
	repartitionPurgeErrors prometheus.Counter
	fair                   *fairMetrics // app_fair.go
	pipe                   *pipeMetrics // app_pipeline.go
}

func newAppMetrics(app string) *appMetrics {
	reg := prometheus.NewRegistry()
	m := &appMetrics{reg: reg}
	f := func(c prometheus.Collector) {
		reg.MustRegister(c)
		m.registered = append(m.registered, c)
	}
	labels := prometheus.Labels{"app": app}
	staleBuckets := prometheus.ExponentialBuckets(0.001, 2, 16) // 1ms … 32s
	*m = appMetrics{
		reg:        reg,
		recordsIn:  prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_records_in_total", Help: "Input records processed.", ConstLabels: labels}),
		recordsOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_records_out_total", Help: "Output records committed.", ConstLabels: labels}),
		processing: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tidemark_processing_seconds_per_record", Help: "Processing time per record, per batch.",
			ConstLabels: labels, Buckets: prometheus.ExponentialBuckets(1e-7, 4, 12)}),
		commitLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tidemark_commit_seconds", Help: "Commit duration (flush, offsets, EndTxn, apply) by trigger.",
			ConstLabels: labels, Buckets: staleBuckets}, []string{"reason"}),
		endLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tidemark_commit_end_seconds", Help: "EndTxn latency (L).", ConstLabels: labels, Buckets: staleBuckets}),
		commits:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_commits_total", Help: "Committed transactions by trigger.", ConstLabels: labels}, []string{"reason"}),
		aborts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_aborts_total",
			Help:        "Aborted transactions by cause: revoked (the group rebalanced mid-transaction), session (the group coordinator turned the offsets away or membership could not be confirmed, no revocation), prepare (a changelog, output or frontier record was not taken), end (EndTxn failed and resolved as aborted), redo (a bad record or a rejected output: redone without it).",
			ConstLabels: labels}, []string{"cause"}),
		taskRecordsIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_task_records_in_total",
			Help: "Input records processed, per task.", ConstLabels: labels}, []string{"task"}),
		taskLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tidemark_task_lag_records",
			Help: "Records behind the input end offsets, per task, as of its last fetch.", ConstLabels: labels}, []string{"task"}),
		sessionRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_session_restarts_total",
			Help:        "Sessions replaced, by cause: fenced, transaction_timeout (the loop kept a transaction open past TransactionTimeout and the broker aborted it), outcome_unknown, transient (a broker outage, a leader election), rebuild (corrupt local state).",
			ConstLabels: labels}, []string{"cause"}),
		processingErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_processing_errors_total",
			Help: "Records whose processing failed in a user function, by the handler's action (fail, continue, dead-letter).", ConstLabels: labels}, []string{"action"}),
		productionErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_production_errors_total",
			Help: "Records whose output the broker rejected for good, by the handler's action.", ConstLabels: labels}, []string{"action"}),
		commitPhase: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tidemark_commit_phase_seconds",
			Help:        "Commit duration by phase: flush (changelog and output records acknowledged), end (offsets and EndTxn), apply (overlays into local state).",
			ConstLabels: labels, Buckets: staleBuckets}, []string{"phase"}),
		produceRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_produce_retries_total",
			Help: "Metadata refreshes the Kafka client triggered to retry produce batches the broker turned away (CONCURRENT_TRANSACTIONS while the previous transaction's markers are written, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS): one per refresh, however many batches it retried. Batches franz-go retries in place after a backoff (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND) are not counted.", ConstLabels: labels}),
		reflectedSkipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_reflected_records_skipped_total",
			Help: "Input records skipped because the local state already reflects them: the group's committed offsets were behind the position the state's changelogs carry.", ConstLabels: labels}),
		stuckThreads: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_stuck_threads",
			Help: "Stream threads whose record loop has not turned within LivenessTimeout (GET /healthz answers 503 while any is).", ConstLabels: labels}),
		stateRebuilds: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_state_rebuilds_total",
			Help: "Times local state was found corrupt while running, moved aside and rebuilt from the changelogs.", ConstLabels: labels}),
		fencedTxns: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_fenced_transactions_total",
			Help: "Open transactions of departed instances this instance ended (they held back read_committed readers and restores).", ConstLabels: labels}),
		peersRemoved: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_peer_members_removed_total",
			Help: "Group members of other instances this instance removed because their HTTP port refused connections for PeerDeadAfter (app_peers.go).", ConstLabels: labels}),
		interval:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_commit_interval_seconds", Help: "Commit interval T chosen by the frontier controller.", ConstLabels: labels}),
		predicted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_predicted_staleness_seconds", Help: "Staleness S(T) the controller predicts.", ConstLabels: labels}),
		predictedHist: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tidemark_predicted_staleness_hist_seconds",
			Help: "Predicted staleness at each commit.", ConstLabels: labels, Buckets: staleBuckets}),
		observedStaleness: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tidemark_observed_staleness_seconds",
			Help: "At each commit: commit time minus the oldest input time among its outputs.", ConstLabels: labels, Buckets: staleBuckets}),
		utilization: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_utilization", Help: "Modelled utilisation ρ(T).", ConstLabels: labels}),
		lag:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_consumer_lag_records", Help: "Records behind the input end offsets.", ConstLabels: labels}),
		tasks:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "tidemark_tasks", Help: "Tasks running on this instance.", ConstLabels: labels}),
		restoredRecords: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_restored_records_total",
			Help: "Changelog records restored into local state.", ConstLabels: labels}),
		restoreRemaining: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tidemark_restore_remaining_records",
			Help: "Changelog records left to restore, per task.", ConstLabels: labels}, []string{"task"}),
		deserializationErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_deserialization_errors_total",
			Help: "Input records that could not be decoded.", ConstLabels: labels}),
		deadLettered: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_dead_lettered_total",
			Help: "Records committed to the dead-letter topic.", ConstLabels: labels}),
		checkpoints: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_checkpoints_total",
			Help: "Local state checkpoints (Badger syncs) completed, by the scheduler's reason: daly, mtbf, restore_target, min_interval, max_interval.", ConstLabels: labels}, []string{"reason"}),
		checkpointSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tidemark_checkpoint_seconds",
			Help: "Checkpoint duration.", ConstLabels: labels, Buckets: staleBuckets}),
		repartitionPurged: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_repartition_purged_records_total",
			Help: "Repartition topic records deleted below the committed offsets (the low watermarks' advance).", ConstLabels: labels}),
		repartitionPurgeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "tidemark_repartition_purge_errors_total",
			Help: "Failed purges of repartition topics (retried at the next interval).", ConstLabels: labels}),
	}
	m.tenantOutputs, m.tenantStaleness = newTenantMetrics(labels, staleBuckets)
	m.fair = newFairMetrics(labels, f)
	m.pipe = newPipeMetrics(labels, staleBuckets, f)
	m.outOfContact = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tidemark_out_of_contact_threads",
		Help:        "Stream threads that have not heard from the group coordinator for longer than the session timeout (a network partition, a freeze): their partitions may have moved, their queries and GET /readyz answer 503.",
		ConstLabels: labels},
		func() float64 {
			if f := m.contactFn.Load(); f != nil {
				return (*f)()
			}
			return 0
		})
	m.snap = newSnapshotMetrics(labels)
	for _, c := range m.snap.collectors() {
		f(c)
	}
	m.dropped = newDroppedRecords(reg, labels)
	m.registered = append(m.registered, m.dropped.total)
	for _, c := range []prometheus.Collector{m.checkpoints, m.checkpointSeconds, m.recordsIn, m.recordsOut, m.processing, m.commitLatency, m.endLatency,
		m.commits, m.aborts, m.taskRecordsIn, m.taskLag, m.sessionRestarts, m.fencedTxns, m.peersRemoved, m.stateRebuilds, m.stuckThreads, m.outOfContact, m.processingErrors, m.productionErrors, m.commitPhase, m.produceRetries, m.reflectedSkipped, m.interval, m.predicted, m.predictedHist, m.observedStaleness,
		m.utilization, m.lag, m.tasks, m.restoredRecords, m.restoreRemaining, m.deserializationErrors, m.deadLettered,
		m.repartitionPurged, m.repartitionPurgeErrors, m.tenantOutputs, m.tenantStaleness,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	m.initLabels()
	return m
}

// initLabels exports the counters whose label values are a fixed set at 0
// from the start: a series that appears only with its first event cannot
// be told from a metric that does not exist, and rate() and alerts over it
// see nothing until then.
func (m *appMetrics) initLabels() {
	for _, cause := range []string{"rebuild", "fenced", "transaction_timeout", "outcome_unknown", "restart", "transient"} {
		m.sessionRestarts.WithLabelValues(cause)
	}
	for _, cause := range []string{abortRevoked, abortSession, abortPrepare, abortEnd, abortRedo} {
		m.aborts.WithLabelValues(cause)
	}
	for _, a := range []ErrorAction{Fail, Continue, DeadLetter} {
		m.processingErrors.WithLabelValues(a.String())
		m.productionErrors.WithLabelValues(a.String())
	}
	for _, reason := range []string{"daly", "mtbf", "restore_target", "min_interval", "max_interval"} {
		m.checkpoints.WithLabelValues(reason)
	}
	for _, result := range []string{"loaded", "fallback", "failed", "none"} {
		m.snap.restores.WithLabelValues(result)
	}
}

func (m *appMetrics) observeDecision(d frontier.Decision) {
	m.interval.Set(d.Interval.Seconds())
	if d.PredictedStaleness < time.Hour {
		m.predicted.Set(d.PredictedStaleness.Seconds())
	}
	m.utilization.Set(d.Utilization)
	if d.Commit && d.PredictedStaleness < time.Hour {
		m.predictedHist.Observe(d.PredictedStaleness.Seconds())
	}
}

func (m *appMetrics) observeCommit(reason string, total time.Duration, phases [3]time.Duration) {
	m.commits.WithLabelValues(reason).Inc()
	m.commitLatency.WithLabelValues(reason).Observe(total.Seconds())
	m.endLatency.Observe(phases[1].Seconds())
	for i, d := range phases {
		m.commitPhase.WithLabelValues(phaseNames[i]).Observe(d.Seconds())
	}
}

// Abort causes, the values of tidemark_aborts_total's cause label.
const (
	abortRevoked = "revoked"
	abortSession = "session"
	abortPrepare = "prepare"
	abortEnd     = "end"
	abortRedo    = "redo"
)

// forgetTask drops a task's per-task series when it leaves this instance,
// so a revoked task does not report a stale lag forever.
func (m *appMetrics) forgetTask(task string) {
	m.taskRecordsIn.DeleteLabelValues(task)
	m.taskLag.DeleteLabelValues(task)
	m.restoreRemaining.DeleteLabelValues(task)
	m.fair.queued.DeleteLabelValues(task)
}
