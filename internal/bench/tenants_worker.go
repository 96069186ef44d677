package bench

import (
	"context"
	"strconv"
	"strings"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// tenantsWorker is the worker kind of the tenant burst measurement.
const tenantsWorker = "tidemark-tenants"

func init() { RegisterWorker(tenantsWorker, runTenantsWorker) }

// tenantsTopology is the count workload with the tenant named on the
// source: keys are "<tenant>/<sku>", so every count update is the tenant's
// output and the app accounts it to the tenant (topology.WithTenant). With
// isolation on the output is placed like the input.
func tenantsTopology(job Job, iso TenantIsolation) (*topology.Topology, error) {
	b := topology.NewBuilder(job.AppID)
	b.Stream(job.Input, serde.String(), serde.String(), topology.WithTenant(func(k, _ string) string {
		t, _, _ := strings.Cut(k, "/")
		return t
	})).
		GroupByKey(topology.Named("counts")).Count(topology.Named("counts")).ToStream().
		MapValues(func(_ string, n int64) string { return strconv.FormatInt(n, 10) }).
		WithSerdes(serde.String(), serde.String()).To(job.Output, iso.sinkOpts()...)
	return b.Build()
}

func runTenantsWorker(ctx context.Context, job Job, ready func()) error {
	var iso TenantIsolation
	if job.Isolation != nil {
		iso = *job.Isolation
	}
	topo, err := tenantsTopology(job, iso)
	if err != nil {
		return err
	}
	return runApp(ctx, job, topo, iso.appOpts(), ready)
}
