package changelog

import (
	"context"
	"log/slog"
)

// logRebuild says why a restore wipes a store partition and reads its
// changelog from the log start. Without local state that is routine (a
// first start, a partition that moved here) and logged at Info. Local
// state that is thrown away, because it does not fit the changelog any
// more (the topic was recreated, its offsets are outside the log, it is
// older than delete.retention.ms), is a warning naming the store, the
// partition and the offsets: an operator deleted or truncated a changelog,
// or the instance was stopped for too long, and the rebuild may take long.
// Before, both were Info lines alike.
func logRebuild(log *slog.Logger, t RestoreTarget, hadState bool, applied int64, reason string, start, end int64) {
	level := slog.LevelInfo
	msg := "rebuilding store from its changelog"
	attrs := []any{"store", t.Store, "partition", t.Partition, "topic", t.Topic, "reason", reason, "from", start, "to", end}
	if hadState {
		level = slog.LevelWarn
		msg = "local state does not fit its changelog: wiping the store partition and rebuilding it from the changelog"
		attrs = append(attrs, "applied_offset", applied)
	}
	log.Log(context.Background(), level, msg, attrs...)
}
