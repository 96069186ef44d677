package gen

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/schemas"
	"github.com/tidemark-streams/tidemark/schemas/schemastest"
)

func mustNew(t testing.TB, cfg Config) *Generator {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func encodeAll(t testing.TB, g *Generator, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	for range n {
		r, err := g.NextRecord()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&buf, "%s|%s|%d|%d|", r.Topic, r.Key, r.Timestamp.UnixMilli(), r.Event.Offset)
		buf.Write(r.Value)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

func TestSameSeedGivesByteIdenticalStream(t *testing.T) {
	for _, f := range []Format{FormatAvro, FormatJSON} {
		cfg := Config{Seed: 42, Format: f, Profile: Profile{Kind: Burst, Rate: 500}}
		a := encodeAll(t, mustNew(t, cfg), 20000)
		b := encodeAll(t, mustNew(t, cfg), 20000)
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: two generators with seed 42 diverged", f)
		}
		cfg.Seed = 43
		if c := encodeAll(t, mustNew(t, cfg), 20000); bytes.Equal(a, c) {
			t.Fatalf("%s: seeds 42 and 43 produced the same stream", f)
		}
	}
}

func TestEventTimeDisorderIsBounded(t *testing.T) {
	for _, d := range []time.Duration{2 * time.Second, 300 * time.Millisecond} {
		g := mustNew(t, Config{Seed: 1, MaxDisorder: d, Profile: Profile{Rate: 2000}})
		var frontier time.Time
		var worst time.Duration
		for ev := range g.All() {
			if ev.Seq == 50000 {
				break
			}
			ts := ev.Time()
			if ts.After(frontier) {
				frontier = ts
			}
			worst = max(worst, frontier.Sub(ts))
			if ts.After(DefaultStart.Add(ev.Offset)) {
				t.Fatalf("event %d has event time %v after its emission offset %v", ev.Seq, ts, ev.Offset)
			}
		}
		if worst > d {
			t.Fatalf("max disorder %v: an event was %v behind the frontier", d, worst)
		}
		if worst < d/2 {
			t.Fatalf("max disorder %v: the worst lag was only %v; the stream is barely out of order", d, worst)
		}
	}
	g := mustNew(t, Config{Seed: 1, MaxDisorder: NoDisorder})
	var last time.Time
	for _, ev := range g.Take(20000) {
		if ev.Time().Before(last) {
			t.Fatalf("NoDisorder: event %d at %v precedes %v", ev.Seq, ev.Time(), last)
		}
		last = ev.Time()
	}
}

type cartRef struct {
	lines    map[string]int32 // sku → quantity in cart
	reserved map[string]int32 // sku → reserved quantity
	price    map[string]int64
	lastAdd  time.Time
}

type orderRef struct {
	cart     string
	statuses []string
	last     time.Time
}

// TestStreamIsCausallyConsistent replays the stream against a reference
// model of carts and orders and checks every step follows its cause, in
// emission order and in event time.
func TestStreamIsCausallyConsistent(t *testing.T) {
	g := mustNew(t, Config{Seed: 7, Profile: Profile{Rate: 1000}})
	carts := map[string]*cartRef{}
	orders := map[string]*orderRef{}
	seen := map[string]int{}
	for _, ev := range g.Take(300000) {
		switch v := ev.Value.(type) {
		case schemas.CartEvent:
			c := carts[v.CartID]
			if c == nil {
				c = &cartRef{lines: map[string]int32{}, reserved: map[string]int32{}, price: map[string]int64{}}
				carts[v.CartID] = c
			}
			if v.Action == schemas.CartAdd {
				c.lines[v.SKU] += v.Quantity
				c.price[v.SKU] = v.UnitPriceCents
				c.lastAdd = v.EventTime
			} else if c.lines[v.SKU] < v.Quantity {
				t.Fatalf("event %d removes %d of %s from cart %s holding %d", ev.Seq, v.Quantity, v.SKU, v.CartID, c.lines[v.SKU])
			} else {
				c.lines[v.SKU] -= v.Quantity
			}
			seen["cart "+string(v.Action)]++
		case schemas.InventoryEvent:
			seen["inventory "+string(v.Kind)]++
			if v.CartID == "" {
				continue
			}
			c := carts[v.CartID]
			if c == nil {
				t.Fatalf("event %d: %s for cart %s that had no add before it", ev.Seq, v.Kind, v.CartID)
			}
			if v.Kind == schemas.InventoryReserve {
				if c.lines[v.SKU] < c.reserved[v.SKU]-v.Delta {
					t.Fatalf("event %d reserves %d of %s for cart %s beyond its %d added", ev.Seq, -v.Delta, v.SKU, v.CartID, c.lines[v.SKU])
				}
				if v.EventTime.Before(c.lastAdd) {
					t.Fatalf("event %d: reserve at %v before the add at %v", ev.Seq, v.EventTime, c.lastAdd)
				}
			}
			c.reserved[v.SKU] -= v.Delta
		case schemas.PaymentEvent:
			seen["payment "+string(v.Status)]++
			o := orders[v.OrderID]
			first := o == nil
			if first {
				c := carts[v.CartID]
				if c == nil || c.lastAdd.IsZero() || !v.EventTime.After(c.lastAdd) {
					t.Fatalf("event %d: payment for order %s without an earlier add to cart %s", ev.Seq, v.OrderID, v.CartID)
				}
				var want int64
				for sku, q := range c.reserved {
					want += int64(q) * c.price[sku]
				}
				if v.AmountCents != want {
					t.Fatalf("event %d: order %s amount %d, cart %s holds %d", ev.Seq, v.OrderID, v.AmountCents, v.CartID, want)
				}
				if v.Status != schemas.PaymentAuthorized && v.Status != schemas.PaymentFailed {
					t.Fatalf("event %d: order %s starts with %s", ev.Seq, v.OrderID, v.Status)
				}
				o = &orderRef{cart: v.CartID}
				orders[v.OrderID] = o
			}
			requireAfter(t, ev, o, map[schemas.PaymentStatus]string{
				schemas.PaymentCaptured: "authorized", schemas.PaymentRefunded: "returned",
			}[v.Status], string(v.Status))
		case schemas.FulfillmentEvent:
			seen["fulfillment "+string(v.Status)]++
			o := orders[v.OrderID]
			if o == nil {
				t.Fatalf("event %d: %s for unknown order %s", ev.Seq, v.Status, v.OrderID)
			}
			requireAfter(t, ev, o, map[schemas.FulfillmentStatus]string{
				schemas.FulfillmentPicked: "captured", schemas.FulfillmentShipped: "picked",
				schemas.FulfillmentDelivered: "shipped", schemas.FulfillmentReturned: "delivered",
			}[v.Status], string(v.Status))
		case schemas.ClickEvent:
			seen["click "+string(v.Page)]++
		}
	}
	for _, k := range []string{"cart add", "cart remove", "inventory restock", "inventory adjust", "inventory reserve",
		"inventory release", "payment authorized", "payment captured", "payment failed", "payment refunded",
		"fulfillment picked", "fulfillment shipped", "fulfillment delivered", "fulfillment returned", "click product"} {
		if seen[k] == 0 {
			t.Errorf("no %s in 300000 events: %v", k, seen)
		}
	}
}

// requireAfter checks that order o already went through cause (if any), then
// records status with the event's time, which must not precede the order's
// previous event.
func requireAfter(t *testing.T, ev Event, o *orderRef, cause, status string) {
	t.Helper()
	if cause != "" && !slices.Contains(o.statuses, cause) {
		t.Fatalf("event %d: %s before %s (order history %v)", ev.Seq, status, cause, o.statuses)
	}
	if ev.Time().Before(o.last) {
		t.Fatalf("event %d: %s at %v precedes the order's previous event at %v", ev.Seq, status, ev.Time(), o.last)
	}
	o.statuses = append(o.statuses, status)
	o.last = ev.Time()
}

func stockWalk(evs []Event) (negative, total int, final map[string]int64) {
	final = map[string]int64{}
	for _, ev := range evs {
		if v, ok := ev.Value.(schemas.InventoryEvent); ok {
			final[v.SKU] += int64(v.Delta)
			total++
			if final[v.SKU] < 0 {
				negative++
			}
		}
	}
	return negative, total, final
}

func TestRestocksKeepStockNonNegativeMostly(t *testing.T) {
	neg, total, _ := stockWalk(mustNew(t, Config{Seed: 3}).Take(200000))
	if total == 0 || float64(neg)/float64(total) > 0.03 {
		t.Fatalf("default oversell: %d of %d inventory events leave stock negative, want at most 3%%", neg, total)
	}
	if neg == 0 {
		t.Fatalf("default oversell rate produced no oversell in %d inventory events", total)
	}
	if neg, total, _ := stockWalk(mustNew(t, Config{Seed: 3, OversellRate: -1}).Take(200000)); neg != 0 {
		t.Fatalf("oversell disabled: %d of %d inventory events leave stock negative", neg, total)
	}
}

func TestTenantsAndPopularityAreSkewed(t *testing.T) {
	g := mustNew(t, Config{Seed: 5, Tenants: 8, SKUsPerTenant: 200})
	byTenant := map[string]int{}
	bySKU := map[string]int{}
	clicks := 0
	for _, ev := range g.Take(100000) {
		if c, ok := ev.Value.(schemas.ClickEvent); ok {
			byTenant[c.Tenant]++
			if c.SKU != "" {
				bySKU[c.SKU]++
				clicks++
			}
		}
	}
	if len(byTenant) != 8 {
		t.Fatalf("traffic reached %d of 8 tenants", len(byTenant))
	}
	if big, small := byTenant["seller-001"], byTenant["seller-008"]; big < 4*small {
		t.Fatalf("seller-001 has %d clicks, seller-008 %d: tenants should differ in size (~8x)", big, small)
	}
	counts := make([]int, 0, len(bySKU))
	for _, n := range bySKU {
		counts = append(counts, n)
	}
	slices.Sort(counts)
	slices.Reverse(counts)
	top := 0
	for _, n := range counts[:16] { // 1% of the 1600 skus
		top += n
	}
	if float64(top)/float64(clicks) < 0.2 {
		t.Fatalf("the top 1%% of skus got %d of %d product clicks; popularity should be Zipf-skewed", top, clicks)
	}
}

func countIn(evs []Event, from, to time.Duration) int {
	n := 0
	for _, ev := range evs {
		if ev.Offset >= from && ev.Offset < to {
			n++
		}
	}
	return n
}

func TestProfilesShapeTheSchedule(t *testing.T) {
	steady := mustNew(t, Config{Profile: Profile{Kind: Steady, Rate: 1000}}).Take(10001)
	if got := steady[10000].Offset; got < 9990*time.Millisecond || got > 10010*time.Millisecond {
		t.Fatalf("steady 1000/s: event 10000 at %v, want 10s", got)
	}
	ramp := mustNew(t, Config{Profile: Profile{Kind: Ramp, Rate: 1000, RampFrom: 100, RampOver: 10 * time.Second}}).Take(20000)
	first, last := countIn(ramp, 0, time.Second), countIn(ramp, 9*time.Second, 10*time.Second)
	if first < 90 || first > 160 || last < 900 || last > 1000 {
		t.Fatalf("ramp 100→1000/s: %d events in the first second, %d in the tenth", first, last)
	}
	burst := mustNew(t, Config{Profile: Profile{Kind: Burst, Rate: 100, BurstFactor: 10, BurstEvery: 10 * time.Second, BurstFor: 2 * time.Second}}).Take(10000)
	in, out := countIn(burst, 10*time.Second, 12*time.Second), countIn(burst, 12*time.Second, 20*time.Second)
	if in < 1990 || in > 2010 || out < 795 || out > 805 {
		t.Fatalf("burst 100/s x10 for 2s of 10s: %d events in the burst (want 2000), %d outside (want 800)", in, out)
	}
}

func TestConfigValidateNamesFieldAndRange(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{Profile: Profile{Rate: -5}}, "Profile.Rate is -5 events/s, accepted range (0, 10000000]"},
		{Config{Profile: Profile{Kind: "sine"}}, `Profile.Kind is "sine"`},
		{Config{Tenants: 20000}, "Tenants is 20000, accepted range 1..10000"},
		{Config{SKUSkew: 0.5}, "SKUSkew is 0.5, accepted range (1, 10]"},
		{Config{MaxDisorder: 2 * time.Hour}, "MaxDisorder is 2h0m0s, accepted range 0..1h"},
		{Config{Format: "xml"}, `Format is "xml"`},
		{Config{Topics: Topics{Carts: "clicks"}}, `topic "clicks" is used by two streams`},
		{Config{Profile: Profile{Kind: Burst, BurstFor: time.Minute}}, "need 0 < BurstFor <= BurstEvery"},
	}
	for _, tc := range cases {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := New(Config{}); err != nil {
		t.Fatalf("the zero Config must be valid: %v", err)
	}
}

func TestRecordsDecodeWithTheSchemasSerdes(t *testing.T) {
	for _, f := range []Format{FormatAvro, FormatJSON} {
		g := mustNew(t, Config{Seed: 9, Format: f, Topics: DefaultTopics.WithPrefix("demo.")})
		for range 5000 {
			r, err := g.NextRecord()
			if err != nil {
				t.Fatal(err)
			}
			var got schemas.Event
			switch r.Topic {
			case "demo.clicks":
				got, err = decodeAs(schemas.Click, f, r.Value)
			case "demo.carts":
				got, err = decodeAs(schemas.Cart, f, r.Value)
			case "demo.inventory":
				got, err = decodeAs(schemas.Inventory, f, r.Value)
			case "demo.payments":
				got, err = decodeAs(schemas.Payment, f, r.Value)
			case "demo.fulfillment":
				got, err = decodeAs(schemas.Fulfillment, f, r.Value)
			case "demo.products":
				s, _ := schemas.ProductAvro()
				if f == FormatJSON {
					s = schemas.ProductJSON()
				}
				got, err = s.Decode(r.Value)
			case "demo.tenants":
				s, _ := schemas.TenantAvro()
				if f == FormatJSON {
					s = schemas.TenantJSON()
				}
				got, err = s.Decode(r.Value)
			default:
				t.Fatalf("record on unexpected topic %q", r.Topic)
			}
			if err != nil {
				t.Fatalf("%s record %d on %s: %v", f, r.Event.Seq, r.Topic, err)
			}
			if got != r.Event.Value || string(r.Key) != got.Key() || !r.Timestamp.Equal(got.Time()) {
				t.Fatalf("%s record %d: decoded %+v, generated %+v (key %q)", f, r.Event.Seq, got, r.Event.Value, r.Key)
			}
		}
	}
}

func decodeAs[T schemas.Event](s *schemas.Spec[T], f Format, b []byte) (schemas.Event, error) {
	if f == FormatJSON {
		return s.JSON().Decode(b)
	}
	return s.Avro().Decode(b)
}

func TestRegistrySerdesWriteTheWireFormat(t *testing.T) {
	ctx := context.Background()
	fake := schemastest.NewRegistry(t)
	reg := schemas.NewRegistry(fake.Client(t))
	topics := DefaultTopics.WithPrefix("r.")
	sd, err := RegistrySerdes(ctx, reg, topics)
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{"r.clicks-value", "r.carts-value", "r.inventory-value", "r.payments-value", "r.fulfillment-value"} {
		if len(fake.Subjects(subject)) != 1 {
			t.Fatalf("subject %s not registered", subject)
		}
	}
	g := mustNew(t, Config{Seed: 2, Topics: topics, Serdes: sd})
	payments, err := schemas.Payment.Registry(ctx, reg, "r.payments-value")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for found < 20 {
		r, err := g.NextRecord()
		if err != nil {
			t.Fatal(err)
		}
		if r.Topic != "r.payments" {
			continue
		}
		found++
		if r.Value[0] != 0 {
			t.Fatalf("payment record starts with %#x, want magic byte 0", r.Value[0])
		}
		got, err := payments.DecodeContext(ctx, r.Value)
		if err != nil || got != r.Event.Value {
			t.Fatalf("decode wire record: %+v, %v; want %+v", got, err, r.Event.Value)
		}
	}
	if _, err := New(Config{Serdes: &Serdes{Click: schemas.Click.Avro()}}); err == nil || !strings.Contains(err.Error(), "Serdes.[Cart Inventory Payment Fulfillment] is nil") {
		t.Fatalf("partial Serdes: %v, want an error naming the missing serdes", err)
	}
}

func TestSmallestConfigurationWorks(t *testing.T) {
	g := mustNew(t, Config{Tenants: 1, Users: 1, SKUsPerTenant: 1, MaxDisorder: NoDisorder})
	for _, ev := range g.Take(20000) {
		if err := ev.Value.Validate(); err != nil {
			t.Fatalf("event %d: %v", ev.Seq, err)
		}
		if c, ok := ev.Value.(schemas.ClickEvent); ok && c.UserID != "user-000001" {
			t.Fatalf("one user configured, click from %s", c.UserID)
		}
	}
	if g.Counts()[Payments] == 0 {
		t.Fatal("a single user with a single sku never checked out")
	}
}

func TestRecordsMatchesNextRecord(t *testing.T) {
	a, b := mustNew(t, Config{Seed: 8}), mustNew(t, Config{Seed: 8})
	n := 0
	for r, err := range a.Records() {
		if err != nil {
			t.Fatal(err)
		}
		want, _ := b.NextRecord()
		if r.Topic != want.Topic || !bytes.Equal(r.Key, want.Key) || !bytes.Equal(r.Value, want.Value) {
			t.Fatalf("record %d differs between Records and NextRecord", n)
		}
		if n++; n == 1000 {
			break
		}
	}
}
