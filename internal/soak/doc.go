// Package soak is tidemark's fault campaign: it runs a user-written counting
// service (countsvc) as child processes against a real Kafka broker, hurts
// the service and the broker while input keeps flowing, and checks every
// committed output with a checker that shares no code with the service.
//
// The invariant under test is exactly-once: for every key, the committed
// output values in offset order are exactly 1, 2, 3, … (no decrease, no
// repeat, no gap) and the last one equals the number of valid input records
// of that key; every undecodable input (a poison pill) is in the dead-letter
// topic exactly once and counted nowhere.
//
// The service's interactive queries and frontier are held to the same
// input: every count a query answers must be the number of the key's valid
// input records below the position the answer names, and every output a
// frontier watermark covers must be committed below the offsets it names
// (querier.go).
//
// Ground truth comes from two independent places: the producer records what
// the broker acknowledged, and after producing stops the checker reads the
// input topic itself. The input log is what the service could see, so it is
// the expectation; a difference between the two is reported on its own line
// (it would be the producer's or the broker's fault, not the service's).
//
// Every scenario takes a seed that fixes its schedule (fault moments and
// kinds, keys, poison pills); timing on a shared machine is not replayable,
// the schedule is.
package soak
