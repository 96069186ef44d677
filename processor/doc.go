// Package processor executes built topologies.
//
// The unit of execution is the Task: one sub-topology instance for one input
// partition. A task is a deterministic core in the etcd raft style: it never
// reads a clock, a socket or a goroutine it did not get. Its driver (the test
// driver in tidemarktest today, the consumer-group service later) feeds it
//
//   - input records, one at a time, with Process;
//   - wall-clock time, with Punctuate;
//
// and receives the output records it produces through a Collector. Stream
// time is the largest event time the task has processed; the watermark is
// the minimum over the task's inputs of (input stream time − allowed
// lateness). Stream-time punctuators fire after the record that advanced
// stream time past their due time, wall-clock punctuators in Punctuate.
//
// A task opens its stores through a store.Provider when it is created and
// lists them with Stores, so the runtime knows what to checkpoint, restore
// and close. Output records are handed to the Collector synchronously, in
// the order they were produced; the Collector must copy what it keeps.
package processor
