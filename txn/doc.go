// Package txn is tidemark's exactly-once commit path.
//
// One transactional session per process (EOS v2, KIP-447: one producer for
// all of the process's tasks, fenced by group generation) carries every
// task's sink records, changelog records and input offsets. The Committer
// owns the whole commit; what it commits comes from Participants (in the
// service: every task, and the outputs), and it runs, in order:
//
//  1. Prepare every participant side by side: each makes its records of
//     the transaction acknowledged (a task its changelog records, the
//     outputs their sink records and then the frontier records that name
//     their offsets) and returns the offset Metadata it wants committed
//     (a task's clocks and changelog positions);
//  2. add the consumed input offsets to the transaction, each with its
//     participant's metadata, passed to Transactor.End (TxnOffsetCommit);
//     a transaction that consumed nothing re-commits one committed offset
//     where it stands (recommit.go: franz-go would otherwise hold the
//     session for 500 ms after it);
//  3. EndTxn(commit);
//  4. only after the commit succeeded: Apply each participant in order (a
//     task's state overlay goes to local state with the changelog offsets
//     it reflects; then the outputs publish the frontier);
//  5. report the commit's timings and outcome (Stats) so the controller
//     can learn the commit latency.
//
// A Prepare that fails aborts the transaction (*PrepareError). On abort
// (error, revoked partitions) every participant Discards and the consumer
// rewinds to the committed offsets. An End error can mean the commit
// happened or not; the outcome is resolved by reading the group's committed
// offsets of the transaction's partitions with RequireStable and comparing
// them with the offsets the transaction carried, before anything is applied
// or discarded.
//
// Machine is the deterministic core (no clocks, no sockets): it takes the
// outcome of each step and says what to do next. Committer is the I/O edge
// that runs a Machine against a Transactor, the interface GroupTransactSession
// satisfies through NewGroupTransactor.
package txn
