package topology

import (
	"errors"
	"fmt"
	"slices"
)

// Source is the entry point of an instantiated sub-topology for one topic.
type Source interface {
	// Deliver decodes rec, extracts its event time, reports it with
	// TaskEnv.ObserveTimestamp and forwards the record downstream. It returns
	// the first processing error, wrapped with the operator name.
	Deliver(rec *InputRecord) error
}

// Instance is one task's instantiation of a sub-topology: typed processor
// instances wired to each other, to the task's stores and to its sink.
type Instance struct {
	sources  map[string]Source
	closers  []closer
	flushers []flusher // in topological order
	nodes    []string
}

type initer interface{ init() error }

// Instantiate creates the processors of sub-topology sub for one task. The
// task must be able to serve every store of the sub-topology from env.Store
// before calling it (user processors may read stores in Init). When an
// operator's Init fails, those initialized before it are closed.
func (t *Topology) Instantiate(sub int, env TaskEnv) (*Instance, error) {
	if sub < 0 || sub >= len(t.subs) {
		return nil, fmt.Errorf("%w: no sub-topology %d", ErrInvalidTopology, sub)
	}
	st := t.subs[sub]
	inst := &Instance{sources: map[string]Source{}}
	shared := map[string]any{}
	made := make(map[*node]any, len(st.nodes))
	// Children are always created after their parents, so walking backwards
	// instantiates every child before the nodes that forward to it.
	for i := len(st.nodes) - 1; i >= 0; i-- {
		n := st.nodes[i]
		children := make([]any, len(n.children))
		for j, c := range n.children {
			children[j] = made[c]
		}
		env := &opEnv{TaskEnv: env, node: n.name, shared: shared}
		v, err := n.impl.instantiate(env, children)
		if err != nil {
			return nil, fmt.Errorf("instantiate task %s: %w", env.TaskID(), err)
		}
		made[n] = v
		if n.kind == KindSource {
			src, ok := v.(Source)
			if !ok {
				return nil, errorf(n.name, "%w: source instance %T", ErrInvalidTopology, v)
			}
			for _, topic := range n.topics {
				inst.sources[topic] = src
			}
		}
	}
	for _, n := range st.nodes {
		inst.nodes = append(inst.nodes, n.name)
		if in, ok := made[n].(initer); ok {
			if err := in.init(); err != nil {
				err = fmt.Errorf("init task %s: operator %q: %w", env.TaskID(), n.name, err)
				// Release what the operators initialized so far hold:
				// the caller gets no Instance to Close.
				if cerr := inst.Close(); cerr != nil {
					err = errors.Join(err, fmt.Errorf("close the operators initialized before: %w", cerr))
				}
				return nil, err
			}
		}
		if c, ok := made[n].(closer); ok {
			inst.closers = append(inst.closers, c)
		}
		if f, ok := made[n].(flusher); ok {
			inst.flushers = append(inst.flushers, f)
		}
	}
	return inst, nil
}

// Source returns the entry point for topic.
func (i *Instance) Source(topic string) (Source, bool) {
	s, ok := i.sources[topic]
	return s, ok
}

// Topics are the topics the instance reads, sorted.
func (i *Instance) Topics() []string {
	out := make([]string, 0, len(i.sources))
	for t := range i.sources {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Close closes user processors in topological order and returns every
// error.
func (i *Instance) Close() error {
	var errs []error
	for _, c := range i.closers {
		if err := c.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
