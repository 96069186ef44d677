package processor

import (
	"cmp"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidemark-streams/tidemark/task"
	"github.com/tidemark-streams/tidemark/topology"
)

// dropLogEvery is the shortest interval between two log lines about one
// (task, operator, reason): a flood of late or null-keyed records yields a
// line every 10 s with the count since the previous one, not a line per
// record as in Kafka Streams.
const dropLogEvery = 10 * time.Second

// droppedRecords exports the records the tasks dropped (task.Task's
// DroppedBy): the counter tidemark_dropped_records_total{task, node,
// reason}, and a rate-limited warning per (task, node, reason) whenever the
// count grows. Undecodable records a SkipUndecodable source dropped also
// count as deserialization errors, like the ones that fail the task or go
// to the dead-letter topic, and like those when their transaction commits
// (txnState.undecodable): a transaction redone after an abort drops its
// undecodable records again, and tidemark_deserialization_errors_total
// must count each bad record once, not once per attempt.
//
// Task counters restart at zero when a task is recreated (after an abort,
// in a new session, on another assignment); droppedRecords remembers which
// Task instance its last reading came from, so the exported counters only
// ever grow. Records reprocessed after an abort are dropped, and counted,
// again: the counts are observations of processing, not transactional
// state, as in Kafka Streams. It is not safe for concurrent use: the
// session's record loop, which also runs the tasks, calls it.
type droppedRecords struct {
	total *prometheus.CounterVec
	every time.Duration
	sites map[dropSite]*dropState
	round uint64
}

// dropSite is where, and why, records were dropped.
type dropSite struct {
	task topology.TaskID
	task.DropKey
}

type dropState struct {
	from     *task.Task // the instance the last reading came from
	read     int64      // its count at that reading
	unlogged int64      // exported but not logged yet
	logged   time.Time
	seen     uint64 // the last round the site's task was read
}

// newDroppedRecords registers tidemark_dropped_records_total with reg.
func newDroppedRecords(reg prometheus.Registerer, labels prometheus.Labels) *droppedRecords {
	d := &droppedRecords{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tidemark_dropped_records_total",
			Help:        "Records an operator dropped, by task, operator (node) and reason: late, invalid-timestamp, skipped (a tombstone an aggregation, join or flat-map skips), undecodable (SkipUndecodable), null-key.",
			ConstLabels: labels}, []string{"task", "node", "reason"}),
		every: dropLogEvery,
		sites: map[dropSite]*dropState{},
	}
	reg.MustRegister(d.total)
	return d
}

// exportDropped exports what the session's tasks dropped since the last
// call and logs it, rate-limited, through d (the App's, which outlives
// sessions: appMetrics.dropped). Call it from the record loop once per
// iteration: a pending log line goes out once its 10 s have passed even
// when nothing more is dropped. Undecodable drops go to the open
// transaction's count of undecodable records, which the metric gets when
// it commits.
func (s *session) exportDropped(d *droppedRecords, now time.Time) {
	d.export(now, s.app.log, func(yield func(*task.Task) bool) {
		for _, lt := range s.tasks {
			if !yield(lt.task) {
				return
			}
		}
	}, func(n int64) {
		s.txn.mu.Lock()
		s.txn.undecodable += int(n)
		s.txn.mu.Unlock()
	})
}

// flushDropped logs the drops not logged yet, whatever the rate limit:
// call it when the session ends, after a last exportDropped.
func (s *session) flushDropped(d *droppedRecords, now time.Time) { d.flush(now, s.app.log) }

// export reads every task's drop counters, adds what grew to the Prometheus
// counters, and logs each site whose last line is at least d.every old (or
// that never had one) with the count since that line.
//
// undecodable, when not nil, gets the undecodable drops' growth.
func (d *droppedRecords) export(now time.Time, log *slog.Logger, tasks iter.Seq[*task.Task], undecodable func(n int64)) {
	d.round++
	for t := range tasks {
		id := t.ID()
		for k, n := range t.DroppedBy() {
			site := dropSite{task: id, DropKey: k}
			st := d.sites[site]
			if st == nil {
				st = &dropState{}
				d.sites[site] = st
			}
			if st.from != t {
				st.from, st.read = t, 0
			}
			st.seen = d.round
			if grew := n - st.read; grew > 0 {
				st.read = n
				st.unlogged += grew
				d.total.WithLabelValues(id.String(), k.Node, k.Reason.String()).Add(float64(grew))
				if k.Reason == topology.DropUndecodable && undecodable != nil {
					undecodable(grew)
				}
			}
		}
	}
	var due []dropSite
	for site, st := range d.sites {
		if st.unlogged > 0 && d.due(st, now) {
			due = append(due, site)
		}
	}
	d.logSites(log, due, now)
	for site, st := range d.sites {
		if st.seen != d.round {
			// The site's task is gone, or was recreated and has not dropped
			// anything there yet: forget the old instance, and the site
			// once its rate limit no longer matters.
			st.from, st.read = nil, 0
			if st.unlogged == 0 && d.due(st, now) {
				delete(d.sites, site)
			}
		}
	}
}

// flush logs every site with drops not logged yet, whatever the rate
// limit: for a final line when the session ends.
func (d *droppedRecords) flush(now time.Time, log *slog.Logger) {
	var due []dropSite
	for site, st := range d.sites {
		if st.unlogged > 0 {
			due = append(due, site)
		}
	}
	d.logSites(log, due, now)
}

// logSites logs sites in a stable order: task, operator, reason.
func (d *droppedRecords) logSites(log *slog.Logger, sites []dropSite, now time.Time) {
	slices.SortFunc(sites, func(a, b dropSite) int {
		return cmp.Or(cmp.Compare(a.task.SubTopology, b.task.SubTopology), cmp.Compare(a.task.Partition, b.task.Partition),
			strings.Compare(a.Node, b.Node), cmp.Compare(a.Reason, b.Reason))
	})
	for _, site := range sites {
		d.log(log, site, d.sites[site], now)
	}
}

// due says whether the site may log a line now.
func (d *droppedRecords) due(st *dropState, now time.Time) bool {
	return st.logged.IsZero() || now.Sub(st.logged) >= d.every
}

func (d *droppedRecords) log(log *slog.Logger, site dropSite, st *dropState, now time.Time) {
	attrs := []any{"task", site.task.String(), "node", site.Node, "reason", site.Reason.String(), "count", st.unlogged}
	if !st.logged.IsZero() {
		attrs = append(attrs, "since", now.Sub(st.logged).Round(time.Millisecond))
	}
	log.Warn("dropped records", attrs...)
	st.unlogged, st.logged = 0, now
}
