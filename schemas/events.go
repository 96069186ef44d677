package schemas

import (
	"fmt"
	"time"
)

// Event is what every marketplace event has. Key is the record key the event
// is produced with (the id its topic is partitioned by); Time is its event
// time.
type Event interface {
	Type() EventType
	Key() string
	Time() time.Time
	Validate() error
}

// EventType names an event type; its value is the Avro record's short name.
type EventType string

const (
	TypeClick       EventType = "ClickEvent"
	TypeCart        EventType = "CartEvent"
	TypeInventory   EventType = "InventoryEvent"
	TypePayment     EventType = "PaymentEvent"
	TypeFulfillment EventType = "FulfillmentEvent"
)

// PageType is the kind of page a click landed on.
type PageType string

const (
	PageHome     PageType = "home"
	PageSearch   PageType = "search"
	PageCategory PageType = "category"
	PageProduct  PageType = "product"
	PageCart     PageType = "cart"
	PageCheckout PageType = "checkout"
)

// CartAction says whether a cart line was added or removed.
type CartAction string

const (
	CartAdd    CartAction = "add"
	CartRemove CartAction = "remove"
)

// InventoryKind is the cause of a stock change.
type InventoryKind string

const (
	InventoryRestock InventoryKind = "restock"
	InventoryAdjust  InventoryKind = "adjust"
	InventoryReserve InventoryKind = "reserve"
	InventoryRelease InventoryKind = "release"
)

// PaymentStatus is a step of a payment.
type PaymentStatus string

const (
	PaymentAuthorized PaymentStatus = "authorized"
	PaymentCaptured   PaymentStatus = "captured"
	PaymentFailed     PaymentStatus = "failed"
	PaymentRefunded   PaymentStatus = "refunded"
)

// FulfillmentStatus is a step of a shipment.
type FulfillmentStatus string

const (
	FulfillmentPicked    FulfillmentStatus = "picked"
	FulfillmentShipped   FulfillmentStatus = "shipped"
	FulfillmentDelivered FulfillmentStatus = "delivered"
	FulfillmentReturned  FulfillmentStatus = "returned"
)

// ClickEvent is a page view. Key: UserID.
type ClickEvent struct {
	EventID   string    `json:"event_id"`
	Tenant    string    `json:"tenant"`
	UserID    string    `json:"user_id"`
	SessionID string    `json:"session_id"`
	SKU       string    `json:"sku,omitempty"` // "" on pages without a product
	Page      PageType  `json:"page"`
	EventTime time.Time `json:"event_time"`
	Device    string    `json:"device"` // v2 field; "unknown" when read from v1
}

// CartEvent adds Quantity units of SKU to a cart, or removes them. Key: CartID.
type CartEvent struct {
	EventID        string     `json:"event_id"`
	Tenant         string     `json:"tenant"`
	CartID         string     `json:"cart_id"`
	UserID         string     `json:"user_id"`
	SKU            string     `json:"sku"`
	Action         CartAction `json:"action"`
	Quantity       int32      `json:"quantity"`
	UnitPriceCents int64      `json:"unit_price_cents"`
	Currency       string     `json:"currency"`
	EventTime      time.Time  `json:"event_time"`
}

// InventoryEvent changes the available stock of SKU by Delta. Key: SKU.
// Summing Delta per SKU gives its available stock.
type InventoryEvent struct {
	EventID     string        `json:"event_id"`
	Tenant      string        `json:"tenant"`
	SKU         string        `json:"sku"`
	WarehouseID string        `json:"warehouse_id"`
	Kind        InventoryKind `json:"kind"`
	Delta       int32         `json:"delta"`
	CartID      string        `json:"cart_id,omitempty"` // set for reserve and release
	Reason      string        `json:"reason,omitempty"`
	EventTime   time.Time     `json:"event_time"`
}

// PaymentEvent is a step of an order's payment. Key: OrderID.
type PaymentEvent struct {
	EventID       string        `json:"event_id"`
	Tenant        string        `json:"tenant"`
	PaymentID     string        `json:"payment_id"`
	OrderID       string        `json:"order_id"`
	CartID        string        `json:"cart_id"`
	UserID        string        `json:"user_id"`
	Status        PaymentStatus `json:"status"`
	AmountCents   int64         `json:"amount_cents"`
	Currency      string        `json:"currency"`
	Method        string        `json:"method"`
	FailureReason string        `json:"failure_reason,omitempty"`
	EventTime     time.Time     `json:"event_time"`
}

// FulfillmentEvent is a step of an order's shipment. Key: OrderID.
type FulfillmentEvent struct {
	EventID     string            `json:"event_id"`
	Tenant      string            `json:"tenant"`
	ShipmentID  string            `json:"shipment_id"`
	OrderID     string            `json:"order_id"`
	UserID      string            `json:"user_id"`
	WarehouseID string            `json:"warehouse_id"`
	Status      FulfillmentStatus `json:"status"`
	Carrier     string            `json:"carrier,omitempty"`
	EventTime   time.Time         `json:"event_time"`
}

func (ClickEvent) Type() EventType       { return TypeClick }
func (CartEvent) Type() EventType        { return TypeCart }
func (InventoryEvent) Type() EventType   { return TypeInventory }
func (PaymentEvent) Type() EventType     { return TypePayment }
func (FulfillmentEvent) Type() EventType { return TypeFulfillment }

func (e ClickEvent) Key() string       { return e.UserID }
func (e CartEvent) Key() string        { return e.CartID }
func (e InventoryEvent) Key() string   { return e.SKU }
func (e PaymentEvent) Key() string     { return e.OrderID }
func (e FulfillmentEvent) Key() string { return e.OrderID }

func (e ClickEvent) Time() time.Time       { return e.EventTime }
func (e CartEvent) Time() time.Time        { return e.EventTime }
func (e InventoryEvent) Time() time.Time   { return e.EventTime }
func (e PaymentEvent) Time() time.Time     { return e.EventTime }
func (e FulfillmentEvent) Time() time.Time { return e.EventTime }

// The symbols of each enum, in the order of the .avsc files: Validate
// accepts exactly these, and the binary codec writes and reads a symbol as
// its index here.
var (
	pageSymbols        = []PageType{PageHome, PageSearch, PageCategory, PageProduct, PageCart, PageCheckout}
	cartSymbols        = []CartAction{CartAdd, CartRemove}
	inventorySymbols   = []InventoryKind{InventoryRestock, InventoryAdjust, InventoryReserve, InventoryRelease}
	paymentSymbols     = []PaymentStatus{PaymentAuthorized, PaymentCaptured, PaymentFailed, PaymentRefunded}
	fulfillmentSymbols = []FulfillmentStatus{FulfillmentPicked, FulfillmentShipped, FulfillmentDelivered, FulfillmentReturned}
)

// validator collects the first broken invariant of an event.
type validator struct {
	typ EventType
	err error
}

func (v *validator) required(field, val string) {
	if v.err == nil && val == "" {
		v.err = fmt.Errorf("%w: %s.%s is empty", ErrInvalidEvent, v.typ, field)
	}
}

func (v *validator) check(ok bool, field, format string, args ...any) {
	if v.err == nil && !ok {
		v.err = fmt.Errorf("%w: %s.%s %s", ErrInvalidEvent, v.typ, field, fmt.Sprintf(format, args...))
	}
}

func (v *validator) time(t time.Time) {
	v.check(!t.IsZero(), "event_time", "is zero")
}

func oneOf[S ~string](v S, allowed ...S) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

func (e ClickEvent) Validate() error {
	v := validator{typ: TypeClick}
	v.required("event_id", e.EventID)
	v.required("tenant", e.Tenant)
	v.required("user_id", e.UserID)
	v.required("session_id", e.SessionID)
	v.check(oneOf(e.Page, pageSymbols...), "page", "is %q, not a PageType", e.Page)
	v.check(e.Page != PageProduct || e.SKU != "", "sku", "is empty on a product page")
	v.time(e.EventTime)
	return v.err
}

func (e CartEvent) Validate() error {
	v := validator{typ: TypeCart}
	v.required("event_id", e.EventID)
	v.required("tenant", e.Tenant)
	v.required("cart_id", e.CartID)
	v.required("user_id", e.UserID)
	v.required("sku", e.SKU)
	v.check(oneOf(e.Action, cartSymbols...), "action", "is %q, not a CartAction", e.Action)
	v.check(e.Quantity > 0, "quantity", "is %d, must be positive", e.Quantity)
	v.check(e.UnitPriceCents >= 0, "unit_price_cents", "is %d, must not be negative", e.UnitPriceCents)
	v.required("currency", e.Currency)
	v.time(e.EventTime)
	return v.err
}

func (e InventoryEvent) Validate() error {
	v := validator{typ: TypeInventory}
	v.required("event_id", e.EventID)
	v.required("tenant", e.Tenant)
	v.required("sku", e.SKU)
	v.required("warehouse_id", e.WarehouseID)
	v.check(oneOf(e.Kind, inventorySymbols...), "kind", "is %q, not an InventoryKind", e.Kind)
	switch e.Kind {
	case InventoryRestock, InventoryRelease:
		v.check(e.Delta > 0, "delta", "is %d, must be positive for %s", e.Delta, e.Kind)
	case InventoryReserve:
		v.check(e.Delta < 0, "delta", "is %d, must be negative for %s", e.Delta, e.Kind)
	}
	if e.Kind == InventoryReserve || e.Kind == InventoryRelease {
		v.required("cart_id", e.CartID)
	}
	v.time(e.EventTime)
	return v.err
}

func (e PaymentEvent) Validate() error {
	v := validator{typ: TypePayment}
	v.required("event_id", e.EventID)
	v.required("tenant", e.Tenant)
	v.required("payment_id", e.PaymentID)
	v.required("order_id", e.OrderID)
	v.required("cart_id", e.CartID)
	v.required("user_id", e.UserID)
	v.check(oneOf(e.Status, paymentSymbols...), "status", "is %q, not a PaymentStatus", e.Status)
	v.check(e.AmountCents >= 0, "amount_cents", "is %d, must not be negative", e.AmountCents)
	v.required("currency", e.Currency)
	v.required("method", e.Method)
	v.time(e.EventTime)
	return v.err
}

func (e FulfillmentEvent) Validate() error {
	v := validator{typ: TypeFulfillment}
	v.required("event_id", e.EventID)
	v.required("tenant", e.Tenant)
	v.required("shipment_id", e.ShipmentID)
	v.required("order_id", e.OrderID)
	v.required("user_id", e.UserID)
	v.required("warehouse_id", e.WarehouseID)
	v.check(oneOf(e.Status, fulfillmentSymbols...), "status", "is %q, not a FulfillmentStatus", e.Status)
	v.time(e.EventTime)
	return v.err
}
