package schemas

import (
	"fmt"
	"math"
	"time"

	"github.com/linkedin/goavro/v2"
)

// This file converts between the typed structs and goavro's native form
// (map[string]any). The readers are lenient about numeric types on purpose:
// after schema resolution a value may come from a writer's int where the
// reader has a long (Avro promotion), or from a JSON default (float64).

// nativeReader reads fields of one decoded record and keeps the first error.
type nativeReader struct {
	m   map[string]any
	err error
}

func (r *nativeReader) fail(field string, v any, want string) {
	if r.err == nil {
		r.err = fmt.Errorf("field %s: got %T, want %s", field, v, want)
	}
}

func (r *nativeReader) get(field string) (any, bool) {
	v, ok := r.m[field]
	if !ok && r.err == nil {
		r.err = fmt.Errorf("field %s: missing", field)
	}
	return v, ok
}

func (r *nativeReader) str(field string) string {
	v, ok := r.get(field)
	if !ok {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		r.fail(field, v, "string")
	}
	return s
}

// optStr reads a ["null","string"] union: goavro gives nil or
// map[string]any{"string": s}; a plain string is accepted for a writer that
// declared the field as non-optional.
func (r *nativeReader) optStr(field string) string {
	v, ok := r.get(field)
	if !ok || v == nil {
		return ""
	}
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		if s, ok := v["string"].(string); ok && len(v) == 1 {
			return s
		}
	}
	r.fail(field, v, "null or string")
	return ""
}

func (r *nativeReader) i64(field string) int64 {
	v, ok := r.get(field)
	if !ok {
		return 0
	}
	switch v := v.(type) {
	case int32:
		return int64(v)
	case int64:
		return v
	case int:
		return int64(v)
	case float64: // JSON default
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v)
		}
	}
	r.fail(field, v, "integer")
	return 0
}

func (r *nativeReader) i32(field string) int32 {
	n := r.i64(field)
	if n < math.MinInt32 || n > math.MaxInt32 {
		if r.err == nil {
			r.err = fmt.Errorf("field %s: %d overflows int", field, n)
		}
		return 0
	}
	return int32(n)
}

func (r *nativeReader) time(field string) time.Time {
	v, ok := r.m[field]
	if ok {
		if t, isTime := v.(time.Time); isTime {
			return t.UTC()
		}
	}
	return time.UnixMilli(r.i64(field)).UTC()
}

func optUnion(s string) any {
	if s == "" {
		return nil
	}
	return goavro.Union("string", s)
}

// millis is what every encoder writes for event_time. Avro stores
// milliseconds, so sub-millisecond precision is dropped.
func millis(t time.Time) int64 { return t.UnixMilli() }

func clickToNative(e ClickEvent) map[string]any {
	return map[string]any{
		"event_id":   e.EventID,
		"tenant":     e.Tenant,
		"user_id":    e.UserID,
		"session_id": e.SessionID,
		"sku":        optUnion(e.SKU),
		"page":       string(e.Page),
		"event_time": millis(e.EventTime),
		"device":     e.Device,
	}
}

func clickFromNative(m map[string]any) (ClickEvent, error) {
	r := nativeReader{m: m}
	e := ClickEvent{
		EventID:   r.str("event_id"),
		Tenant:    r.str("tenant"),
		UserID:    r.str("user_id"),
		SessionID: r.str("session_id"),
		SKU:       r.optStr("sku"),
		Page:      PageType(r.str("page")),
		EventTime: r.time("event_time"),
		Device:    r.str("device"),
	}
	return e, r.err
}

func cartToNative(e CartEvent) map[string]any {
	return map[string]any{
		"event_id":         e.EventID,
		"tenant":           e.Tenant,
		"cart_id":          e.CartID,
		"user_id":          e.UserID,
		"sku":              e.SKU,
		"action":           string(e.Action),
		"quantity":         e.Quantity,
		"unit_price_cents": e.UnitPriceCents,
		"currency":         e.Currency,
		"event_time":       millis(e.EventTime),
	}
}

func cartFromNative(m map[string]any) (CartEvent, error) {
	r := nativeReader{m: m}
	e := CartEvent{
		EventID:        r.str("event_id"),
		Tenant:         r.str("tenant"),
		CartID:         r.str("cart_id"),
		UserID:         r.str("user_id"),
		SKU:            r.str("sku"),
		Action:         CartAction(r.str("action")),
		Quantity:       r.i32("quantity"),
		UnitPriceCents: r.i64("unit_price_cents"),
		Currency:       r.str("currency"),
		EventTime:      r.time("event_time"),
	}
	return e, r.err
}

func inventoryToNative(e InventoryEvent) map[string]any {
	return map[string]any{
		"event_id":     e.EventID,
		"tenant":       e.Tenant,
		"sku":          e.SKU,
		"warehouse_id": e.WarehouseID,
		"kind":         string(e.Kind),
		"delta":        e.Delta,
		"cart_id":      optUnion(e.CartID),
		"reason":       optUnion(e.Reason),
		"event_time":   millis(e.EventTime),
	}
}

func inventoryFromNative(m map[string]any) (InventoryEvent, error) {
	r := nativeReader{m: m}
	e := InventoryEvent{
		EventID:     r.str("event_id"),
		Tenant:      r.str("tenant"),
		SKU:         r.str("sku"),
		WarehouseID: r.str("warehouse_id"),
		Kind:        InventoryKind(r.str("kind")),
		Delta:       r.i32("delta"),
		CartID:      r.optStr("cart_id"),
		Reason:      r.optStr("reason"),
		EventTime:   r.time("event_time"),
	}
	return e, r.err
}

func paymentToNative(e PaymentEvent) map[string]any {
	return map[string]any{
		"event_id":       e.EventID,
		"tenant":         e.Tenant,
		"payment_id":     e.PaymentID,
		"order_id":       e.OrderID,
		"cart_id":        e.CartID,
		"user_id":        e.UserID,
		"status":         string(e.Status),
		"amount_cents":   e.AmountCents,
		"currency":       e.Currency,
		"method":         e.Method,
		"failure_reason": optUnion(e.FailureReason),
		"event_time":     millis(e.EventTime),
	}
}

func paymentFromNative(m map[string]any) (PaymentEvent, error) {
	r := nativeReader{m: m}
	e := PaymentEvent{
		EventID:       r.str("event_id"),
		Tenant:        r.str("tenant"),
		PaymentID:     r.str("payment_id"),
		OrderID:       r.str("order_id"),
		CartID:        r.str("cart_id"),
		UserID:        r.str("user_id"),
		Status:        PaymentStatus(r.str("status")),
		AmountCents:   r.i64("amount_cents"),
		Currency:      r.str("currency"),
		Method:        r.str("method"),
		FailureReason: r.optStr("failure_reason"),
		EventTime:     r.time("event_time"),
	}
	return e, r.err
}

func fulfillmentToNative(e FulfillmentEvent) map[string]any {
	return map[string]any{
		"event_id":     e.EventID,
		"tenant":       e.Tenant,
		"shipment_id":  e.ShipmentID,
		"order_id":     e.OrderID,
		"user_id":      e.UserID,
		"warehouse_id": e.WarehouseID,
		"status":       string(e.Status),
		"carrier":      optUnion(e.Carrier),
		"event_time":   millis(e.EventTime),
	}
}

func fulfillmentFromNative(m map[string]any) (FulfillmentEvent, error) {
	r := nativeReader{m: m}
	e := FulfillmentEvent{
		EventID:     r.str("event_id"),
		Tenant:      r.str("tenant"),
		ShipmentID:  r.str("shipment_id"),
		OrderID:     r.str("order_id"),
		UserID:      r.str("user_id"),
		WarehouseID: r.str("warehouse_id"),
		Status:      FulfillmentStatus(r.str("status")),
		Carrier:     r.optStr("carrier"),
		EventTime:   r.time("event_time"),
	}
	return e, r.err
}
