package schemas

// Hand-written Avro binary encoders for the embedded schemas. goavro's
// encoder goes through a map[string]any per record, which made encoding
// two thirds of the generator's cost; these append the same bytes directly
// (binary_test.go checks them byte for byte against goavro on every field
// and enum value). Decoding stays with goavro, which also serves writer
// schemas other than the embedded ones.

func appendLong(b []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63) // zigzag
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

func appendString(b []byte, s string) []byte {
	b = appendLong(b, int64(len(s)))
	return append(b, s...)
}

// appendOptString writes a ["null","string"] union: branch 0 for "", else
// branch 1 and the string.
func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, 0)
	}
	return appendString(append(b, 2), s)
}

// appendEnum writes the symbol's index; symbols lists them in schema order.
// Validate has already rejected unknown symbols; -1 here would encode a
// negative index that no reader accepts, so callers validate first.
func appendEnum[S ~string](b []byte, v S, symbols []S) []byte {
	for i, s := range symbols {
		if s == v {
			return appendLong(b, int64(i))
		}
	}
	return appendLong(b, -1)
}

func clickBinary(b []byte, e ClickEvent) []byte {
	b = appendString(b, e.EventID)
	b = appendString(b, e.Tenant)
	b = appendString(b, e.UserID)
	b = appendString(b, e.SessionID)
	b = appendOptString(b, e.SKU)
	b = appendEnum(b, e.Page, pageSymbols)
	b = appendLong(b, millis(e.EventTime))
	return appendString(b, e.Device)
}

func cartBinary(b []byte, e CartEvent) []byte {
	b = appendString(b, e.EventID)
	b = appendString(b, e.Tenant)
	b = appendString(b, e.CartID)
	b = appendString(b, e.UserID)
	b = appendString(b, e.SKU)
	b = appendEnum(b, e.Action, cartSymbols)
	b = appendLong(b, int64(e.Quantity))
	b = appendLong(b, e.UnitPriceCents)
	b = appendString(b, e.Currency)
	return appendLong(b, millis(e.EventTime))
}

func inventoryBinary(b []byte, e InventoryEvent) []byte {
	b = appendString(b, e.EventID)
	b = appendString(b, e.Tenant)
	b = appendString(b, e.SKU)
	b = appendString(b, e.WarehouseID)
	b = appendEnum(b, e.Kind, inventorySymbols)
	b = appendLong(b, int64(e.Delta))
	b = appendOptString(b, e.CartID)
	b = appendOptString(b, e.Reason)
	return appendLong(b, millis(e.EventTime))
}

func paymentBinary(b []byte, e PaymentEvent) []byte {
	b = appendString(b, e.EventID)
	b = appendString(b, e.Tenant)
	b = appendString(b, e.PaymentID)
	b = appendString(b, e.OrderID)
	b = appendString(b, e.CartID)
	b = appendString(b, e.UserID)
	b = appendEnum(b, e.Status, paymentSymbols)
	b = appendLong(b, e.AmountCents)
	b = appendString(b, e.Currency)
	b = appendString(b, e.Method)
	b = appendOptString(b, e.FailureReason)
	return appendLong(b, millis(e.EventTime))
}

func fulfillmentBinary(b []byte, e FulfillmentEvent) []byte {
	b = appendString(b, e.EventID)
	b = appendString(b, e.Tenant)
	b = appendString(b, e.ShipmentID)
	b = appendString(b, e.OrderID)
	b = appendString(b, e.UserID)
	b = appendString(b, e.WarehouseID)
	b = appendEnum(b, e.Status, fulfillmentSymbols)
	b = appendOptString(b, e.Carrier)
	return appendLong(b, millis(e.EventTime))
}
