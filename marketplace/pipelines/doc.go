// Package pipelines holds tidemark's reference marketplace pipelines as
// library code: AddTo adds the selected pipelines to a
// topology.Builder, with explicit operator names so that store, changelog
// and repartition topic names are stable across releases, and Build puts
// the selected ones into one topology.
//
// Inputs are the topics of package marketplace/gen (clicks are not used),
// Avro-encoded with the embedded schemas of package schemas and keyed as the
// generator keys them: inventory by sku, carts by cart id, payments and
// fulfillment by order id. Every input topic of the orders pipeline
// (carts, payments, fulfillment) must have the same partition count: the
// checkout join re-keys payments by cart id and joins them with carts, the
// late-fulfillment join pairs payments with fulfillment by order id.
//
// Payment events are deduplicated by event id first (store
// StorePaymentDedup, window Config.PaymentDedupWindow), so a redelivered
// payment event counts once in both pipelines that read payments. The
// generator never redelivers, so this changes none of the reference
// results.
//
// The three pipelines:
//
//   - Inventory: availability per sku as a table in the key-value store StoreAvailability, queryable over the App's HTTP API at
//     /stores/inventory-availability/keys/<sku>, and its changelog stream
//     on Outputs.Availability. See Availability for the exact definition.
//   - Fraud: payment attempts per user in hopping windows
//     (default 1 minute, advancing 10 s); a window whose final count reaches
//     Config.FraudThreshold produces one FraudAlert on Outputs.FraudAlerts,
//     emitted once, when the window closes (emit-final).
//   - Orders: order state from three joins, cart → payment →
//     fulfillment, in the table StoreOrderState and on Outputs.OrderState;
//     and late-fulfillment alerts on Outputs.LateAlerts for captured orders
//     not shipped within Config.ShipWithin of event time (a windowed left
//     join; orders.go explains why not a punctuator).
//
// Every result is a function of event time, not of processing order, as
// long as no input is later than Config.Grace behind its task's stream
// time. A task that reads several topics processes each fetch partition by
// partition, so skew between its topics counts against the grace too. The
// tests rely on that: they compute the expected outputs from the
// generator's events (same seed) and compare, in the broker-free driver and
// on a real broker.
//
// Undecodable input fails the task with an error naming the record, unless
// Config.SkipUndecodable drops and counts it or the App routes it to a
// dead-letter topic (processor.WithDeadLetterTopic). With plain Avro, a
// record of another event type on a topic shows only as malformed bytes;
// with registry serdes (Config.Serdes) its writer schema id identifies it
// (schemas.ErrWrongEventType), and an unknown id is
// schemas.ErrUnknownSchemaID.
package pipelines
