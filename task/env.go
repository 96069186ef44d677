package task

import (
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// env is the Task as its instantiated sub-topology sees it: it implements
// topology.TaskEnv and its optional extensions. The callbacks live on this
// unexported view rather than on Task so that a Task's API is what a
// runtime calls (Process, Punctuate, Clocks, ...) and nothing a runtime must
// not call (Emit, ObserveTimestamp, KeepClock, ...).
type env Task

var (
	_ topology.TaskEnv       = (*env)(nil)
	_ topology.WindowCloser  = (*env)(nil)
	_ topology.ClockKeeper   = (*env)(nil)
	_ topology.TenantKeeper  = (*env)(nil)
	_ topology.ContextKeeper = (*env)(nil)
)

func (e *env) task() *Task { return (*Task)(e) }

func (e *env) TaskID() topology.TaskID { return e.id }

func (e *env) Store(name string) (store.Store, error) {
	s, ok := e.storeByName[name]
	if !ok {
		s, ok = e.cfg.GlobalStores[name]
	}
	if !ok {
		return nil, errorf(e.task(), "%w: %q", topology.ErrUnknownStore, name)
	}
	return s, nil
}

func (e *env) ObserveTimestamp(ts int64) {
	if e.cur != nil && ts > e.cur.time {
		e.cur.time = ts
	}
	if ts > e.streamTime {
		e.streamTime = ts
	}
}

func (e *env) StreamTime() int64 { return e.streamTime }

func (e *env) WallClock() int64 { return e.wall }

func (e *env) Meta() (topology.RecordMeta, bool) {
	if !e.inRecord {
		return topology.RecordMeta{}, false
	}
	return e.meta, true
}

func (e *env) Emit(rec *topology.OutputRecord) error {
	e.metrics.Emitted++
	rec.InputTimestamp, rec.StreamTime = -1, e.streamTime
	if e.inRecord {
		rec.InputTimestamp = e.inputTS
	}
	rec.Tenant = e.tenant
	if err := e.cfg.Output.Collect(e.id, rec); err != nil {
		return errorf(e.task(), "collect output for %q: %w", rec.Topic, err)
	}
	return nil
}

func (e *env) PartitionCount(topic string) (int32, error) {
	if e.cfg.PartitionCount == nil {
		return 1, nil
	}
	return e.cfg.PartitionCount(topic)
}

func (e *env) Dropped(node string, reason topology.DropReason) {
	e.metrics.record(node, reason)
}

// SetTenant implements topology.TenantKeeper: the tenant of the record being
// processed, for its outputs; ignored outside a record.
func (e *env) SetTenant(tenant string) {
	if e.inRecord {
		e.tenant = tenant
	}
}

// Tenant implements topology.TenantKeeper.
func (e *env) Tenant() string { return e.tenant }

// WindowsClosed implements topology.WindowCloser.
func (e *env) WindowsClosed(n int) { e.metrics.WindowsClosed += int64(n) }

// RestoredClock implements topology.ClockKeeper.
func (e *env) RestoredClock(name string) int64 {
	if c, ok := e.cfg.Resume.Operators[name]; ok && c >= 0 {
		return c
	}
	return -1
}

// KeepClock implements topology.ClockKeeper.
func (e *env) KeepClock(name string, clock func() int64) { e.clocks[name] = clock }

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

func (e *env) Hold() topology.RecordContext {
	e.held++
	e.heldTenant = e.tenant
	return e.recordContext()
}

func (e *env) recordContext() topology.RecordContext {
	return topology.RecordContext{Meta: e.meta, InputTimestamp: e.inputTS, Tenant: e.tenant, InRecord: e.inRecord}
}

func (e *env) WithRecordContext(c topology.RecordContext, fn func() error) error {
	saved := e.recordContext()
	e.meta, e.inputTS, e.tenant, e.inRecord = c.Meta, c.InputTimestamp, c.Tenant, c.InRecord
	defer func() {
		e.meta, e.inputTS, e.tenant, e.inRecord = saved.Meta, saved.InputTimestamp, saved.Tenant, saved.InRecord
	}()
	return fn()
}
