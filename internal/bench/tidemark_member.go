package bench

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/processor"
)

// tidemarkMemberOptions are the processor options of a tidemark worker
// that runs as one member of a multi-instance group (the failover
// measurement).
func tidemarkMemberOptions(m MemberConfig) ([]processor.Option, error) {
	var opts []processor.Option
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
		return nil, errors.New("standby replicas: this build has no processor.WithStandbyReplicas (branch h-standby)")
	}
	if m.SnapshotURL != "" {
		return nil, errors.New("snapshot store: this build has no processor.WithSnapshotStore (branch h-snap)")
	}
	return opts, nil
}
