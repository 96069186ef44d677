// Package sim is a discrete-event simulator that compares commit policies
// of package frontier over a load profile.
//
// The simulated system is one commit group: Poisson arrivals at a rate the
// profile sets, a single record loop with a fixed per-record cost, and
// commits whose latency is drawn from a CommitModel and which block the
// loop for a fraction of that latency (the whole of it by default, as Kafka
// Streams' stream thread does). Each record produces one output whose
// staleness is the time from the input's arrival to the ack of the commit
// that made it visible; tumbling event-time windows close as processing
// passes their end and add one final result each (the watermark-aligned
// barrier the adaptive policy commits early for).
//
// Time advances in fixed steps (1ms by default) and records move in
// cohorts (all arrivals of one step), so an hour of load costs a few
// million cheap steps, not one event per record. The controller is ticked
// at its Decision.Wake, after every commit ack and watermark close, and at
// least every TickPeriod, as the runtime would. Everything is driven by
// one seed: the same profile gives the same report, and every policy in a
// run sees the same arrivals and the same sequence of commit latencies.
package sim
