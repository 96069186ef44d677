package schemas

import (
	"bytes"
	"math"
	"testing"
	"time"
)

func sameAsGoavro[T Event](t *testing.T, s *Spec[T], v T) {
	t.Helper()
	want, err := s.encodeGoavro(nil, v)
	if err != nil {
		t.Fatalf("goavro encode %+v: %v", v, err)
	}
	got, err := s.encode(nil, v)
	if err != nil {
		t.Fatalf("encode %+v: %v", v, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding of %+v\n got %x\nwant %x (goavro)", v, got, want)
	}
}

// TestBinaryEncodersMatchGoavro covers every enum symbol, both branches of
// every optional field, and integers across varint widths and signs.
func TestBinaryEncodersMatchGoavro(t *testing.T) {
	times := []time.Time{t0, time.UnixMilli(0).UTC(), time.UnixMilli(-1).UTC(), time.UnixMilli(1 << 42).UTC()}
	ints := []int64{1, 63, 64, 8191, 8192, math.MaxInt32, 1 << 40, math.MaxInt64}
	for i, p := range pageSymbols {
		c := sampleClick()
		c.Page, c.EventTime = p, times[i%len(times)]
		if p != PageProduct && i%2 == 0 {
			c.SKU = ""
		}
		c.Device = string(make([]byte, 200)) // a two-byte length
		sameAsGoavro(t, Click, c)
	}
	for i, a := range cartSymbols {
		for _, n := range ints {
			c := sampleCart()
			c.Action, c.Quantity, c.UnitPriceCents, c.EventTime = a, int32(min(n, math.MaxInt32)), n, times[i]
			sameAsGoavro(t, Cart, c)
		}
	}
	deltas := map[InventoryKind]int32{InventoryRestock: 500, InventoryAdjust: -70, InventoryReserve: -1, InventoryRelease: 65}
	for _, k := range inventorySymbols {
		e := sampleInventory()
		e.Kind, e.Delta = k, deltas[k]
		if k == InventoryRestock || k == InventoryAdjust {
			e.CartID, e.Reason = "", "shrinkage"
		}
		sameAsGoavro(t, Inventory, e)
	}
	for i, st := range paymentSymbols {
		p := samplePayment()
		p.Status, p.AmountCents = st, ints[i]
		if st != PaymentFailed {
			p.FailureReason = ""
		}
		sameAsGoavro(t, Payment, p)
	}
	for i, st := range fulfillmentSymbols {
		f := sampleFulfillment()
		f.Status = st
		if i%2 == 0 {
			f.Carrier = ""
		}
		sameAsGoavro(t, Fulfillment, f)
	}
}
