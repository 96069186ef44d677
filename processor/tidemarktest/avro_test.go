package tidemarktest_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor/tidemarktest"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/serde/srtest"
	"github.com/tidemark-streams/tidemark/topology"
)

// Orders in Avro through a (fake) Schema Registry, written by two producer
// versions, aggregated per customer into an Avro summary: the model folds
// the orders as the v2 reader sees them, independently of the serdes.

const orderV1Schema = `{"type":"record","name":"Order","namespace":"shop","fields":[
	{"name":"id","type":"string"},
	{"name":"customer","type":"string"},
	{"name":"placed_at","type":{"type":"long","logicalType":"timestamp-millis"}},
	{"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
		{"name":"sku","type":"string"},{"name":"qty","type":"int"}]}}},
	{"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"],"default":"NEW"}}]}`

// v2 adds an optional coupon and a price per line (defaults), and a status
// symbol v1 readers do not know.
const orderV2Schema = `{"type":"record","name":"Order","namespace":"shop","fields":[
	{"name":"id","type":"string"},
	{"name":"customer","type":"string"},
	{"name":"placed_at","type":{"type":"long","logicalType":"timestamp-millis"}},
	{"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
		{"name":"sku","type":"string"},{"name":"qty","type":"int"},{"name":"cents","type":"long","default":100}]}}},
	{"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID","REFUNDED"],"default":"NEW"}},
	{"name":"coupon","type":["null","string"],"default":null}]}`

const summarySchema = `{"type":"record","name":"Summary","namespace":"shop","fields":[
	{"name":"orders","type":"long"},
	{"name":"cents","type":"long"},
	{"name":"by_status","type":{"type":"map","values":"int"}},
	{"name":"coupons","type":{"type":"array","items":"string"}},
	{"name":"last_order","type":["null","string"],"default":null},
	{"name":"last_at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`

type orderLineV1 struct {
	SKU string `avro:"sku"`
	Qty int32  `avro:"qty"`
}

type orderV1 struct {
	ID       string        `avro:"id"`
	Customer string        `avro:"customer"`
	PlacedAt time.Time     `avro:"placed_at"`
	Lines    []orderLineV1 `avro:"lines"`
	Status   string        `avro:"status"`
}

type orderLine struct {
	SKU   string `avro:"sku"`
	Qty   int32  `avro:"qty"`
	Cents int64  `avro:"cents"`
}

type orderV2 struct {
	ID       string      `avro:"id"`
	Customer string      `avro:"customer"`
	PlacedAt time.Time   `avro:"placed_at"`
	Lines    []orderLine `avro:"lines"`
	Status   string      `avro:"status"`
	Coupon   *string     `avro:"coupon"`
}

type summary struct {
	Orders    int64            `avro:"orders"`
	Cents     int64            `avro:"cents"`
	ByStatus  map[string]int32 `avro:"by_status"`
	Coupons   []string         `avro:"coupons"`
	LastOrder *string          `avro:"last_order"`
	LastAt    time.Time        `avro:"last_at"`
}

func addOrder(_ string, o orderV2, s summary) summary {
	by := map[string]int32{}
	for k, v := range s.ByStatus {
		by[k] = v
	}
	by[o.Status]++
	out := summary{Orders: s.Orders + 1, Cents: s.Cents, ByStatus: by, Coupons: append([]string{}, s.Coupons...), LastOrder: &o.ID, LastAt: o.PlacedAt}
	for _, l := range o.Lines {
		out.Cents += int64(l.Qty) * l.Cents
	}
	if o.Coupon != nil {
		out.Coupons = append(out.Coupons, *o.Coupon)
	}
	return out
}

func avroSerde[T any](t *testing.T, schema string, opts ...serde.AvroOption) serde.Serde[T] {
	t.Helper()
	s, err := serde.Avro[T](schema, opts...)
	must(t, err)
	return s
}

func TestAvroRegistryAggregationMatchesModel(t *testing.T) {
	seed := randomSeed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	fake := srtest.NewRegistry(t)
	cl := fake.Client(t)

	b := topology.NewBuilder("app")
	b.Stream("orders", serde.String(), avroSerde[orderV2](t, orderV2Schema, serde.WithRegistry(cl, "orders-value"))).
		GroupByKey().
		Aggregate(func() summary { return summary{ByStatus: map[string]int32{}, Coupons: []string{}} }, addOrder,
			avroSerde[summary](t, summarySchema, serde.WithRegistry(cl, "summaries-value")), topology.Named("summaries")).
		ToStream().To("summaries")
	d := newDriver(t, b, tidemarktest.WithDefaultPartitions(3))

	inV1 := tidemarktest.Input(d, "orders", serde.String(), avroSerde[orderV1](t, orderV1Schema, serde.WithRegistry(cl, "orders-value")))
	inV2 := tidemarktest.Input(d, "orders", serde.String(), avroSerde[orderV2](t, orderV2Schema, serde.WithRegistry(cl, "orders-value")))
	model := map[string]summary{}
	ts := int64(1_700_000_000_000)
	for i := range 400 {
		ts += rng.Int64N(500)
		at := ts - rng.Int64N(5000) // out of order
		cust := fmt.Sprintf("c%d", rng.IntN(15))
		if rng.IntN(10) == 0 {
			must(t, inV2.PipeTombstone(cust, at)) // aggregations skip tombstones
			continue
		}
		o := orderV2{ID: fmt.Sprintf("o%d", i), Customer: cust, PlacedAt: time.UnixMilli(at).UTC(), Lines: []orderLine{}}
		for range rng.IntN(4) {
			o.Lines = append(o.Lines, orderLine{SKU: fmt.Sprintf("sku-%d", rng.IntN(9)), Qty: int32(rng.IntN(5) + 1), Cents: 100})
		}
		if rng.IntN(2) == 0 {
			o.Status = []string{"NEW", "PAID"}[rng.IntN(2)]
			v1 := orderV1{ID: o.ID, Customer: cust, PlacedAt: o.PlacedAt, Status: o.Status, Lines: []orderLineV1{}}
			for _, l := range o.Lines {
				v1.Lines = append(v1.Lines, orderLineV1{l.SKU, l.Qty})
			}
			must(t, inV1.Pipe(cust, v1, at))
		} else {
			o.Status = []string{"NEW", "PAID", "REFUNDED"}[rng.IntN(3)]
			for j := range o.Lines {
				o.Lines[j].Cents = rng.Int64N(5000)
			}
			if rng.IntN(3) == 0 {
				c := fmt.Sprintf("cp-%d", rng.IntN(4))
				o.Coupon = &c
			}
			must(t, inV2.Pipe(cust, o, at))
		}
		old, ok := model[cust]
		if !ok {
			old = summary{ByStatus: map[string]int32{}, Coupons: []string{}}
		}
		model[cust] = addOrder(cust, o, old)
	}

	got := map[string]summary{}
	out := tidemarktest.Output(d, "summaries", serde.String(), avroSerde[summary](t, summarySchema, serde.WithRegistry(cl, "summaries-value")))
	for _, r := range readAll(t, out) {
		got[r.Key] = r.Value
	}
	if !reflect.DeepEqual(got, model) {
		for k := range model {
			if !reflect.DeepEqual(got[k], model[k]) {
				t.Errorf("%s:\n got %+v\nwant %+v", k, got[k], model[k])
			}
		}
		t.Fatalf("%d summaries, model has %d", len(got), len(model))
	}
	if n := len(fake.Subjects("orders-value")); n != 2 {
		t.Errorf("orders-value holds %d schemas, want v1 and v2", n)
	}
	// The app's serdes fetched v1 once; the store and the output share
	// one registered summary schema.
	if f := fake.Fetches(); f > 3 {
		t.Errorf("%d schema fetches for 2 foreign writer schemas, want them cached", f)
	}
}

// A record that is not Avro fails the task with serde.ErrDecode, or is
// dropped with SkipUndecodable; a registry that is down fails the task with
// serde.ErrRegistry even with SkipUndecodable, so that records are never
// dropped for an outage.
func TestAvroUndecodableAndRegistryOutage(t *testing.T) {
	for _, skip := range []bool{false, true} {
		t.Run(fmt.Sprintf("skip=%v", skip), func(t *testing.T) {
			fake := srtest.NewRegistry(t)
			cl := fake.Client(t)
			var opts []topology.SourceOption
			if skip {
				opts = append(opts, topology.SkipUndecodable())
			}
			b := topology.NewBuilder("app")
			b.Stream("orders", serde.String(), avroSerde[orderV2](t, orderV2Schema, serde.WithRegistry(cl, "orders-value")), opts...).To("out")
			d := newDriver(t, b)
			raw := tidemarktest.Input(d, "orders", serde.String(), serde.Bytes())
			err := raw.Pipe("k", []byte("not avro"), 1)
			switch {
			case !skip && !errors.Is(err, serde.ErrDecode):
				t.Fatalf("garbage: %v, want the task to fail with serde.ErrDecode", err)
			case skip && err != nil:
				t.Fatalf("garbage with SkipUndecodable: %v, want it dropped", err)
			}
			v1 := avroSerde[orderV1](t, orderV1Schema, serde.WithRegistry(cl, "orders-value"))
			rec, err := v1.Encode(nil, orderV1{ID: "o1", Customer: "k", Lines: []orderLineV1{}, Status: "NEW"})
			must(t, err)
			fake.SetDown(true)
			err = raw.Pipe("k", rec, 2)
			if !errors.Is(err, serde.ErrRegistry) || errors.Is(err, serde.ErrDecode) {
				t.Fatalf("registry down: %v, want the task to fail with serde.ErrRegistry, not ErrDecode", err)
			}
		})
	}
}
