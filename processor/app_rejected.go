package processor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/retry"
)

// Outputs the broker rejects for good (a record too large for the topic,
// an invalid record, a topic the app may not write) fail the transaction
// that carries them, which is aborted and redone. The broker rejects whole
// batches, and a batch holds the outputs of many input records, so the redo
// runs in isolation: every output is produced on its own and waited for,
// until the next commit. A rejection then names its input record exactly.
// Under at-least-once the abort restarts the session and the isolated redo
// runs in the next one (the flag lives on the thread): the same path.
// After Config.ProductionRetries attempts (with growing pauses, in case an
// operator is fixing the topic or the ACLs) the production-error handler
// decides for that input record: fail, skip, or dead-letter it. A
// dead-letter record that is itself rejected fails the app: there is
// nowhere left to put it, and retrying forever would stall every partition
// behind it while lag grows.

// rejected reports whether a produce error condemns the record itself,
// rather than the transaction or the connection.
func rejected(err error) bool {
	for _, e := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord,
		kerr.InvalidTimestamp, kerr.TopicAuthorizationFailed, kerr.InvalidTopicException,
		kerr.PolicyViolation, kerr.UnsupportedForMessageFormat, kerr.CorruptMessage} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// errRedo asks the loop to abort the open transaction and redo it after a
// pause: an output was rejected, fewer times than ProductionRetries.
var errRedo = errors.New("redo the transaction after a rejected output")

// produceOutput produces a sink or dead-letter record into the open
// transaction: asynchronously, or, while isolating a rejection, on its own
// and waited for.
func (s *session) produceOutput(r *kgo.Record, deadLetter bool) error {
	if s.staging() {
		s.stageOutput(r, deadLetter) // app_pipeline.go
		return nil
	}
	if !s.th.isolate {
		s.producer.Produce(s.ctx, r, s.promiseFn)
		return nil
	}
	res := s.producer.ProduceSync(s.ctx, r)
	s.promise(r, res.FirstErr())
	err := res.FirstErr()
	if err == nil || !rejected(err) {
		return nil // other failures abort at the commit, as usual
	}
	return s.outputRejected(r, deadLetter, err)
}

// outputRejected counts an attempt for the input record whose output r was
// rejected and, once the attempts are spent, asks the handler.
func (s *session) outputRejected(r *kgo.Record, deadLetter bool, cause error) error {
	key := recordKey{topic: "", partition: -1, offset: -1} // a punctuator's output
	if s.cur.raw != nil {
		key = recordKey{s.cur.raw.Topic, s.cur.raw.Partition, s.cur.raw.Offset}
	}
	s.app.poisonMu.Lock()
	rj := s.app.rejectAttempts[key]
	rj.n, rj.thread = rj.n+1, s.th.index
	s.app.rejectAttempts[key] = rj
	n := rj.n
	s.app.poisonMu.Unlock()
	if n < s.app.cfg.ProductionRetries {
		s.app.log.Warn("output rejected; redoing the transaction", "topic", r.Topic, "record", s.curKey(), "attempt", n, "err", cause)
		return fmt.Errorf("%w: %s: %v", errRedo, s.curKey(), cause)
	}
	s.app.poisonMu.Lock()
	delete(s.app.rejectAttempts, key)
	s.app.poisonMu.Unlock()
	switch {
	case deadLetter:
		return fmt.Errorf("processor: %w: the dead-letter topic %s rejects the record from %s after %d attempts: %w",
			errFatal, r.Topic, s.curKey(), n, cause)
	case s.cur.raw == nil:
		return fmt.Errorf("processor: %w: output to %s of a punctuator or a record cache flush rejected after %d attempts: %w", errFatal, r.Topic, n, cause)
	}
	cause = fmt.Errorf("output to %s rejected after %d attempts: %w", r.Topic, n, cause)
	ectx := errorContextOf(s.cur.lt.task.ID(), s.cur.raw, cause, n)
	action := Fail
	if h := s.app.cfg.OnProductionError; h != nil {
		action = h(ectx, cause)
	}
	s.app.metrics.productionErrors.WithLabelValues(action.String()).Inc()
	if action == Fail {
		return fmt.Errorf("processor: %w: record %s: %w", errFatal, s.curKey(), cause)
	}
	return s.poison(ectx, action, "production", cause)
}

// commitRejected counts the transactions in a row that a rejected record
// aborted at commit, cause being the abort's. A rejected output is isolated
// and left to the production-error handler, and a commit follows; but the
// records produced at commit (changelog records: a state value too large
// for its topic, a changelog the app may not write) belong to no input
// record, and redoing their transaction fails the same way every time.
// After ProductionRetries attempts, with growing pauses, the app fails.
func (s *session) commitRejected(cause error) error {
	if !rejected(cause) {
		return nil
	}
	s.th.commitRejects++
	n := s.th.commitRejects
	if n >= s.app.cfg.ProductionRetries {
		s.th.commitRejects = 0
		return fmt.Errorf("processor: %w: a record produced at commit rejected after %d attempts: %w", errFatal, n, cause)
	}
	if n > 1 { // the first is most often an output, isolated at once
		_ = retry.Sleep(s.ctx, min(100*time.Millisecond<<n, 5*time.Second))
	}
	return nil
}

// topicGone fails the app when topic, an output topic the broker said it
// does not host, no longer exists: it was there when the app started
// (App.place), so it was deleted, and every redo would abort the same way
// while the partitions stall. A topic that does exist (a leader moving, a
// broker's metadata behind) is redone as usual.
func (s *session) topicGone(topic string, cause error) error {
	if topic == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	details, err := s.app.adm.ListTopics(ctx, topic)
	if err != nil {
		return nil // cannot tell: redo
	}
	if d, ok := details[topic]; ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return nil
	}
	return fmt.Errorf("processor: %w: %w: output topic %s was deleted: %w", errFatal, ErrMissingTopic, topic, cause)
}

// redoPause is the pause before redoing a transaction after a rejection.
func (s *session) redoPause() time.Duration {
	n := 0
	s.app.poisonMu.Lock()
	defer s.app.poisonMu.Unlock()
	for _, r := range s.app.rejectAttempts {
		n = max(n, r.n)
	}
	return min(100*time.Millisecond<<min(n, 6), 5*time.Second)
}

func (s *session) curKey() string {
	if s.cur.raw == nil {
		return "a punctuator or a record cache flush"
	}
	return recordKey{s.cur.raw.Topic, s.cur.raw.Partition, s.cur.raw.Offset}.String()
}
