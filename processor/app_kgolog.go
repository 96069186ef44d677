package processor

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoLogger passes franz-go's warnings and errors to the app's logger, and
// counts the produce retries franz-go otherwise keeps to itself: a batch the
// broker turned away with a retriable error (CONCURRENT_TRANSACTIONS while
// the previous transaction's markers are still being written, a leader
// move) is retried after a metadata refresh, which franz-go announces at
// info level only. Those retries are what a slow commit's flush usually
// waited on; the counter makes them visible next to commit latency.
type kgoLogger struct {
	log     *slog.Logger
	retries prometheus.Counter
}

func (l *kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l *kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	switch level {
	case kgo.LogLevelError:
		l.log.Error("kafka client: "+msg, keyvals...)
	case kgo.LogLevelWarn:
		l.log.Warn("kafka client: "+msg, keyvals...)
	default:
		if strings.HasPrefix(msg, "metadata update triggered") && strings.Contains(fmt.Sprint(keyvals...), "retry batches") {
			l.retries.Inc()
		}
		l.log.Debug("kafka client: "+msg, keyvals...)
	}
}
