// Package processor runs a built topology as a Kafka consumer-group
// service: the App. Start as many instances with the same application id as
// you like; the group spreads the input partitions over them.
//
//	app, err := processor.NewApp(topo,
//		processor.WithBrokers("127.0.0.1:9092"),
//		processor.WithStateDir("/var/lib/tidemark/marketplace"),
//	)
//	err = app.Run(ctx) // until ctx is done: commits, closes its tasks, leaves the group
//
// The App is the I/O around the deterministic task core (package task),
// which the broker-free test driver (processor/tidemarktest) runs the same
// way. An instance
//
//   - joins the group with a cooperative, sticky balancer that keeps
//     partition p of co-partitioned topics on one member, and turns its
//     assigned partitions into tasks (task.IDs);
//   - opens each task's stores on the process's Badger DB and restores them
//     from their changelog topics (package changelog) before the task's
//     processors' Init, so Init reads restored state;
//   - feeds the tasks the fetched records in timestamp order, and wall-clock
//     time for punctuators, from one goroutine (Run's) that owns every task,
//     the transactional session and the frontier controller;
//   - commits their outputs, changelog records and input offsets in one
//     Kafka transaction (package txn) when the frontier controller (package
//     frontier) says so, and only then applies each task's overlay to
//     Badger, with the changelog offsets it reflects;
//   - publishes the output frontier (each sink's committed offsets and the
//     watermark its committed outputs cover) with every commit;
//   - serves /metrics, /healthz, /readyz, /frontier and interactive queries
//     of committed state over HTTP.
//
// Invariants: Badger holds a committed prefix of each task's state and the
// changelog offsets it reflects, never more; an abort (an error, a
// revocation, fencing) drops the overlays, recreates the task cores from the
// clocks the last commit stored and rewinds the inputs to the committed
// offsets; an EndTxn of unknown outcome is resolved from the group's stable
// committed offsets before anything is applied.
package processor
