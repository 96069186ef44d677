package task

import (
	"math"
	"slices"

	"github.com/tidemark-streams/tidemark/topology"
)

// OutputWatermark is a task's output watermark for one sink: every record
// with timestamp ≤ Ms the task will ever write to the sink has been
// produced (math.MinInt64: no claim). Idle says no active input bounds it
// (see topology.OutputBound.Eval): Ms is then how far the task got on its
// own, and the runtime lets it follow the other tasks of the sink.
type OutputWatermark struct {
	Ms   int64
	Idle bool
}

// OutputWatermarks evaluates bounds, the output bounds of the task's
// sub-topology (topology.OutputBounds), against the task's input stream
// times and operator clocks; idle says which of its input topics the
// runtime declared idle (nil: none). It fails when the task keeps an
// operator clock the bounds do not know: an operator the derivation misses
// could emit anything, so no claim is safe.
func (t *Task) OutputWatermarks(bounds topology.SubTopologyBounds, idle func(topic string) bool) (map[string]OutputWatermark, error) {
	for name := range t.clocks {
		if !slices.Contains(bounds.Clocks, name) {
			return nil, errorf(t, "operator clock %q is not in the output bounds of sub-topology %d", name, t.id.SubTopology)
		}
	}
	env := taskBoundEnv{t: t, idle: idle}
	out := make(map[string]OutputWatermark, len(bounds.Sinks))
	for sink, b := range bounds.Sinks {
		wm, isIdle := b.Eval(env)
		out[sink] = OutputWatermark{Ms: wm, Idle: isIdle}
	}
	return out, nil
}

// FollowingWatermark is the task's watermark for sink when its idle inputs
// follow s, the watermark the sink's other tasks reached (see
// topology.OutputBound.Following).
func (t *Task) FollowingWatermark(bounds topology.SubTopologyBounds, sink string, idle func(topic string) bool, s int64) int64 {
	b, ok := bounds.Sinks[sink]
	if !ok {
		return math.MinInt64
	}
	return b.Following(taskBoundEnv{t: t, idle: idle}, s)
}

type taskBoundEnv struct {
	t    *Task
	idle func(string) bool
}

func (e taskBoundEnv) InputTime(topic string) (int64, bool) {
	in := e.t.inputs[topic]
	if in == nil {
		return -1, false
	}
	return in.time, e.idle != nil && e.idle(topic)
}

func (e taskBoundEnv) OperatorClock(name string) int64 {
	if c, ok := e.t.clocks[name]; ok {
		return c()
	}
	return -1
}
