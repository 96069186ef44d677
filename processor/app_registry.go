package processor

import (
	"errors"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
)

// errRegistryWait marks a redo because a serde could not reach its schema
// registry (serde.RegistryUnavailable).
var errRegistryWait = errors.New("schema registry unavailable")

// registryOutage is err made a redo after a pause when a serde could not
// reach its schema registry, nil when err is anything else. The record
// was not judged, so no handler may skip or dead-letter it; and a
// registry being restarted or redeployed must not stop the app, so the
// transaction is aborted and redone, with a growing pause, until the
// registry answers. A refusal (bad credentials, an incompatible schema)
// is not an outage: it stays fatal.
func registryOutage(err error) error {
	if !serde.RegistryUnavailable(err) {
		return nil
	}
	return &registryOutageError{err}
}

// registryOutageError is both errRegistryWait and errRedo, so every path
// that redoes a transaction for a rejected output redoes it for this too,
// while its text names the registry, not a rejected output.
type registryOutageError struct{ cause error }

func (e *registryOutageError) Error() string { return "processor: " + e.cause.Error() }
func (e *registryOutageError) Unwrap() error { return e.cause }
func (e *registryOutageError) Is(target error) bool {
	return target == errRegistryWait || target == errRedo
}

// registryPause is the pause before the next redo of a registry outage:
// 200 ms doubling to 5 s over the outage (registryWaits counts its redos;
// a batch processed in full ends it).
func (s *session) registryPause(err error) time.Duration {
	s.registryWaits++
	d := registryBackoff(s.registryWaits)
	s.app.log.Warn("schema registry unavailable: the transaction is aborted and redone after a pause",
		"thread", s.th.index, "attempt", s.registryWaits, "pause", d, "err", registryCause(err))
	return d
}

// registryCause is the serde's error inside a registry outage's redo.
func registryCause(err error) error {
	if e, ok := errors.AsType[*registryOutageError](err); ok {
		return e.cause
	}
	return err
}

// registryBackoff is the pause before attempt n (from 1) of an outage:
// 200 ms doubling to 5 s.
func registryBackoff(n int) time.Duration {
	return min(100*time.Millisecond<<min(n, 6), 5*time.Second)
}
