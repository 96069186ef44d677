// Package testbroker runs a real single-node Apache Kafka broker (KRaft, broker and
// controller in one JVM) on 127.0.0.1 for tidemark's integration tests and
// benchmarks, without Docker.
//
// The broker's jars come from Maven Central: pom.xml beside this file names
// kafka_2.13 and a log4j2 backend, and Up copies them with Maven into a cache
// folder outside the work tree, so a fresh clone on the same machine starts
// without downloading again. Up formats a data directory, starts the JVM
// detached from the caller (it outlives `make kafka-up`), waits until a Kafka
// client round trip succeeds, and records the bootstrap address in
// <state dir>/bootstrap, which the kafkatest harness reads. A second Up reuses
// a broker that still answers.
//
// For fault injection the recorded broker can be hurt and brought back
// without losing its data or its address: Kill (SIGKILL, a crash), Stop (a
// graceful shutdown), Pause and Resume (SIGSTOP and SIGCONT, a hung broker),
// Start (the same server.properties, hence the same ports, on the same data,
// no format) and Restart. Down is different: it stops the broker and forgets
// it, so the next Up formats a fresh one and Start refuses.
package testbroker
