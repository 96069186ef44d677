package serde_test

import (
	"fmt"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
)

// A user type bound to its Avro schema by struct tags: an optional field is
// a pointer, an enum a string type, a timestamp-millis a time.Time.
func ExampleAvro() {
	type Payment struct {
		ID       string    `avro:"id"`
		Cents    int64     `avro:"cents"`
		Method   string    `avro:"method"`
		Coupon   *string   `avro:"coupon"`
		PaidAt   time.Time `avro:"paid_at"`
		Internal string    `avro:"-"`
	}
	const schema = `{"type":"record","name":"Payment","namespace":"shop","fields":[
		{"name":"id","type":"string"},
		{"name":"cents","type":"long"},
		{"name":"method","type":{"type":"enum","name":"Method","symbols":["CARD","IBAN"]}},
		{"name":"coupon","type":["null","string"],"default":null},
		{"name":"paid_at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`

	// With serde.WithRegistry(client, "payments-value") the same serde
	// writes the Confluent wire format and resolves older writers.
	payments, err := serde.Avro[Payment](schema)
	if err != nil {
		panic(err)
	}
	b, _ := payments.Encode(nil, Payment{ID: "p-1", Cents: 1250, Method: "CARD", PaidAt: time.UnixMilli(1_700_000_000_000)})
	p, _ := payments.Decode(b)
	fmt.Printf("%d bytes: %s %d %s coupon=%v %s\n", len(b), p.ID, p.Cents, p.Method, p.Coupon, p.PaidAt.Format(time.RFC3339))

	_, err = payments.Encode(nil, Payment{ID: "p-2", Method: "CASH"})
	fmt.Println(err)
	// Output:
	// 14 bytes: p-1 1250 CARD coupon=<nil> 2023-11-14T22:13:20Z
	// serde: encode: avro serde_test.Payment: Payment.method: "CASH" is not a symbol of enum shop.Method [CARD IBAN]
}
