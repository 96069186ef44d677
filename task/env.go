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

var _ topology.ClockKeeper = (*Task)(nil)

// RestoredClock implements topology.ClockKeeper.
func (t *Task) RestoredClock(name string) int64 {
	if c, ok := t.cfg.Resume.Operators[name]; ok && c >= 0 {
		return c
	}
	return -1
}

// KeepClock implements topology.ClockKeeper.
func (t *Task) KeepClock(name string, clock func() int64) { t.clocks[name] = clock }

// Clocks snapshots the task's clocks (those still at -1 left out): what a
// commit stores so that the next task for this partition resumes from it.
func (t *Task) Clocks() Clocks {
	c := Clocks{Inputs: map[string]int64{}, Operators: map[string]int64{}}
	for _, in := range t.inputList {
		if in.time >= 0 {
			c.Inputs[in.topic] = in.time
		}
	}
	for name, clock := range t.clocks {
		if v := clock(); v >= 0 {
			c.Operators[name] = v
		}
	}
	return c
}
