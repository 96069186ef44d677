package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor"
)

// dashboard collects what the demo shows: generator progress, committed
// input offsets (processed records), outputs and their end-to-end
// staleness as an external read_committed consumer sees them, and the
// frontier controller's choice. Writers (the generator's progress callback,
// the output consumer) and the renderer meet under mu.
type dashboard struct {
	mu        sync.Mutex
	start     time.Time
	gen       gen.Stats
	processed int64 // committed input offsets, summed
	lag       int64
	outputs   map[string]int64
	// Staleness per output topic, µs: the last 10 s and the whole run.
	// The headline figures cover the table changelogs (availability, order
	// state), which every input updates at once; emit-final alerts are
	// stale by design (window + grace) and are shown on their own.
	stale     map[string]*hdrhistogram.WindowedHistogram
	staleAll  map[string]*hdrhistogram.Histogram
	headline  []string
	skuSeen   map[string]int64
	prev      snapshot
	inventory []skuRow
}

type skuRow struct {
	SKU       string
	Available int64
	Held      int64
	Found     bool
}

// snapshot is one rendered frame, also what the final summary prints.
type snapshot struct {
	at                 time.Time
	elapsed            time.Duration
	sent, processed    int64
	outputs            int64
	inRate, outRate    float64
	procRate           float64
	lag                int64
	interval           time.Duration
	predicted, observd time.Duration
	p50, p99           time.Duration // last 10 s
	p50All, p99All     time.Duration
	perTopic           map[string]int64
	topicP50, topicP99 map[string]time.Duration // whole run
	tenants            []tenantRow              // dashboard_tenants.go
	tenantCount        int
}

func newDashboard(outs pipelines.Outputs) *dashboard {
	d := &dashboard{
		start:    time.Now(),
		outputs:  map[string]int64{},
		stale:    map[string]*hdrhistogram.WindowedHistogram{},
		staleAll: map[string]*hdrhistogram.Histogram{},
		headline: []string{outs.Availability, outs.OrderState},
		skuSeen:  map[string]int64{},
	}
	for _, t := range outs.All() {
		d.stale[t] = hdrhistogram.NewWindowed(10, 1, 3_600_000_000, 3)
		d.staleAll[t] = hdrhistogram.New(1, 3_600_000_000, 3)
	}
	return d
}

func quantile(h *hdrhistogram.Histogram, q float64) time.Duration {
	if h.TotalCount() == 0 {
		return 0
	}
	return time.Duration(h.ValueAtQuantile(q)) * time.Microsecond
}

func (d *dashboard) onGen(st gen.Stats) {
	d.mu.Lock()
	d.gen = st
	d.mu.Unlock()
}

// consumeOutputs reads the output topics read_committed until ctx is done,
// recording each record's staleness: receive time − record timestamp (the
// event time the result covers).
func (d *dashboard) consumeOutputs(ctx context.Context, brokers []string, topics []string, availability string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("demo: output consumer: %w", err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		now := time.Now()
		d.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			d.outputs[r.Topic]++
			us := max(1, now.Sub(r.Timestamp).Microseconds())
			if w := d.stale[r.Topic]; w != nil {
				_ = w.Current.RecordValue(us)
				_ = d.staleAll[r.Topic].RecordValue(us)
			}
			if r.Topic == availability {
				d.skuSeen[string(r.Key)]++
			}
		})
		d.mu.Unlock()
	}
}

// pollProgress reads the group's committed offsets and the input end
// offsets: processed records and lag as the broker sees them.
func (d *dashboard) pollProgress(ctx context.Context, adm *kadm.Client, group string, inputs []string) {
	ctx, cancel := context.WithTimeout(ctx, 800*time.Millisecond)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, inputs...)
	if err != nil {
		return
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return
	}
	var proc, lag int64
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := committed.Lookup(o.Topic, o.Partition)
		at := int64(0)
		if ok && c.At > 0 {
			at = c.At
		}
		proc += at
		lag += max(0, o.Offset-at)
	})
	d.mu.Lock()
	d.processed, d.lag = proc, lag
	d.mu.Unlock()
}

// pollInventory reads the most updated skus from the app's store with
// interactive queries (app.Get): what a storefront would ask.
func (d *dashboard) pollInventory(ctx context.Context, app *processor.App, n int) {
	d.mu.Lock()
	skus := make([]string, 0, len(d.skuSeen))
	for k := range d.skuSeen {
		skus = append(skus, k)
	}
	sort.Slice(skus, func(i, j int) bool {
		if d.skuSeen[skus[i]] != d.skuSeen[skus[j]] {
			return d.skuSeen[skus[i]] > d.skuSeen[skus[j]]
		}
		return skus[i] < skus[j]
	})
	d.mu.Unlock()
	if len(skus) > n {
		skus = skus[:n]
	}
	sort.Strings(skus)
	rows := make([]skuRow, 0, len(skus))
	for _, sku := range skus {
		qctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		res, err := app.Get(qctx, pipelines.StoreAvailability, []byte(sku))
		cancel()
		row := skuRow{SKU: sku}
		if err == nil && res.Found && len(res.Entries) == 1 {
			// DSL key-value stores prefix values with their 8-byte timestamp.
			if v := res.Entries[0].Value; len(v) > 8 {
				var a pipelines.Availability
				if json.Unmarshal(v[8:], &a) == nil {
					row.Available, row.Held, row.Found = a.Available, a.Held, true
				}
			}
		}
		rows = append(rows, row)
	}
	d.mu.Lock()
	d.inventory = rows
	d.mu.Unlock()
}

// frame takes a snapshot and rotates the 10-second staleness window.
func (d *dashboard) frame(app *processor.App) snapshot {
	ctrl := app.ControllerSnapshot()
	tenants := app.TenantStats()
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	s := snapshot{at: now, elapsed: now.Sub(d.start), sent: int64(d.gen.Acked), processed: d.processed, lag: d.lag,
		interval: ctrl.Interval, predicted: ctrl.PredictedStaleness, observd: ctrl.ObservedStaleness, perTopic: map[string]int64{},
		topicP50: map[string]time.Duration{}, topicP99: map[string]time.Duration{},
		tenants: topTenants(tenants, dashboardTenants), tenantCount: len(tenants)}
	for t, n := range d.outputs {
		s.outputs += n
		s.perTopic[t] = n
	}
	recent, all := hdrhistogram.New(1, 3_600_000_000, 3), hdrhistogram.New(1, 3_600_000_000, 3)
	for _, t := range d.headline {
		recent.Merge(d.stale[t].Merge())
		all.Merge(d.staleAll[t])
	}
	s.p50, s.p99 = quantile(recent, 50), quantile(recent, 99)
	s.p50All, s.p99All = quantile(all, 50), quantile(all, 99)
	for t, h := range d.staleAll {
		s.topicP50[t], s.topicP99[t] = quantile(h, 50), quantile(h, 99)
	}
	if p := d.prev; !p.at.IsZero() {
		dt := now.Sub(p.at).Seconds()
		s.inRate = float64(s.sent-p.sent) / dt
		s.procRate = float64(s.processed-p.processed) / dt
		s.outRate = float64(s.outputs-p.outputs) / dt
	}
	d.prev = s
	for _, w := range d.stale {
		w.Rotate()
	}
	return s
}

// inputs are the records in the pipelines' input topics: each is either
// processed (its offset committed) or lag.
func (s snapshot) inputs() int64 { return s.processed + s.lag }

func (s snapshot) line() string {
	return fmt.Sprintf("t=%s generated=%d (%.0f/s) inputs=%d processed=%d (%.0f/s) out=%d (%.0f/s) lag=%d commit_interval=%s staleness_p50=%s p99=%s",
		s.elapsed.Round(time.Second), s.sent, s.inRate, s.inputs(), s.processed, s.procRate, s.outputs, s.outRate, s.lag,
		s.interval.Round(time.Millisecond), s.p50.Round(time.Millisecond), s.p99.Round(time.Millisecond))
}

// render draws the full-screen dashboard with plain ANSI escapes.
func (d *dashboard) render(w io.Writer, s snapshot, outs pipelines.Outputs, httpAddr, logPath string) {
	d.mu.Lock()
	inv := append([]skuRow(nil), d.inventory...)
	d.mu.Unlock()
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J")
	fmt.Fprintf(&b, "tidemark demo — marketplace pipelines   %s elapsed   (Ctrl-C stops)\n\n", s.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "  generated  %10d records   %8.0f/s   (all topics, clicks included; acked)\n", s.sent, s.inRate)
	fmt.Fprintf(&b, "  inputs     %10d records              (in the pipelines' input topics: clicks are read by none)\n", s.inputs())
	fmt.Fprintf(&b, "  processed  %10d records   %8.0f/s   (committed input offsets)\n", s.processed, s.procRate)
	fmt.Fprintf(&b, "  lag        %10d records\n", s.lag)
	fmt.Fprintf(&b, "  output     %10d records   %8.0f/s   (read_committed)      staleness p50 / p99, whole run\n", s.outputs, s.outRate)
	for _, t := range outs.All() {
		fmt.Fprintf(&b, "    %-28s %10d   %18s / %s\n", t, s.perTopic[t], s.topicP50[t].Round(time.Millisecond), s.topicP99[t].Round(time.Millisecond))
	}
	b.WriteString("    (fraud alerts and tenant activity are emit-final: they wait for window end + grace by design;\n")
	b.WriteString("     cart totals are suppressed to one per cart per second of event time)\n")
	fmt.Fprintf(&b, "\n  commit interval  %s (predicted staleness %s, observed %s)\n",
		s.interval.Round(time.Millisecond), s.predicted.Round(time.Millisecond), s.observd.Round(time.Millisecond))
	fmt.Fprintf(&b, "  end-to-end staleness of table updates, last 10 s   p50 %s   p99 %s\n", s.p50.Round(time.Millisecond), s.p99.Round(time.Millisecond))
	fmt.Fprintf(&b, "  end-to-end staleness of table updates, whole run   p50 %s   p99 %s\n", s.p50All.Round(time.Millisecond), s.p99All.Round(time.Millisecond))
	renderTenants(&b, s.tenants, s.tenantCount)
	b.WriteString("\n  live inventory (app.Get on store " + pipelines.StoreAvailability + ")\n")
	for _, r := range inv {
		if r.Found {
			fmt.Fprintf(&b, "    %-22s available %6d   held %6d\n", r.SKU, r.Available, r.Held)
		} else {
			fmt.Fprintf(&b, "    %-22s (not yet committed)\n", r.SKU)
		}
	}
	if httpAddr != "" {
		fmt.Fprintf(&b, "\n  Web view: http://%s/ui\n", httpAddr)
		fmt.Fprintf(&b, "  HTTP: http://%s/stores/%s/keys/<sku>   /frontier   /metrics\n", httpAddr, pipelines.StoreAvailability)
	}
	if logPath != "" {
		fmt.Fprintf(&b, "  log: %s\n", logPath)
	}
	_, _ = io.WriteString(w, b.String())
}

func (s snapshot) summary(outs pipelines.Outputs) string {
	var b strings.Builder
	fmt.Fprintf(&b, "demo summary: ran %s; generated %d records (%d of them in the pipelines' input topics; no pipeline reads clicks), processed %d, produced %d outputs (",
		s.elapsed.Round(time.Second), s.sent, s.inputs(), s.processed, s.outputs)
	for i, t := range outs.All() {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%d", t, s.perTopic[t])
	}
	fmt.Fprintf(&b, "); final lag %d; commit interval %s; end-to-end staleness of table updates p50 %s p99 %s",
		s.lag, s.interval.Round(time.Millisecond), s.p50All.Round(time.Millisecond), s.p99All.Round(time.Millisecond))
	for _, t := range []string{outs.FraudAlerts, outs.LateAlerts} {
		if s.perTopic[t] > 0 {
			fmt.Fprintf(&b, "; %s p50 %s p99 %s", t, s.topicP50[t].Round(time.Millisecond), s.topicP99[t].Round(time.Millisecond))
		}
	}
	b.WriteString(tenantSummary(s.tenants))
	return b.String()
}
