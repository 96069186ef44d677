// Package frontier decides when tidemark commits and checkpoints, and
// defines the output frontier it publishes.
//
// # A deterministic core
//
// Like etcd's raft, nothing in this package reads a clock, starts a
// goroutine or touches a socket. The runtime (processor/txn) feeds it
// measurements stamped with the time it observed them and applies the
// decisions it returns:
//
//	c, _ := frontier.NewController(opts) // one per transactional session
//	c.ObserveArrivals(now, n)            // records appended to the inputs
//	c.ObserveProcessed(now, n, busy)     // records processed, CPU/wall busy time
//	c.ObserveOutput(now, tenant, in, n)  // outputs produced, with their input time
//	c.ObserveWatermark(now, wm, closes)  // a watermark advance closed windows
//	d := c.Tick(now)                     // at least every Decision.Wake
//	if d.Commit {
//		c.ObserveCommitStarted(now)
//		... flush, AddOffsets, EndTxn ...
//		c.ObserveCommitFinished(now, frontier.CommitAck{Cost: blocked})
//	}
//	m := c.Snapshot()                    // chosen T, predicted S, observed S
//
// The same inputs in the same order always produce the same decisions, so
// the policies are tested with tables, replayed from traces (testdata/) and
// compared over an hour of simulated load in about a second (frontier/sim).
// A Controller is not safe for concurrent use: it belongs to the goroutine
// that owns the transactional session.
//
// # Wiring it into the runtime
//
// What each observation means, and who is expected to make it:
//
//   - ObserveArrivals: records that became available to this session's
//     tasks (fetched, or the high-watermark advance of assigned
//     partitions). With ObserveProcessed it gives λ and the backlog; if
//     the runtime knows the consumer lag, ObserveLag sets the backlog
//     directly instead.
//   - ObserveProcessed: records the loop finished, with the time it spent
//     on them (wall time of the processing, not of the poll). s is busy/n.
//   - ObserveOutput: sink records produced, with the append time of the
//     input that triggered them (the input record's timestamp under
//     LogAppendTime, else its CreateTime: the staleness origin the
//     benchmark measures) and their tenant. Changelog records are not
//     outputs; feed them to CheckpointScheduler.ObserveChangelogWrites.
//   - ObserveWatermark: after a stream-time advance that closed windows
//     and emitted their final results (already reported as outputs).
//   - ObserveCommitStarted / Finished / Aborted: from txn, around the
//     flush + TxnOffsetCommit + EndTxn sequence. CommitAck.Cost is the time
//     the record loop could not process because of the commit (its whole
//     latency when the loop blocks, as in Kafka Streams; less if the
//     runtime pipelines). An unknown EndTxn outcome resolved as committed
//     is Finished; resolved as aborted is Aborted.
//   - ObserveRestoreTime (CheckpointScheduler.ExpectedRestore) and
//     ObserveFailure (on a restart after a crash) feed the rollback term.
//   - Tick: after each poll-loop iteration, and no later than
//     Decision.Wake when the loop is idle. Act on Decision.Commit by
//     starting a commit and calling ObserveCommitStarted.
//   - Admit: for the records of a rate-limited tenant; a refused record
//     is paused (not dropped) for the returned wait. The processor charges
//     each record once its source has named the tenant, and on a refusal
//     holds the record's partition until the owed token is granted
//     (processor/app_admit.go).
//   - Snapshot: for metrics (suggested names: tidemark_commit_interval_seconds,
//     tidemark_staleness_predicted_seconds, tidemark_staleness_observed_seconds,
//     tidemark_utilization, tidemark_commits_total{reason}).
//
// The CheckpointScheduler is driven the same way from the changelog
// package, and Frontier values are advanced by the runtime on each commit
// ack (the produced sink offsets + 1 and the watermark the outputs cover)
// and published by it; nothing here does I/O.
//
// # The staleness cost model
//
// Per commit group, with arrival rate λ, per-record service time s,
// per-commit fixed cost c (processing capacity a commit takes away),
// commit latency L (start of the commit to its ack), backlog B and commit
// interval T:
//
//	ρ(T) = λ·s + c/T                                  utilisation, must stay < 1
//	Wq   = (λ·s² + E[c²]/T) / (2·(1−ρ))               steady-state wait
//	W(T) = Wq(T) + B'·s/(1−ρ)                         queueing delay
//	S(T) = T/2 + L + W(T)                             expected staleness
//	J(T) = S(T) + h·(T/2 + R)²                        objective
//
// Wq is the Pollaczek–Khinchine mean wait of an M/G/1 queue whose jobs are
// records (rate λ, size s) and commits (rate 1/T, size c, second moment
// E[c²] = c² + Var(c) from the measured commit costs). Per-record cost is
// nearly constant, so the records' part is M/D/1; slow commits leave queues
// that drain only at the spare rate 1−ρ, so their variance counts. Treating
// a timer's commits as Poisson overstates their irregularity, so Wq errs
// high (10–30% in the simulator at light load), towards longer intervals.
// The 1/(1−ρ) factor is what makes short intervals expensive as load
// rises. The second term of W is the time to drain, with the capacity left
// over, the persistent backlog B' (the least backlog over the last two
// commit cycles: what a cycle did not clear), so a real backlog pushes T
// up until it is gone while the queue each commit builds and drains again
// is not counted twice. (Model.steady explains why not the deterministic
// periodic-vacation form.)
//
// The rollback term charges the expected extra staleness of a crash: at
// hazard rate h the fraction h·(T/2+R) of outputs is lost or delayed (half
// an interval of uncommitted work plus the restore time R after the last
// checkpoint), each by about T/2+R. With realistic hazard rates it is
// negligible; it matters only for long intervals on flaky hosts.
//
// # Controller v2: the p99, feedback, the broker
//
// The mean model above is kept for S(T) and the snapshot, but the adaptive
// policy chooses T by the 99th percentile, the number it is judged by
// (p99.go derives it):
//
//	P99(T)  = 0.99·T + L_high(T) + Wq(T) + B'·s/(1 − c/T) + F
//	J99(T)  = P99(T) + h·(T/2 + R)²
//	L(T)    = L + β·(1/T − r₀)                       latency at commit rate 1/T
//
// with F the read_committed fetch floor (Options.FetchFloor) and β the
// slope of commit latency regressed on the measured commit rate r₀
// (broker.go): on a broker sharing the machine, commits slow down as their
// rate rises, and every latency and cost term is scaled by L(T)/L, so a
// short interval pays for the latency it causes.
//
// Commit size (fit.go). A commit's cost and latency are regressed on the
// records it carries: c = c₀ + b·n, L = L₀ + b_L·n. With the fit (once the
// sizes have varied enough to tell a slope), the per-record part b joins
// the service time (λ·(s + b) is the load: it is paid whatever T is), only
// c₀ is amortised by a longer interval, and L(T) = L₀ + b_L·λ·T. Taking a
// size-driven cost for a per-commit one made longer intervals look cheaper
// than they are, and on the real broker chose 150–200 ms where 100 ms was
// best. The cost split of the last fit that could tell a slope is kept
// while the sizes stop varying (a steady interval): the plain mean cost it
// would fall back to grows with the interval, and so would the floor,
// c/headroom (on the real broker at 90% load: 0.6–2.5 s, where fixed 100 ms
// kept up). A session's first commit (it registers every partition with
// the coordinator) is left out of every estimate.
//
// The per-record part is taken across intervals when it can be
// (fit_span.go): the mean size and cost of the commits planned at each
// interval (bins √2 apart, weights fading over 30 s) give a line whose
// slope b replaces the size fit's, and c₀ is that line through the recent
// commits' means. Regressed only on the sizes of commits at one interval,
// the part of the cost that follows the operating point lands in c₀: on
// the real broker at 50% load c₀ rose from 4 to 14 ms as the interval grew
// from 14 to 50 ms, and the floor and the interval followed it.
//
// T* minimises J99 on [T_lo, Tmax]; the policy then takes the longest T
// whose J99 exceeds J99(T*) by at most P99Tolerance (default 10%) of its
// interval-driven part (J99 less L_high and F, so a slow broker does not
// buy a long interval) and whose P99 meets the tightest pending staleness
// target: near its optimum the p99 is flat, and the commits saved are
// broker CPU the model does not see. The interval may grow at most
// twofold per second, from 100 ms (shrinking is immediate): one spiked
// estimate used to become seconds of staleness. Finally the
// feedback loop (feedback.go) compares the observed p99 of the last 128
// commits (staleness from input arrival to commit end) with the p99
// predicted when they started and shortens T by an integral correction
// I ∈ [0, 0.5] when observed exceeds predicted by more than 10%
// (T = T_relaxed·(1 − I), never below T_lo, no integration where it cannot
// help). Every Decision carries a Trace of T, both p99s, λ, s, L, c, the
// blocked time, the commit rate and β.
//
// Staleness is measured from when an input reached the process (its poll,
// or its broker append time under LogAppendTime), never from its event
// time: the runtime passes that to ObserveOutput.
//
// The adaptive policy minimises J99 over [T_lo, Tmax] where
// T_lo = max(Tmin, c / max(min(ρmax − λ·s, MaxCommitShare), OverloadCommitShare)):
// commits may never push utilisation above ρmax nor take more than
// MaxCommitShare of the loop (a commit also costs the brokers, which the
// model does not see), and when the load alone leaves less than
// OverloadCommitShare of headroom and the queue shows it (a persistent
// backlog larger than one commit cycle's arrivals, λ·(T + L)) the
// controller is overloaded and spaces commits so they take only that
// share of capacity. The estimates alone do not make an overload: on the
// real broker at 90% load they read 1.1–1.3 with an empty queue, and up
// to 23 in a bucket where few records were processed. While they say
// saturated and the queue clears, the interval planned when the load last
// left room is held; and without a backlog T_lo rises only as fast as the
// interval may grow (twofold per second). When even that
// leaves ρ ≥ 1 (the backlog grows whatever T is), the interval grows as
// sqrt(2·c·H) with H the time overloaded so far: it balances the T/2 a
// longer interval adds against the H·c/T of backlog delay commits add over
// an overload expected to last about as long again (both within the
// twofold-per-second growth limit, so an overload the estimates only
// imagined for a moment costs little). J is minimised
// numerically (a 12-point grid on log T to find the right valley, then a
// golden-section search in it), about a microsecond; a Tick re-solves only
// when a rate bucket closed, a commit was acked or the backlog moved, so
// most Ticks cost a couple of hundred nanoseconds.
//
// The staleness target does not lengthen T: J already picks the freshest
// interval the capacity allows, so a target can only be met or missed
// (Snapshot.TargetFeasible). It acts through the early commits below and
// is what tenants tighten.
//
// # Invariants
//
//   - The adaptive interval is always within [Tmin, Tmax].
//   - At most one commit is in flight; Tick never asks for a commit while
//     one is outstanding.
//   - No commit is requested when nothing was processed or produced since
//     the previous one.
//   - Window finals (a watermark closed windows whose final results are
//     pending) commit at once under the adaptive policy, right after the
//     commit in flight if there is one (reason window_final), never closer
//     than Tmin to the previous commit; a window closes at most once per
//     window size, so these commits are few even in overload.
//   - Other early commits (the oldest uncommitted output of some tenant,
//     plus the expected commit latency, reached that tenant's staleness
//     target) never come closer together than T_lo, and none happen while
//     the controller is overloaded or draining a backlog (one that takes
//     longer than T to clear), so they cannot eat the capacity a backlog
//     needs.
//   - The fixed policy (the Kafka Streams baseline) commits every
//     FixedInterval whatever the load and never commits early.
//
// Checkpoints are scheduled separately (CheckpointScheduler), by Daly's
// refinement of Young's rule capped by a restore-time target. Both
// schedulers read the failure hazard from a Hazard (a Gamma-prior estimate
// that forgets by uptime), which the runtime shares between them and keeps
// across sessions and restarts (UseHazard, Hazard.State, Hazard.Restore). The published output frontier
// (Frontier) is a monotone per-partition mark: merging is a pointwise
// maximum, so replicas and stale publishers can only ever move it forward.
package frontier
