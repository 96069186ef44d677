package processor

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tidemark-streams/tidemark/topology"
	"github.com/tidemark-streams/tidemark/txn"
)

// ErrorAction is what an error handler decides for a record whose
// processing or output failed.
type ErrorAction int

const (
	// Fail stops the application with the error (the default): nothing is
	// skipped without someone deciding so.
	Fail ErrorAction = iota
	// Continue skips the record: its input offset is committed, and none
	// of its state changes or outputs are (the transaction it was in is
	// aborted and redone without it, so a record is processed entirely or
	// not at all).
	Continue
	// DeadLetter skips the record as Continue does and writes the raw
	// input record to Config.DeadLetterTopic, inside the transaction that
	// commits the skip, with headers naming the error, the operator and
	// the record's origin.
	DeadLetter
)

func (a ErrorAction) String() string {
	switch a {
	case Continue:
		return "continue"
	case DeadLetter:
		return "dead-letter"
	}
	return "fail"
}

// ErrorContext describes a failed record to an error handler.
type ErrorContext struct {
	Task      topology.TaskID
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []topology.Header
	// Operator is the operator that failed, when the error names it.
	Operator string
	// Attempts is how many times producing the record's output failed
	// (production errors; 1 for processing errors).
	Attempts int
	// Punctuation: a punctuator failed, not a record (a processing error
	// only). There is no record: Topic, Key and Value are empty, Offset
	// is −1, Timestamp is the time the punctuation fired at. Fail stops
	// the application; Continue and DeadLetter go on (nothing to
	// dead-letter), keeping what the punctuator did before it failed.
	Punctuation bool
}

// ProcessingErrorHandler decides what happens to an input record when a
// user function (a mapper, a predicate, an aggregator, a processor) returns
// an error or panics while processing it (Kafka Streams' KIP-1033), and to
// a punctuation whose punctuator fails (ErrorContext.Punctuation). It is
// not called for records that fail to decode (see OnDeserializationError)
// nor for corrupt local state (which is rebuilt).
type ProcessingErrorHandler func(ErrorContext, error) ErrorAction

// ProductionErrorHandler decides what happens to an input record whose
// output the broker rejects for good (MESSAGE_TOO_LARGE, INVALID_RECORD,
// an authorization failure, ...), after Config.ProductionRetries attempts
// with backoff. Transient errors (a broker restart) are retried without
// limit and never reach it. Dead-lettering applies to the input record;
// when the dead-letter record itself is rejected the app fails.
type ProductionErrorHandler func(ErrorContext, error) ErrorAction

// Handlers for the common policies.
var (
	FailOnError       = func(ErrorContext, error) ErrorAction { return Fail }
	ContinueOnError   = func(ErrorContext, error) ErrorAction { return Continue }
	DeadLetterOnError = func(ErrorContext, error) ErrorAction { return DeadLetter }
)

// WithProcessingErrorHandler installs Config.OnProcessingError.
func WithProcessingErrorHandler(h ProcessingErrorHandler) Option {
	return func(c *Config) { c.OnProcessingError = h }
}

// WithProductionErrorHandler installs Config.OnProductionError.
func WithProductionErrorHandler(h ProductionErrorHandler) Option {
	return func(c *Config) { c.OnProductionError = h }
}

// errReplay asks the loop to abort the open transaction and redo it from
// the committed offsets: a record in it was found bad, and the replay skips
// it (the poison registry says how) so that none of its effects commit.
var errReplay = errors.New("replay without a bad record")

// recordKey identifies an input record.
type recordKey struct {
	topic     string
	partition int32
	offset    int64
}

func (k recordKey) String() string { return fmt.Sprintf("%s/%d@%d", k.topic, k.partition, k.offset) }

// poisonEntry is the decision taken for a bad input record, applied when
// the record comes round again.
type poisonEntry struct {
	action   ErrorAction
	cause    error
	operator string
	kind     string // "processing" or "production"
	thread   int    // the stream thread that decided
}

// rejections counts the rejected outputs of an input record.
type rejections struct {
	n      int
	thread int // the stream thread that processed it
}

// prunePoison forgets the bad records a commit moved past: they will not
// be read again.
func (a *App) prunePoison(committed map[string]map[int32]int64) {
	a.poisonMu.Lock()
	defer a.poisonMu.Unlock()
	for k := range a.poison {
		if off, ok := committed[k.topic][k.partition]; ok && off > k.offset {
			delete(a.poison, k)
		}
	}
	for k := range a.rejectAttempts {
		if off, ok := committed[k.topic][k.partition]; ok && off > k.offset {
			delete(a.rejectAttempts, k)
		}
	}
}

// forgetPoison forgets what thread found about the records of partitions
// it no longer owns (owned says which it does): another instance or thread
// reads them now, and decides afresh. A revocation before the commit that
// moves past a bad record would otherwise leave its entry behind for good.
func (a *App) forgetPoison(thread int, owned txn.Partitions) {
	own := func(k recordKey) bool { return slices.Contains(owned[k.topic], k.partition) }
	a.poisonMu.Lock()
	defer a.poisonMu.Unlock()
	for k, pe := range a.poison {
		if pe.thread == thread && !own(k) {
			delete(a.poison, k)
		}
	}
	for k, r := range a.rejectAttempts {
		if r.thread == thread && !own(k) {
			delete(a.rejectAttempts, k)
		}
	}
}
