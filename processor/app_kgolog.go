package processor

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/retry"
)

// kgoLogger passes franz-go's warnings and errors to the app's logger, and
// counts the produce retries franz-go otherwise keeps to itself: a batch the
// broker turned away with a retriable error (CONCURRENT_TRANSACTIONS while
// the previous transaction's markers are still being written, a leader
// move) is retried after a metadata refresh, which franz-go announces at
// info level only. Those retries are what a slow commit's flush usually
// waited on; the counter makes them visible next to commit latency. It
// counts refreshes, not batches, and misses the batches franz-go (v1.22.3)
// retries in place after a backoff (REQUEST_TIMED_OUT,
// NOT_ENOUGH_REPLICAS_AFTER_APPEND): it logs those at debug level only,
// and none of its hooks sees a produce error.
//
// franz-go's errors that the client or the app recovers from by itself (a
// connection lost, this member removed from the group) are lowered to
// warnings (see recoverable).
//
// One info message is raised to a warning (see outOfRangeOnResume): an
// input partition whose committed offset is outside its log.
type kgoLogger struct {
	log     *slog.Logger
	retries prometheus.Counter
}

func (l *kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l *kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	switch level {
	case kgo.LogLevelError:
		if err := recoverable(keyvals); err != nil {
			l.log.Warn("kafka client: "+msg, append(keyvals[:len(keyvals):len(keyvals)], "meaning", recoverableMeaning)...)
			return
		}
		l.log.Error("kafka client: "+msg, keyvals...)
	case kgo.LogLevelWarn:
		l.log.Warn("kafka client: "+msg, keyvals...)
	case kgo.LogLevelInfo:
		if strings.HasPrefix(msg, outOfRangeOnResume) {
			l.log.Warn("kafka client: "+msg, append(keyvals[:len(keyvals):len(keyvals)], "meaning", outOfRangeMeaning)...)
			return
		}
		fallthrough
	default:
		if strings.HasPrefix(msg, "metadata update triggered") && strings.Contains(fmt.Sprint(keyvals...), "retry batches") {
			l.retries.Inc()
		}
		l.log.Debug("kafka client: "+msg, keyvals...)
	}
}

// outOfRangeOnResume starts franz-go's (v1.22.3) info message for a first
// fetch of a partition answered OFFSET_OUT_OF_RANGE: the offset the group
// committed (or the start listed a moment before) is no longer in the log.
// The consumer resets to ConsumeResetOffset, the log start, and records
// between were never processed: the broker deleted them first (retention;
// records whose timestamps are older than retention.ms go at the next
// retention check however recently they were written), or the topic was
// deleted and recreated. Exactly-once holds for what is processed, but the
// app's outputs silently miss those records; franz-go logs it at info
// level, which this logger keeps at debug, so it would leave no trace.
const outOfRangeOnResume = "received OFFSET_OUT_OF_RANGE on the first fetch"

const outOfRangeMeaning = "the partition's log no longer holds this offset (records deleted by retention before they were processed, or the topic recreated); consumption resumes at the log start"

// recoverable returns the error of a franz-go error message when it is
// one the client or the app recovers from by itself: a connection that
// died or timed out (a network partition, a broker restart: franz-go
// dials again and retries), or this member removed from the group (its
// session expired while it was frozen or cut off, or a peer removed it)
// or its producer fenced or timed out, so its session restarts, rejoins
// and restores. franz-go logs them at error level ("group manage loop
// errored", "unable to request api versions", "fatal InitProducerID
// error"); alerting on them would page someone for a recovery the app's
// own warnings ("restarting session", "retrying after a transient Kafka
// error") already describe. What does not recover shows as the app's own
// errors: a fence that repeats because two processes share an instance id
// stops the app, and Run fails when the brokers stay unreachable at start.
func recoverable(keyvals []any) error {
	for i := 1; i < len(keyvals); i += 2 {
		err, ok := keyvals[i].(error)
		if !ok {
			continue
		}
		if retry.Transient(err) {
			return err
		}
		for _, churn := range []error{kerr.UnknownMemberID, kerr.IllegalGeneration, kerr.RebalanceInProgress,
			kerr.FencedInstanceID, kerr.ProducerFenced, kerr.InvalidProducerEpoch} {
			if errors.Is(err, churn) {
				return err
			}
		}
	}
	return nil
}

const recoverableMeaning = "recovered by itself: a lost or timed-out broker connection is dialled again, and a member removed from the group or a fenced producer restarts its session and rejoins"
