// Package txn is tidemark's exactly-once commit path.
//
// One transactional session per process (EOS v2, KIP-447: one producer for
// all of the process's tasks, fenced by group generation) carries every
// task's sink records, changelog records and input offsets. A commit runs, in
// order:
//
//  1. flush every record produced in the transaction (sinks and changelogs);
//  2. add the consumed input offsets to the transaction (TxnOffsetCommit);
//  3. EndTxn(commit);
//  4. only after the commit succeeded: Apply each participant (a task's
//     state overlay) to local state together with the changelog offsets it
//     reflects;
//  5. acknowledge: report the commit's timings and outcome so the frontier
//     can advance and the controller can learn the commit latency.
//
// On abort (error, revoked partitions) every participant Discards its
// overlay and the consumer rewinds to the committed offsets. An End error
// can mean the commit happened or not; the outcome is resolved by reading the
// group's committed offsets with RequireStable and comparing them with the
// offsets the transaction carried, before anything is applied or discarded.
//
// Machine is the deterministic core (no clocks, no sockets): it takes the
// outcome of each step and says what to do next. Committer is the I/O edge
// that runs a Machine against a Session, the interface GroupTransactSession
// satisfies through NewKafkaSession.
package txn
