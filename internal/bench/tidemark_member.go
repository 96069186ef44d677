package bench

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/topology"
)

// tidemarkMemberOptions are the processor options of a tidemark worker
// that runs as one member of a multi-instance group (the failover
// measurement).
func tidemarkMemberOptions(m MemberConfig) ([]processor.Option, error) {
	var opts []processor.Option
	if m.Instance != "" {
		opts = append(opts, processor.WithRestoreListener(restoreReporter{}))
	}
	if m.SessionTimeout > 0 {
		opts = append(opts, func(c *processor.Config) { c.SessionTimeout = m.SessionTimeout })
	}
	if m.HeartbeatInterval > 0 {
		opts = append(opts, processor.WithClientOpts(kgo.HeartbeatInterval(m.HeartbeatInterval)))
	}
	if m.CheckpointMaxInterval > 0 {
		opts = append(opts, func(c *processor.Config) { c.Checkpoint.MaxInterval = m.CheckpointMaxInterval })
	}
	if m.StandbyReplicas > 0 {
		opts = append(opts, processor.WithStandbyReplicas(m.StandbyReplicas))
	}
	if m.RestoreShare > 0 {
		opts = append(opts, processor.WithRestoreShare(m.RestoreShare))
	}
	if m.HTTP {
		opts = append(opts, processor.WithHTTP("127.0.0.1:0"))
	}
	if m.SnapshotURL != "" {
		opts = append(opts, processor.WithSnapshotStore(m.SnapshotURL))
	}
	return opts, nil
}

// restoreReporter reports the worker's finished restores to the harness
// (restore_events.go).
type restoreReporter struct{}

func (restoreReporter) OnRestoreStart(topology.TaskID, string, changelog.TopicPartition, int64, int64) {
}
func (restoreReporter) OnBatchRestored(topology.TaskID, string, changelog.TopicPartition, int64, int64) {
}
func (restoreReporter) OnRestoreEnd(task topology.TaskID, store string, _ changelog.TopicPartition, total int64) {
	printRestored(task.String(), store, total)
}

// OnSnapshotLoaded makes restoreReporter a processor.SnapshotRestoreListener.
func (restoreReporter) OnSnapshotLoaded(task topology.TaskID, _ string, _ int, bytes int64, _ changelog.ChangelogOffsets) {
	printSnapshot(task.String(), bytes)
}

var _ processor.SnapshotRestoreListener = restoreReporter{}
