package bench

import (
	"strconv"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// orNull is a join side as Kafka Streams' joiner prints it: "null" when
// the side is missing.
func orNull(v string, found bool) string {
	if !found {
		return "null"
	}
	return v
}

// sessionCountTo is bench parity's session count: per key, the final count
// of each session (gap job.WindowSize, job.Grace) as "<key>@<start>@<end>",
// emit-final as Kafka Streams' suppress(untilWindowCloses).
func sessionCountTo(in topology.Stream[string, string], job Job) {
	topology.SessionWindowedBy(in.GroupByKey(topology.Named("session-input")),
		topology.SessionWindowsWithGap(job.WindowSize, job.Grace)).
		Count(topology.Named("session-counts"), topology.EmitFinal()).ToStream().
		Map(func(w topology.Windowed[string], n int64) (string, string) {
			return w.Key + "@" + strconv.FormatInt(w.Start, 10) + "@" + strconv.FormatInt(w.End, 10), strconv.FormatInt(n, 10)
		}).
		WithSerdes(serde.String(), serde.String()).To(job.Output)
}

// parityCategory is the table aggregation's group of a row: "c" and the
// last two characters of its value ("v1234" → "c34").
func parityCategory(v string) string { return "c" + v[max(0, len(v)-2):] }

// tableAggTopology is bench parity's table aggregation: the input read as a
// table (a null value deletes the row), re-keyed by parityCategory and
// counted, every update of a category's count to job.Output as a decimal
// string; a row that changes category is subtracted from its old one.
func tableAggTopology(job Job) (*topology.Topology, error) {
	b := topology.NewBuilder(job.AppID)
	rows := b.Table(job.Input, serde.String(), serde.String(), topology.Named("rows"))
	rows.GroupBy(func(k, v string) (string, string) { return parityCategory(v), k }, serde.String(), serde.String(),
		topology.Named("by-category")).
		Count(topology.Named("category-counts")).ToStream().
		MapValues(func(_ string, n int64) string { return strconv.FormatInt(n, 10) }).
		WithSerdes(serde.String(), serde.String()).To(job.Output)
	return b.Build()
}
