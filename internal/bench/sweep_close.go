package bench

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Window close→visible has two origins in the sweep:
//
//   - external: the produce time of the input that moved the partition's
//     event time past the window's end + grace (sweep_measure.go). It
//     includes that input's own trip to the processor (producer linger,
//     broker append, the processor's fetch and queue), which no commit
//     policy can shorten;
//   - in-app: the moment the tidemark worker emitted the window's finals,
//     which is when its watermark closed the window. From there to
//     visible is what the controller's "commit finals at once" decides:
//     the rest of the record pass, a commit in flight, the commit itself
//     and the read_committed fetch. The worker reports the moment with a
//     CLOSED line on stdout; worker and watcher share the machine's clock.
//
// Kafka Streams reports no CLOSED lines, so only the external origin
// compares the two systems.

// sweepCloseLine is the prefix of a worker's "CLOSED <partition> <end +
// grace, ms> <unix ns>" line.
const sweepCloseLine = "CLOSED"

// closeReporter prints a CLOSED line for the first final of every window
// end on every input partition. A partition's finals are emitted in window
// order, so the last end printed per partition is all it needs to keep.
type closeReporter struct {
	mu   sync.Mutex
	part kgo.TopicPartitioner
	last []int64
}

func newCloseReporter(partitions int32) *closeReporter {
	return &closeReporter{part: kgo.StickyKeyPartitioner(nil).ForTopic(""), last: make([]int64, max(partitions, 1))}
}

// final books one final of key's window whose end + grace is closeMs.
func (c *closeReporter) final(key string, closeMs int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.part.Partition(&kgo.Record{Key: []byte(key)}, len(c.last))
	if closeMs <= c.last[p] {
		return // not the first final of its close: no clock read, no line
	}
	c.last[p] = closeMs
	fmt.Printf("%s %d %d %d\n", sweepCloseLine, p, closeMs, time.Now().UnixNano())
}

// windowClose names one window end on one input partition.
type windowClose struct {
	part  int32
	endMs int64
}

// appCloses is, per window close, every moment a worker reported it, in
// order: after a SIGKILL the restarted worker closes again the windows
// whose finals its predecessor had not committed.
type appCloses map[windowClose][]time.Time

// closeMoments parses the worker's CLOSED lines into closes.
func (l *eventLog) closeMoments(closes appCloses) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.ev {
		f := strings.Fields(e.line)
		if len(f) != 4 || f[0] != sweepCloseLine {
			continue
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		end, err2 := strconv.ParseInt(f[2], 10, 64)
		ns, err3 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		k := windowClose{int32(p), end}
		closes[k] = append(closes[k], time.Unix(0, ns))
	}
	for _, ts := range closes {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	}
}

// at is the close that produced a final received at recv: the latest one
// reported before it.
func (c appCloses) at(k windowClose, recv time.Time) (time.Time, bool) {
	ts := c[k]
	i := sort.Search(len(ts), func(i int) bool { return ts[i].After(recv) })
	if i == 0 {
		return time.Time{}, false
	}
	return ts[i-1], true
}
