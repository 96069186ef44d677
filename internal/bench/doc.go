// Package bench measures tidemark side by side with Kafka Streams and with
// the raw limit (franz-go consume→produce without state), on the same real
// broker and the same input, in one run.
//
// Every system runs as its own process, so CPU seconds and peak RSS are its
// own: Kafka Streams as the Java application in internal/bench/streams, the raw and
// tidemark systems as the current executable re-run in worker mode
// (MaybeRunWorker). For each workload and system the harness measures:
//
//   - throughput: input records per second from the first committed progress
//     of the system's consumer group until its committed offsets reach the
//     end of the pre-produced input;
//   - end-to-end staleness at a fixed input rate: receive time at an external
//     read_committed consumer minus the output record's timestamp, which every
//     system sets to the (max) timestamp of the input that produced it;
//   - CPU seconds and peak RSS of the system's process, from /proc.
//
// RunFailover (bench --failover, failover.go) measures instead how fast a
// second instance takes over the partitions of a SIGKILLed one. RunSweep
// (bench sweep, sweep.go) runs every commit policy and Kafka Streams
// through 10→50→90→50→10% of the calibrated capacity with a SIGKILL in
// the middle and checks issue #12's freshness targets per phase.
package bench
