package processor

import "time"

// Consumer lag of a caught-up partition.
//
// A partition's lag is its queued records plus the records after its last
// fetched one, as of that fetch (its high watermark minus the next offset).
// On a transactionally written topic (every repartition topic, the
// changelog-like inputs of another tidemark or Kafka Streams application)
// that difference never reaches 0: a commit marker follows every
// transaction, aborted records stay in the log, and a read_committed
// consumer is given neither. Counted as lag, an idle application whose
// inputs had all been processed reported one record per transactionally
// written partition for good (22 on the marketplace pipelines with 2
// partitions), its thread logged "stream thread made no progress" every
// 10 s, and the TidemarkNoProgress alert (lag > 0, nothing processed)
// would have paged.
//
// The consumer now keeps control records (enqueueFetches), so a marker
// after the last record no longer counts; aborted records at a log's end
// still do, as do records its last fetch left when fetching then stopped.
// So what a partition's last fetch left behind stops counting once the
// loop has gone on polling for lagSettle without being given any of it,
// while the partition was neither queued nor paused: a record the consumer
// could read would have been fetched by then. Records that arrive later
// are fetched and counted as before.

// lagSettle is how long after a partition's last fetched records the loop
// must keep polling it, without records, before what that fetch left
// behind no longer counts as lag.
const lagSettle = 2 * time.Second

// settleBehind zeroes what p's last fetch left behind once fetching it has
// settled at now (see above).
func (f *fairQueues) settleBehind(p *partQueue, now time.Time) {
	if p.behind == 0 || len(p.recs) > 0 || f.paused[p.tp] != "" {
		return
	}
	settled := p.fetched.Add(lagSettle)
	if now.Before(settled) || f.polled.Before(settled) {
		return
	}
	p.behind = 0
	// Given up on up to the stable offset: the partition's next empty
	// fetches count only records after it (fetchPosition).
	if p.stable > 0 {
		p.next, p.nextKnown = max(p.next, p.stable), true
	}
}

// settling reports whether some partition's lag is only what its last
// fetch left behind, not yet settled: the loop then observes its queues
// on turns without records too, or the lag gauge would keep its last
// value.
func (f *fairQueues) settling() bool {
	for _, p := range f.parts {
		if p.behind > 0 && len(p.recs) == 0 {
			return true
		}
	}
	return false
}
