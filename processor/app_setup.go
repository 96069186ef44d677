package processor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/internal/retry"
	"github.com/tidemark-streams/tidemark/topology"
)

// ErrMissingTopic is returned at startup when a source or sink topic the
// topology names does not exist. tidemark creates only its internal topics.
var ErrMissingTopic = errors.New("processor: topic does not exist")

// layout is the topology placed on the cluster: every topic's partition
// count and every sub-topology's task count.
type layout struct {
	partitions map[string]int32 // every source, sink and internal topic
	tasks      []int32          // per sub-topology: task (partition) count
	frontier   string           // "<app>-frontier", or "" when not published
	// maxBatch caps the producer's batches to an output topic whose
	// max.message.bytes is below the client's default (see batchMaxBytes).
	maxBatch map[string]int32
}

// defaultBatchMaxBytes is franz-go's default ProducerBatchMaxBytes.
const defaultBatchMaxBytes = 1_000_012

// batchMaxBytes is the producer's batch cap for topic. franz-go does not
// split a batch the broker rejects as too large (the Java producer does):
// batches of outputs that each fit a topic with a lowered max.message.bytes
// would fail every transaction, to be redone output by output. A record
// larger than the cap fails as MESSAGE_TOO_LARGE before it is sent, as the
// broker would fail it uncompressed.
func (l *layout) batchMaxBytes(topic string) int32 {
	if n, ok := l.maxBatch[topic]; ok {
		return n
	}
	return defaultBatchMaxBytes
}

// readBatchLimits records the max.message.bytes of the output topics that
// lower it below the default batch cap. It is best effort: without the
// DescribeConfigs permission batches keep the default cap.
func (a *App) readBatchLimits(ctx context.Context, l *layout, topics []string) {
	rcs, err := a.adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		a.log.Warn("cannot read the output topics' max.message.bytes; producer batches keep the default cap", "err", err)
		return
	}
	l.maxBatch = map[string]int32{}
	for _, rc := range rcs {
		if rc.Err != nil {
			continue
		}
		for _, c := range rc.Configs {
			if c.Key != "max.message.bytes" || c.Value == nil {
				continue
			}
			if n, err := strconv.ParseInt(*c.Value, 10, 32); err == nil && n < defaultBatchMaxBytes {
				l.maxBatch[rc.Name] = int32(max(n, 512)) // franz-go's least
			}
		}
	}
}

func (l *layout) partitionCount(topic string) (int32, error) {
	n, ok := l.partitions[topic]
	if !ok {
		return 0, fmt.Errorf("%w: %q (no partition count known)", ErrMissingTopic, topic)
	}
	return n, nil
}

func (a *App) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...), kgo.DialTimeout(5 * time.Second),
		kgo.WithLogger(&kgoLogger{log: a.log.With("component", "kafka"), retries: a.metrics.produceRetries})}
	if l := a.layout; l != nil {
		opts = append(opts, kgo.ProducerBatchMaxBytesFn(l.batchMaxBytes))
	}
	opts = append(opts, a.userClientOpts()...)
	return append(opts, extra...)
}

// userClientOpts are the options of every client from the configuration:
// Security's, then ClientOpts.
func (a *App) userClientOpts() []kgo.Opt {
	return append(append([]kgo.Opt(nil), a.secOpts...), a.cfg.ClientOpts...)
}

// setup checks the user topics, sizes and creates the internal ones, and
// opens the local state. It fails before any processing on anything that
// would make results wrong later: a missing topic, inputs of a join with
// different partition counts, a changelog that does not match its store.
func (a *App) setup(ctx context.Context) error {
	if err := a.checkStateDir(); err != nil {
		return err
	}
	id, err := a.cfg.instanceID()
	if err != nil {
		return fmt.Errorf("processor: %w", err)
	}
	a.cfg.InstanceID = id
	a.log = a.log.With("instance", id)
	a.leases.setLogger(a.log)
	cl, err := kgo.NewClient(a.clientOpts()...)
	if err != nil {
		return fmt.Errorf("processor: admin client: %w", err)
	}
	a.admCl, a.adm = cl, kadm.NewClient(cl)
	// A broker that is still starting, or restarting, is waited for up to
	// StartupTimeout; anything that cannot get better by waiting (a
	// missing topic, mismatched partition counts) fails at once.
	sctx, cancel := context.WithTimeout(ctx, a.cfg.StartupTimeout)
	defer cancel()
	err = retry.Do(sctx, a.log, "reach brokers", func(ctx context.Context) error {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return cl.Ping(pctx)
	})
	if err != nil {
		cl.Close()
		return a.startupTimedOut(ctx, sctx, "reach brokers", err)
	}
	err = retry.Do(sctx, a.log, "check and create topics", func(ctx context.Context) error {
		var err error
		a.layout, err = a.place(ctx)
		return err
	})
	if err != nil {
		cl.Close()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && sctx.Err() != nil {
			return a.startupTimedOut(ctx, sctx, "check and create topics", err)
		}
		return err
	}
	if err := a.openState(); err != nil {
		cl.Close()
		return err
	}
	return nil
}

func (a *App) place(ctx context.Context) (*layout, error) {
	t := a.topo
	user := slices.Concat(t.SourceTopics(), t.SinkTopics(), t.GlobalTopics())
	var userTopics []string
	for _, topic := range user {
		if !t.IsRepartitionTopic(topic) && !slices.Contains(userTopics, topic) {
			userTopics = append(userTopics, topic)
		}
	}
	if a.cfg.DeadLetterTopic != "" {
		userTopics = append(userTopics, a.cfg.DeadLetterTopic)
	}
	l := &layout{partitions: map[string]int32{}}
	// A topic created moments ago (by a deploy script, or a test) may not
	// be in every broker's metadata yet: give it a few seconds before
	// calling it missing.
	missing := userTopics
	for deadline := time.Now().Add(5 * time.Second); ; {
		details, err := a.adm.ListTopics(ctx, missing...)
		if err != nil {
			return nil, fmt.Errorf("processor: describe topics: %w", err)
		}
		var still []string
		for _, topic := range missing {
			d, ok := details[topic]
			if !ok || d.Err != nil || len(d.Partitions) == 0 {
				still = append(still, topic)
				continue
			}
			l.partitions[topic] = int32(len(d.Partitions))
		}
		missing = still
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %v (create them first; tidemark creates only its internal topics)", ErrMissingTopic, missing)
	}

	if err := sizeLayout(t, l); err != nil {
		return nil, err
	}
	var outputs []string
	for _, topic := range userTopics {
		if slices.Contains(t.SinkTopics(), topic) || topic == a.cfg.DeadLetterTopic {
			outputs = append(outputs, topic)
		}
	}
	a.readBatchLimits(ctx, l, outputs)

	var internal []changelog.Topic
	for _, r := range t.RepartitionTopics() {
		cfg := map[string]string{"cleanup.policy": "delete", "retention.ms": "-1"}
		for k, v := range r.Config {
			cfg[k] = v
		}
		internal = append(internal, changelog.Topic{Name: r.Name, Partitions: l.partitions[r.Name], ReplicationFactor: -1, Configs: cfg})
	}
	var logs []changelog.Topic
	logSub := map[string]int{} // changelog -> its store's sub-topology
	for i, sub := range t.SubTopologies() {
		for _, spec := range sub.Stores {
			if spec.Logged {
				ct := changelog.TopicFor(t.Application(), spec, l.tasks[i])
				logs = append(logs, ct)
				logSub[ct.Name] = i
				l.partitions[ct.Name] = l.tasks[i]
			}
		}
	}
	var ft []changelog.Topic
	if *a.cfg.PublishFrontier && a.cfg.Guarantee == ExactlyOnce {
		l.frontier = t.Application() + "-frontier"
		ft = []changelog.Topic{{Name: l.frontier, Partitions: 1, ReplicationFactor: -1,
			Configs: map[string]string{"cleanup.policy": "compact"}}}
		l.partitions[l.frontier] = 1
	}
	// Every existing internal topic is checked before any is created: a
	// start refused for one must not leave the others behind.
	if err := a.checkInternalCounts(ctx, l, slices.Concat(internal, logs, ft), logSub); err != nil {
		return nil, err
	}
	if err := ensurePlainTopics(ctx, a.adm, internal); err != nil {
		return nil, err
	}
	if err := changelog.EnsureTopics(ctx, a.adm, logs...); err != nil {
		return nil, fmt.Errorf("processor: changelog topics: %w", err)
	}
	if err := ensurePlainTopics(ctx, a.adm, ft); err != nil {
		return nil, err
	}
	return l, nil
}

// ensurePlainTopics creates internal topics that do not exist and checks
// the partition count of those that do.
func ensurePlainTopics(ctx context.Context, adm *kadm.Client, topics []changelog.Topic) error {
	for _, t := range topics {
		created, err := changelog.CreateTopic(ctx, adm, t)
		if err != nil {
			return fmt.Errorf("processor: internal topic: %w", err)
		}
		if !created {
			// Another instance may have created it a moment ago: brokers
			// learn new topics asynchronously, so its metadata can show
			// no partitions yet. Wait for them before comparing.
			var got int32
			for deadline := time.Now().Add(10 * time.Second); ; {
				d, derr := adm.ListTopics(ctx, t.Name)
				if derr != nil {
					return fmt.Errorf("processor: describe %s: %w", t.Name, derr)
				}
				got = int32(len(d[t.Name].Partitions))
				if got > 0 || time.Now().After(deadline) {
					break
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("processor: describe %s: %w", t.Name, ctx.Err())
				case <-time.After(100 * time.Millisecond):
				}
			}
			if got != t.Partitions {
				return fmt.Errorf("processor: internal topic %s has %d partitions, the topology needs %d (delete it, or reset the application)", t.Name, got, t.Partitions)
			}
		}
	}
	return nil
}

// sizeLayout gives every repartition topic and sub-topology a partition
// (task) count from the user topics' counts already in l: a repartition
// topic gets the task count of the sub-topology writing it, unless it is
// sized by its reader or by its co-partition group
// (Topology.CopartitionedCounts). It is pure, so
// placement rules are tested without a broker.
func sizeLayout(t *topology.Topology, l *layout) error {
	// Size repartition topics and tasks in sub-topology order: a
	// repartition topic gets the task count of the sub-topology writing
	// it, which reads only topics of earlier sub-topologies.
	subs := t.SubTopologies()
	l.tasks = make([]int32, len(subs))
	repart := map[string]topology.InternalTopic{}
	for _, r := range t.RepartitionTopics() {
		repart[r.Name] = r
		if r.Partitions > 0 {
			// WithPartitions: fixed before the writer is sized, which
			// would otherwise give the topic its own task count.
			l.partitions[r.Name] = r.Partitions
		}
	}
	// A topic sized by its reader takes the count of the reader's other
	// inputs (its writer must not size it).
	byReader := func(r topology.InternalTopic) bool { return r.SizedByReader && r.Partitions == 0 }
	// Fixed point: a sub-topology is sized once all its inputs are; when
	// no sub-topology can be (a cycle through repartition topics, e.g. a
	// sub-topology that reads a repartition topic it also writes), the
	// first one with any sized input is sized from those inputs alone.
	size := func(i int, lenient bool) bool {
		for _, src := range subs[i].SourceTopics {
			if _, ok := l.partitions[src]; !ok && !lenient && !byReader(repart[src]) {
				return false
			}
		}
		// The repartition topics of a co-partition group (a join's or a
		// cogroup's inputs) take the group's count, as in Kafka Streams.
		for topic, n := range t.CopartitionedCounts(i, func(topic string) (int32, bool) {
			n, ok := l.partitions[topic]
			return n, ok
		}) {
			l.partitions[topic] = n
		}
		var n int32
		for _, src := range subs[i].SourceTopics {
			if byReader(repart[src]) {
				continue // sized below, from the others
			}
			n = max(n, l.partitions[src])
		}
		if n == 0 {
			return false
		}
		l.tasks[i] = n
		for _, src := range subs[i].SourceTopics {
			if _, set := l.partitions[src]; !set && byReader(repart[src]) {
				l.partitions[src] = n
			}
		}
		for _, sink := range subs[i].SinkTopics {
			if r, isRep := repart[sink]; isRep && !byReader(r) {
				if _, set := l.partitions[sink]; !set {
					l.partitions[sink] = n
				}
			}
		}
		return true
	}
	for {
		progress := false
		for i := range subs {
			if l.tasks[i] == 0 && size(i, false) {
				progress = true
			}
		}
		if progress {
			continue
		}
		for i := range subs {
			if l.tasks[i] == 0 && size(i, true) {
				progress = true
				break
			}
		}
		if !progress {
			break
		}
	}
	for i, n := range l.tasks {
		if n == 0 {
			return fmt.Errorf("processor: cannot size sub-topology %d: its inputs have no partition count", i)
		}
	}
	if err := t.CheckCopartitioning(func(topic string) (int32, bool) {
		n, ok := l.partitions[topic]
		return n, ok
	}); err != nil {
		return fmt.Errorf("processor: %w", err)
	}
	if err := t.CheckPlacements(func(topic string) (int32, bool) {
		n, ok := l.partitions[topic]
		return n, ok
	}); err != nil {
		return fmt.Errorf("processor: %w", err)
	}
	return nil
}
