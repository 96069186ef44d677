package schemas

import (
	"errors"
	"fmt"
	"time"
)

// Hand-written Avro binary decoders for records written with the embedded
// schemas, the common case: goavro's decoder builds a map[string]any per
// record and cost ~20x the encoder. The readers mirror goavro's semantics
// exactly (same varint loops, same checks), and the fuzzers decode every
// input both ways and require the same result. Records from other writer
// schemas still go through goavro and resolution.

var errShort = errors.New("short buffer")

type binReader struct {
	b   []byte
	err error
}

func (r *binReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *binReader) long() int64 {
	if r.err != nil {
		return 0
	}
	var value uint64
	var shift uint
	for i, c := range r.b {
		value |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			r.b = r.b[i+1:]
			return int64(value>>1) ^ -int64(value&1)
		}
		shift += 7
	}
	r.fail(errShort)
	return 0
}

// int32 reads an Avro int the way goavro does: an unbounded varint
// truncated to 32 bits.
func (r *binReader) int32() int32 {
	if r.err != nil {
		return 0
	}
	var value int
	var shift uint
	for i, c := range r.b {
		value |= int(c&0x7f) << shift
		if c&0x80 == 0 {
			r.b = r.b[i+1:]
			return int32(value>>1) ^ -int32(value&1)
		}
		shift += 7
	}
	r.fail(errShort)
	return 0
}

func (r *binReader) str() string {
	if r.err != nil {
		return ""
	}
	if len(r.b) < 1 {
		r.fail(errShort)
		return ""
	}
	n := r.long()
	switch {
	case r.err != nil:
		return ""
	case n < 0:
		r.fail(fmt.Errorf("negative string length %d", n))
		return ""
	case n > int64(len(r.b)):
		r.fail(errShort)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// optStr reads a ["null","string"] union.
func (r *binReader) optStr() string {
	switch i := r.long(); {
	case r.err != nil:
		return ""
	case i == 0:
		return ""
	case i == 1:
		return r.str()
	default:
		r.fail(fmt.Errorf("union index %d, want 0 or 1", i))
		return ""
	}
}

func (r *binReader) time() time.Time {
	return time.UnixMilli(r.long()).UTC()
}

func readEnum[S ~string](r *binReader, symbols []S) S {
	i := r.long()
	if r.err != nil {
		return ""
	}
	if i < 0 || i >= int64(len(symbols)) {
		r.fail(fmt.Errorf("enum index %d out of range 0..%d", i, len(symbols)-1))
		return ""
	}
	return symbols[i]
}

// done returns the reader's error, or ErrMalformed detail for trailing bytes.
func (r *binReader) done() error {
	if r.err == nil && len(r.b) > 0 {
		return fmt.Errorf("%d trailing bytes after the record", len(r.b))
	}
	return r.err
}

func clickFromBinary(b []byte) (ClickEvent, error) {
	r := binReader{b: b}
	e := ClickEvent{
		EventID:   r.str(),
		Tenant:    r.str(),
		UserID:    r.str(),
		SessionID: r.str(),
		SKU:       r.optStr(),
		Page:      readEnum(&r, pageSymbols),
		EventTime: r.time(),
		Device:    r.str(),
	}
	return e, r.done()
}

func cartFromBinary(b []byte) (CartEvent, error) {
	r := binReader{b: b}
	e := CartEvent{
		EventID:        r.str(),
		Tenant:         r.str(),
		CartID:         r.str(),
		UserID:         r.str(),
		SKU:            r.str(),
		Action:         readEnum(&r, cartSymbols),
		Quantity:       r.int32(),
		UnitPriceCents: r.long(),
		Currency:       r.str(),
		EventTime:      r.time(),
	}
	return e, r.done()
}

func inventoryFromBinary(b []byte) (InventoryEvent, error) {
	r := binReader{b: b}
	e := InventoryEvent{
		EventID:     r.str(),
		Tenant:      r.str(),
		SKU:         r.str(),
		WarehouseID: r.str(),
		Kind:        readEnum(&r, inventorySymbols),
		Delta:       r.int32(),
		CartID:      r.optStr(),
		Reason:      r.optStr(),
		EventTime:   r.time(),
	}
	return e, r.done()
}

func paymentFromBinary(b []byte) (PaymentEvent, error) {
	r := binReader{b: b}
	e := PaymentEvent{
		EventID:       r.str(),
		Tenant:        r.str(),
		PaymentID:     r.str(),
		OrderID:       r.str(),
		CartID:        r.str(),
		UserID:        r.str(),
		Status:        readEnum(&r, paymentSymbols),
		AmountCents:   r.long(),
		Currency:      r.str(),
		Method:        r.str(),
		FailureReason: r.optStr(),
		EventTime:     r.time(),
	}
	return e, r.done()
}

func fulfillmentFromBinary(b []byte) (FulfillmentEvent, error) {
	r := binReader{b: b}
	e := FulfillmentEvent{
		EventID:     r.str(),
		Tenant:      r.str(),
		ShipmentID:  r.str(),
		OrderID:     r.str(),
		UserID:      r.str(),
		WarehouseID: r.str(),
		Status:      readEnum(&r, fulfillmentSymbols),
		Carrier:     r.optStr(),
		EventTime:   r.time(),
	}
	return e, r.done()
}
