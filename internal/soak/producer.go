package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// PoisonHeader marks a record the producer wrote as undecodable on purpose.
// The service copies input headers into its dead-letter records; the
// checker classifies input records by this header, never by trying to
// decode them the way the service does.
const PoisonHeader = "soak.poison"

// Coord is an input record's place in the log.
type Coord struct {
	Partition int32
	Offset    int64
}

func (c Coord) String() string { return fmt.Sprintf("%d@%d", c.Partition, c.Offset) }

// ProducerConfig sizes the input stream.
type ProducerConfig struct {
	Topic string
	// Rate is records per second, poison pills included.
	Rate int
	// Keys is the key space k000000..; keys are drawn from a Zipf
	// distribution, so a few keys are hot and most are cold.
	Keys int
	// PoisonFraction of the records are poison pills.
	PoisonFraction float64
	Seed           uint64
}

// Producer writes keyed records at a fixed rate with an idempotent,
// acks=all producer and records exactly what the broker acknowledged. The
// client retries without limit, so a broker outage delays records but does
// not fail them; the send loop blocks while the client's buffer is full and
// does not try to catch up on the records it could not send meanwhile.
type Producer struct {
	cfg ProducerConfig
	cl  *kgo.Client
	rng *rand.Rand
	zf  *rand.Zipf

	mu       sync.Mutex
	sent     int
	acked    map[string]int // valid records acknowledged, per key
	nAcked   int
	poison   []Coord // poison pills acknowledged
	failed   int
	failures map[string]int // error text → records
	inflight sync.WaitGroup
	// sendCtx outlives Run: records buffered when Run stops are still
	// delivered by Stop, not failed by Run's cancellation.
	sendCtx    context.Context
	cancelSend context.CancelFunc
	stopOnce   sync.Once
}

func NewProducer(brokers []string, cfg ProducerConfig) (*Producer, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is franz-go's default
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(20_000),
		kgo.UnknownTopicRetries(-1), // a restarting broker may not know the topic yet
	)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x50a4))
	sendCtx, cancelSend := context.WithCancel(context.Background())
	return &Producer{
		cfg: cfg, cl: cl, rng: rng, sendCtx: sendCtx, cancelSend: cancelSend,
		zf:       rand.NewZipf(rng, 1.1, 4, uint64(cfg.Keys-1)),
		acked:    map[string]int{},
		failures: map[string]int{},
	}, nil
}

// Key is the name of key i.
func Key(i int) string { return fmt.Sprintf("k%06d", i) }

// Run produces until ctx is done.
func (p *Producer) Run(ctx context.Context) {
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	seq := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		due := int(time.Since(start).Seconds()*float64(p.cfg.Rate)) - seq
		if due > p.cfg.Rate/2 {
			// Blocked by an outage: go on at the rate from now instead of
			// bursting out what could not be sent meanwhile.
			start = time.Now().Add(-time.Duration(float64(seq) / float64(p.cfg.Rate) * float64(time.Second)))
			due = 0
		}
		for range due {
			if ctx.Err() != nil {
				return
			}
			p.produceOne(seq)
			seq++
		}
	}
}

func (p *Producer) produceOne(seq int) {
	key := Key(int(p.zf.Uint64()))
	r := &kgo.Record{Topic: p.cfg.Topic, Key: []byte(key)}
	poison := p.rng.Float64() < p.cfg.PoisonFraction
	if poison {
		r.Value = poisonValue(p.rng, seq)
		r.Headers = []kgo.RecordHeader{{Key: PoisonHeader, Value: []byte("1")}}
	} else {
		r.Value = []byte(`{"seq":` + strconv.Itoa(seq) + `}`)
	}
	p.mu.Lock()
	p.sent++
	p.mu.Unlock()
	p.inflight.Add(1)
	// TryProduce: with the buffer full (a long outage) the record is failed
	// unsent rather than blocking the loop.
	p.cl.TryProduce(p.sendCtx, r, func(r *kgo.Record, err error) {
		defer p.inflight.Done()
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			p.failed++
			p.failures[err.Error()]++
			return
		}
		p.nAcked++
		if poison {
			p.poison = append(p.poison, Coord{r.Partition, r.Offset})
		} else {
			p.acked[key]++
		}
	})
}

// poisonValue is bytes the service's JSON source cannot decode into its
// event: garbage, truncated JSON, JSON of the wrong shape or type.
func poisonValue(rng *rand.Rand, seq int) []byte {
	switch rng.IntN(5) {
	case 0:
		return []byte{0x00, 0xff, 0xfe, byte(seq), byte(seq >> 8)}
	case 1:
		return []byte(`{"seq":` + strconv.Itoa(seq)) // truncated
	case 2:
		return []byte(`{"seq":"` + strconv.Itoa(seq) + `"}`) // a string, not a number
	case 3:
		return []byte(`[` + strconv.Itoa(seq) + `]`)
	default:
		return []byte("poison-" + strconv.Itoa(seq))
	}
}

// Stop waits up to timeout for the records in flight (Run must have
// returned), then closes the client. Records still unacknowledged then
// fail with a context error and are not counted as produced; if the broker
// wrote them anyway, the input log says so and the checker counts them.
// Stopping again does nothing.
func (p *Producer) Stop(timeout time.Duration) {
	p.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_ = p.cl.Flush(ctx)
		p.cancelSend()
		p.cl.Close() // fails whatever is left, calling its promise
		p.inflight.Wait()
	})
}

// Produced is what the broker acknowledged.
type Produced struct {
	Sent, Acked, Failed int
	PerKey              map[string]int
	Poison              []Coord
	Failures            map[string]int
}

func (p *Producer) Produced() Produced {
	p.mu.Lock()
	defer p.mu.Unlock()
	per := make(map[string]int, len(p.acked))
	for k, n := range p.acked {
		per[k] = n
	}
	poison := append([]Coord(nil), p.poison...)
	sort.Slice(poison, func(i, j int) bool {
		if poison[i].Partition != poison[j].Partition {
			return poison[i].Partition < poison[j].Partition
		}
		return poison[i].Offset < poison[j].Offset
	})
	f := make(map[string]int, len(p.failures))
	for k, n := range p.failures {
		f[k] = n
	}
	return Produced{Sent: p.sent, Acked: p.nAcked, Failed: p.failed, PerKey: per, Poison: poison, Failures: f}
}

// Count returns how many records were acknowledged so far.
func (p *Producer) Count() (sent, acked int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent, p.nAcked
}
