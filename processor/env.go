package processor

import (
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// The methods here implement topology.TaskEnv: what the instantiated
// sub-topology calls back into.
var _ topology.TaskEnv = (*Task)(nil)

func (t *Task) TaskID() topology.TaskID { return t.id }

func (t *Task) Store(name string) (store.Store, error) {
	s, ok := t.storeByName[name]
	if !ok {
		return nil, errorf(t, "%w: %q", topology.ErrUnknownStore, name)
	}
	return s, nil
}

func (t *Task) ObserveTimestamp(ts int64) {
	if t.cur != nil && ts > t.cur.time {
		t.cur.time = ts
	}
	if ts > t.streamTime {
		t.streamTime = ts
	}
}

func (t *Task) WallClock() int64 { return t.wall }

func (t *Task) Meta() (topology.RecordMeta, bool) {
	if !t.inRecord {
		return topology.RecordMeta{}, false
	}
	return t.meta, true
}

func (t *Task) Emit(rec *topology.OutputRecord) error {
	t.metrics.Emitted++
	rec.InputTimestamp, rec.StreamTime = -1, t.streamTime
	if t.inRecord {
		rec.InputTimestamp = t.inputTS
	}
	if err := t.cfg.Output.Collect(t.id, rec); err != nil {
		return errorf(t, "collect output for %q: %w", rec.Topic, err)
	}
	return nil
}

func (t *Task) PartitionCount(topic string) (int32, error) {
	if t.cfg.PartitionCount == nil {
		return 1, nil
	}
	return t.cfg.PartitionCount(topic)
}

// WindowsClosed implements topology.WindowCloser.
func (t *Task) WindowsClosed(n int) { t.metrics.WindowsClosed += int64(n) }

var _ topology.WindowCloser = (*Task)(nil)

func (t *Task) Dropped(node string, reason topology.DropReason) {
	t.metrics.record(node, reason)
}
