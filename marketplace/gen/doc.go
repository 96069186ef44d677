// Package gen generates realistic, deterministic marketplace traffic for
// tidemark's pipelines, tests and benchmarks: clicks, cart changes,
// inventory mutations, payments and fulfillment across tenants of different
// sizes.
//
// The stream is a discrete-event simulation of shopping sessions. Each
// emitted event has a logical offset on the rate profile's schedule (the
// moment Run sends it) and an event time a bounded amount earlier. The
// invariants tests can rely on:
//
//   - Determinism: the same Config (seed included) yields the same events and
//     byte-identical encodings. Nothing reads a clock or a global random
//     source; Run only paces the same stream against the wall clock.
//   - Causality, in emission order and in event time: a cart's add precedes
//     the inventory reserve for that line and the payment for its order; a
//     capture precedes fulfillment; delivery precedes a return and a return
//     precedes the refund.
//   - Bounded disorder: no event's time is more than Config.MaxDisorder
//     before the largest event time emitted ahead of it, so a pipeline with
//     that much grace never drops an event as late.
//   - Stock: a reserve is preceded by a restock when stock would not cover
//     it, except for a small oversell rate (OversellRate), so available
//     stock mostly stays non-negative.
//
// Time is compressed: a whole order lifecycle, checkout to delivery, takes
// minutes of event time, so short test runs exercise every stage.
//
// Tests compute reference results by generating the same stream in memory
// (New with the same Config, then Take or All) instead of reading it back
// from Kafka.
package gen
