// Package processor executes built topologies.
//
// The unit of execution is the Task: one sub-topology instance for one input
// partition. A task is a deterministic core in the etcd raft style: it never
// reads a clock, a socket or a goroutine it did not get. Its driver (the test
// driver in tidemarktest today, the consumer-group service later) feeds it
// input records with Process and wall-clock time with Punctuate, and
// receives the records it produces through a Collector, synchronously and in
// production order; the Collector must copy what it keeps.
//
// Stream time is the largest event time the task has processed; the
// watermark is the minimum over the task's inputs of (input stream time −
// allowed lateness). Stream-time punctuators fire after the record that
// advanced stream time past their due time, wall-clock punctuators in
// Punctuate.
//
// # Driving tasks (the seam the live runtime uses)
//
//	topo, _ := builder.Build()
//	// Subscribe to topo.SourceTopics(); create topo.RepartitionTopics() and
//	// topo.ChangelogTopics(); then, with the cluster's partition counts:
//	ids, err := processor.TaskIDs(topo, counts) // checks topo.CopartitionGroups() too
//	// For each task id assigned to this member:
//	task, err := processor.NewTask(processor.TaskConfig{
//		Topology: topo, SubTopology: id.SubTopology, Partition: id.Partition,
//		Stores:         provider,  // store.Provider: Badger + changelogs in the service
//		Output:         collector, // buffers records for the transaction
//		PartitionCount: countOf,   // for user partitioners
//		WallClock:      nowMs,
//	})
//	// task.Stores() lists the opened stores with their store.Spec; the
//	// changelog of each is topo.Store(name).Changelog, to restore first.
//	// For each fetched record of task.Topics(), partition id.Partition:
//	err = task.Process(&rec)
//	// On each tick: err = task.Punctuate(nowMs)
//	// Each collected OutputRecord carries InputTimestamp (the Kafka
//	// timestamp of the record that triggered it, -1 from punctuators) and
//	// StreamTime (the largest event time it can depend on).
//	// At commit: everything Collected so far derives from inputs up to
//	// task.StreamTime(); task.Watermark() bounds what can still arrive.
//	// On revocation or shutdown: task.Close()
//
// A Process or Punctuate error means the task's outputs since the last
// commit are suspect: the runtime aborts the transaction and rewinds.
package processor
