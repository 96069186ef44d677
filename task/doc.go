// Package task is tidemark's deterministic task core: one sub-topology
// instance for one input partition, run the same way by the consumer-group
// service (package processor) and by the broker-free test driver
// (processor/tidemarktest).
//
// A Task is a core in the etcd raft style: it never reads a clock, a socket
// or a goroutine it did not get. Its driver feeds it input records with
// Process and wall-clock time with Punctuate, and receives the records it
// produces through a Collector, synchronously and in production order; the
// Collector must copy what it keeps. Everything I/O-bound (consuming,
// producing, transactions, Badger, changelogs) stays with the driver, which
// hands the task a store.Provider and a Collector; this package imports
// topology and store only.
//
// Stream time is the largest event time the task has processed; the
// watermark is the minimum over the task's inputs of (input stream time −
// allowed lateness). Stream-time punctuators fire after the record that
// advanced stream time past their due time, wall-clock punctuators in
// Punctuate. A task's clocks (Clocks) outlive it: the service stores them
// with each commit and hands them to the task's next incarnation
// (Params.Resume), so a record late before a restart is late after it too.
//
// # Driving tasks
//
//	topo, _ := builder.Build()
//	// Subscribe to topo.SourceTopics(); create topo.RepartitionTopics() and
//	// topo.ChangelogTopics(); then, with the cluster's partition counts:
//	ids, err := task.IDs(topo, counts) // checks topo.CopartitionGroups() too
//	// For each task id assigned to this member:
//	t, err := task.New(task.Params{
//		Topology: topo, SubTopology: id.SubTopology, Partition: id.Partition,
//		Stores:         provider,  // store.Provider: Badger + changelogs in the service
//		Output:         collector, // buffers records for the transaction
//		PartitionCount: countOf,   // for user partitioners
//		WallClock:      nowMs,
//		Restore:        restore,   // brings the opened stores up to date before Init
//	})
//	// t.Stores() lists the opened stores with their store.Spec; the
//	// changelog of each is topo.Store(name).Changelog.
//	// For each fetched record of t.Topics(), partition id.Partition:
//	err = t.Process(&rec)
//	// On each tick: err = t.Punctuate(nowMs)
//	// Each collected OutputRecord carries InputTimestamp (the Kafka
//	// timestamp of the record that triggered it, -1 from punctuators) and
//	// StreamTime (the largest event time it can depend on).
//	// At commit: everything Collected so far derives from inputs up to
//	// t.StreamTime(); t.Watermark() bounds what can still arrive, and
//	// t.OutputWatermarks what each sink can still receive; t.Clocks() is
//	// what the next incarnation resumes from.
//	// On revocation or shutdown: t.Close()
//
// A Process or Punctuate error means the task's outputs since the last
// commit are suspect: the runtime aborts the transaction and rewinds.
//
// The instantiated sub-topology calls back into the task through
// topology.TaskEnv (stores, punctuator schedules, stream time, output,
// dropped-record counts, operator clocks). An unexported view of the Task
// implements it, so those callbacks are not part of the Task's API.
package task
