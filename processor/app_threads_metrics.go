package processor

import (
	"github.com/prometheus/client_golang/prometheus"
)

// threadMetrics are the per stream thread series (label thread, "0" to
// "n-1"; app_threads.go). The App-wide series (tidemark_tasks,
// tidemark_consumer_lag_records, tidemark_commits_total, ...) stay the
// process's totals; the controller's gauges (tidemark_commit_interval_seconds
// and the like) are set by whichever thread decided last, so the
// thread-labelled interval is the one to read with more than one thread.
type threadMetrics struct {
	tasks    *prometheus.GaugeVec
	lag      *prometheus.GaugeVec
	commits  *prometheus.CounterVec
	interval *prometheus.GaugeVec
}

func newThreadMetrics(reg *prometheus.Registry, app string) *threadMetrics {
	labels := prometheus.Labels{"app": app}
	m := &threadMetrics{
		tasks: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tidemark_thread_tasks",
			Help: "Tasks running on each stream thread.", ConstLabels: labels}, []string{"thread"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tidemark_thread_consumer_lag_records",
			Help: "Records each stream thread is behind its inputs' end offsets.", ConstLabels: labels}, []string{"thread"}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_thread_commits_total",
			Help: "Committed transactions of each stream thread.", ConstLabels: labels}, []string{"thread"}),
		interval: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tidemark_thread_commit_interval_seconds",
			Help: "Commit interval T each stream thread's frontier controller chose.", ConstLabels: labels}, []string{"thread"}),
	}
	reg.MustRegister(m.tasks, m.lag, m.commits, m.interval)
	return m
}

func (a *App) threadMetrics() *threadMetrics { return a.thm }
