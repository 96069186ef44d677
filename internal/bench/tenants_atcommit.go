package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tidemark-streams/tidemark/processor"
)

// The tenant burst's view at commit. The external consumer's staleness
// runs from the input's send to the output's read_committed receipt, one
// sample per output. The app's own per-tenant account
// (processor.App.TenantStats) takes one sample per commit with outputs of
// the tenant: commit time minus the oldest input timestamp (here the send
// time) among them. So it holds everything up to the commit but not the
// read after it, and, being the worst output of each commit, its p99 is
// well above the per-output p99: compare it before and during the burst,
// not with the external figures. A worker with Job.ReportTenants prints
// its tenants' p99 that often:
//
//	TENANTS {"t01": 12.5, …}   p99 ms over each tenant's last 1024 commits
const tenantsLine = "TENANTS"

// appP99Settle is how far into a window a snapshot must be taken to count
// for it: a snapshot covers the tenant's last 1024 commits, about 10-15 s
// at the commit rates of the burst measurement, so an earlier one is
// mostly the window before.
const appP99Settle = 10 * time.Second

// writeTenants writes one TENANTS line of stats to w (the worker's stdout).
func writeTenants(w io.Writer, stats map[string]processor.TenantStats) {
	p99 := make(map[string]float64, len(stats))
	for t, s := range stats {
		p99[t] = float64(s.StalenessP99.Microseconds()) / 1000
	}
	b, _ := json.Marshal(p99) // a map of strings to floats always encodes
	fmt.Fprintf(w, "%s %s\n", tenantsLine, b)
}

// appP99s is, per tenant, the largest at-commit p99 among the TENANTS lines
// that arrived from appP99Settle into [from, to) to its end.
func (l *eventLog) appP99s(from, to time.Time) map[string]float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]float64{}
	for _, e := range l.ev {
		if e.at.Before(from.Add(appP99Settle)) || !e.at.Before(to) {
			continue
		}
		rest, ok := strings.CutPrefix(e.line, tenantsLine+" ")
		if !ok {
			continue
		}
		var p99 map[string]float64
		if json.Unmarshal([]byte(rest), &p99) != nil {
			continue
		}
		for t, v := range p99 {
			out[t] = max(out[t], v)
		}
	}
	return out
}
