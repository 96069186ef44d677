// Package schemas defines the marketplace events that tidemark's reference
// pipelines consume — clicks, cart changes, inventory mutations, payments and
// fulfillment — as Avro schemas embedded from the .avsc files beside this
// file, typed Go structs, and serdes between them.
//
// Every event carries a tenant (the seller or marketplace that owns it), an
// event time with millisecond precision (Avro timestamp-millis) and the ids a
// pipeline joins on. Each type has a Spec (Click, Cart, Inventory, Payment,
// Fulfillment) that builds its serdes:
//
//   - Spec.Avro: plain Avro binary, written and read with the embedded schema;
//   - Spec.AvroFrom: reads bytes written with another (older or newer) schema
//     and resolves them to the embedded one, filling new fields from defaults;
//   - Spec.JSON: encoding/json with the struct tags, plus validation;
//   - Spec.Registry: the Confluent wire format (magic byte 0, 4-byte schema
//     id, Avro payload), resolving each record from its writer's schema as
//     fetched from a Schema Registry.
//
// Every decoding failure wraps serde.ErrDecode, so a pipeline can route the
// record to a dead-letter topic; the sentinels in errors.go say why. A
// registry that cannot be reached is not a decoding failure and does not wrap
// serde.ErrDecode: the record is fine, and the caller should retry.
//
// Optional Avro strings (unions with null) map to Go strings, with "" as null,
// so the structs stay comparable and cheap to copy.
package schemas
