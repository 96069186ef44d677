// Package watch follows a tidemark application's output frontier for
// services downstream of it: it tails the compacted "<app>-frontier"
// topic with read_committed isolation and answers "are all of the sink's
// results up to event time T committed, and readable?".
//
//	w, err := watch.New([]string{"kafka:9092"}, "marketplace")
//	defer w.Close()
//	if err := w.WaitCovers(ctx, "inventory-availability", cutoff); err != nil { … }
//	// every record of the sink with timestamp ≤ cutoff is now readable by a
//	// read_committed consumer (up to the offsets in w.Frontier(sink)).
//
// It needs only this package, frontier and franz-go: not the processor or
// the topology. The frontier's meaning, and the records it reads, are
// documented on frontier.Record and frontier.SinkStatus.
package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/frontier"
)

// Option configures a Watcher.
type Option func(*config)

type config struct {
	topic      string
	clientOpts []kgo.Opt
	log        *slog.Logger
}

// WithClientOpts appends franz-go options (TLS, SASL, dial timeouts) to
// the watcher's client.
func WithClientOpts(opts ...kgo.Opt) Option {
	return func(c *config) { c.clientOpts = append(c.clientOpts, opts...) }
}

// WithTopic reads topic instead of "<app>-frontier".
func WithTopic(topic string) Option { return func(c *config) { c.topic = topic } }

// WithLogger logs undecodable frontier records (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// Watcher tails an application's frontier topic in a goroutine it owns
// until Close. Its methods are safe for concurrent use.
type Watcher struct {
	cl    *kgo.Client
	adm   *kadm.Client
	topic string
	log   *slog.Logger

	mu      sync.Mutex
	view    *frontier.View
	next    int64  // next offset of the topic's partition 0 to read, control records included
	version uint64 // bumped on every change of view or next
	changed chan struct{}
	err     error // the client's fatal error, once the tail stopped

	cancel context.CancelFunc
	done   chan struct{}
}

// New starts watching app's frontier topic through a new client on seeds.
func New(seeds []string, app string, opts ...Option) (*Watcher, error) {
	cfg := config{topic: app + "-frontier", log: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	if len(seeds) == 0 || cfg.topic == "-frontier" {
		return nil, errors.New("watch: seeds and an application id are required")
	}
	copts := append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ConsumeTopics(cfg.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Control records (transaction markers) are returned too, so the
		// position passes them and reaches the last stable offset: that is
		// how Sync knows it has read to the end.
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, cfg.clientOpts...)
	cl, err := kgo.NewClient(copts...)
	if err != nil {
		return nil, fmt.Errorf("watch: client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{cl: cl, adm: kadm.NewClient(cl), topic: cfg.topic, log: cfg.log,
		view: frontier.NewView(), changed: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go w.tail(ctx)
	return w, nil
}

// Close stops the tail and closes the client.
func (w *Watcher) Close() {
	w.cancel()
	<-w.done
	w.cl.Close()
}

func (w *Watcher) tail(ctx context.Context) {
	defer close(w.done)
	for {
		fs := w.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		if fs.IsClientClosed() {
			w.mu.Lock()
			w.err = kgo.ErrClientClosed
			w.bump()
			w.mu.Unlock()
			return
		}
		fs.EachError(func(t string, p int32, err error) {
			w.log.Warn("frontier watch: fetch", "topic", t, "partition", p, "err", err)
		})
		w.mu.Lock()
		moved := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Partition != 0 {
				return
			}
			w.next = max(w.next, r.Offset+1)
			moved = true
			if r.Attrs.IsControl() {
				return
			}
			if err := w.view.Apply(r.Key, r.Value); err != nil {
				w.log.Warn("frontier watch: skipping record", "offset", r.Offset, "err", err)
			}
		})
		if moved {
			w.bump()
		}
		w.mu.Unlock()
	}
}

// bump announces a change; w.mu is held.
func (w *Watcher) bump() {
	w.version++
	close(w.changed)
	w.changed = make(chan struct{})
}

// Frontier returns the sink's frontier as far as the watcher has read
// (false: no record names the sink yet).
func (w *Watcher) Frontier(sink string) (frontier.SinkStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.view.Sink(sink)
}

// View returns a copy of the records read so far, and their version: the
// version changes whenever the watcher read something.
func (w *Watcher) View() (*frontier.View, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.view.Clone(), w.version
}

// Version changes whenever the watcher read something.
func (w *Watcher) Version() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.version
}

// Sync waits until the watcher has read the topic up to its last stable
// offset as of the call: every transaction committed before Sync was
// called is in the view when it returns.
func (w *Watcher) Sync(ctx context.Context) error {
	end, err := w.endOffsets(ctx, w.topic)
	if err != nil {
		return err
	}
	lso, ok := end[0]
	if !ok {
		return nil // no topic yet: nothing to read
	}
	return w.wait(ctx, func() bool { return w.next >= lso })
}

// wait blocks until cond (called with w.mu held) holds, the tail stops or
// ctx is done.
func (w *Watcher) wait(ctx context.Context, cond func() bool) error {
	for {
		w.mu.Lock()
		ok, ch, err := cond(), w.changed, w.err
		w.mu.Unlock()
		if ok {
			return nil
		}
		if err != nil {
			return fmt.Errorf("watch %s: %w", w.topic, err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// endOffsets lists topic's last stable offsets by partition.
func (w *Watcher) endOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	lo, err := w.adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("watch: list end offsets of %s: %w", topic, err)
	}
	out := map[int32]int64{}
	var ferr error
	lo.Each(func(o kadm.ListedOffset) {
		if o.Partition < 0 {
			return // the topic does not exist (yet)
		}
		if o.Err != nil {
			ferr = fmt.Errorf("watch: end offset of %s/%d: %w", o.Topic, o.Partition, o.Err)
			return
		}
		out[o.Partition] = o.Offset
	})
	return out, ferr
}

// Covers reports whether every result of sink up to event time t is
// committed, as far as the watcher has read: the frontier topic says so.
// The outputs themselves become readable a moment later at most (the
// transaction's markers reach the sink's partitions after the frontier's);
// Readable and WaitCovers wait for that too.
func (w *Watcher) Covers(sink string, t time.Time) bool {
	st, ok := w.Frontier(sink)
	return ok && st.Covers(t)
}

// Readable reports whether every output the sink's frontier names is
// readable by a read_committed consumer: each partition's last stable
// offset has reached the frontier's offset.
func (w *Watcher) Readable(ctx context.Context, st frontier.SinkStatus) (bool, error) {
	end, err := w.endOffsets(ctx, st.Sink)
	if err != nil {
		return false, err
	}
	for p, m := range st.Partitions {
		if m.Offset > 0 && end[int32(p)] < m.Offset {
			return false, nil
		}
	}
	return true, nil
}

// WaitCovers blocks until every result of sink with timestamp ≤ t is
// committed and readable by read_committed consumers, or ctx is done. The
// results are those in the sink up to the offsets of Frontier(sink).
func (w *Watcher) WaitCovers(ctx context.Context, sink string, t time.Time) error {
	var st frontier.SinkStatus
	err := w.wait(ctx, func() bool {
		var ok bool
		st, ok = w.view.Sink(sink)
		return ok && st.Covers(t)
	})
	if err != nil {
		return err
	}
	for {
		ok, err := w.Readable(ctx, st)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
