package tidemarktest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// An outer join's unmatched records carry headers as in Kafka Streams'
// KStreamKStreamJoin: one emitted when its window closes carries the
// headers of the record whose arrival closed it (Kafka Streams forwards
// that record with the unjoined key, value and timestamp); one emitted at
// once (out of order, window already closed) keeps its own.
func TestOuterJoinUnjoinedRecordHeaders(t *testing.T) {
	b := topology.NewBuilder("app")
	r := b.Stream("payments", serde.String(), serde.String())
	b.Stream("orders", serde.String(), serde.String()).
		OuterJoin(r, func(_ string, o string, lok bool, p string, rok bool) string { return opt(o, lok) + "+" + opt(p, rok) },
			topology.JoinWindowsOf(10*time.Second, 0), topology.Named("j")).
		To("joined")
	d := newDriver(t, b)
	orders := tidemarktest.Input(d, "orders", serde.String(), serde.String())
	payments := tidemarktest.Input(d, "payments", serde.String(), serde.String())
	hdr := func(v string) []topology.Header { return []topology.Header{{Key: "src", Value: []byte(v)}} }
	must(t, orders.PipeRecord(topology.Record[string, string]{Key: "o1", Value: "order1", Timestamp: 1_000, Headers: hdr("order1")}))
	must(t, payments.PipeRecord(topology.Record[string, string]{Key: "p2", Value: "pay2", Timestamp: 2_000, Headers: hdr("pay2")}))
	// Closes both windows (ts + 10s < 30s): o1 and p2 are emitted unjoined.
	must(t, orders.PipeRecord(topology.Record[string, string]{Key: "o3", Value: "order3", Timestamp: 30_000, Headers: hdr("order3")}))
	// Out of order, its window long closed: emitted unjoined at once.
	must(t, payments.PipeRecord(topology.Record[string, string]{Key: "p4", Value: "pay4", Timestamp: 5_000, Headers: hdr("pay4")}))

	type out struct{ key, value, src string }
	var got []out
	for _, rec := range readAll(t, tidemarktest.Output(d, "joined", serde.String(), serde.String())) {
		var src []string
		for _, h := range rec.Headers {
			src = append(src, h.Key+"="+string(h.Value))
		}
		got = append(got, out{rec.Key, rec.Value, slices.Concat(src, []string{""})[0]})
	}
	want := []out{
		{"o1", "order1+null", "src=order3"},
		{"p2", "null+pay2", "src=order3"},
		{"p4", "null+pay4", "src=pay4"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("unjoined records %v, want %v", got, want)
	}
}
