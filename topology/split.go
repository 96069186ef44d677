package topology

// Splitter routes each record of a stream to the first branch whose
// predicate matches (Kafka Streams' split().branch()). Records matching no
// branch are dropped unless Default was called.
type Splitter[K, V any] struct {
	s     Stream[K, V]
	n     *node
	op    *splitOp[K, V]
	final bool
}

// Split starts routing s into branches.
func (s Stream[K, V]) Split(opts ...Option) *Splitter[K, V] {
	op := &splitOp[K, V]{}
	n := s.add("SPLIT", opts, op)
	return &Splitter[K, V]{s: s, n: n, op: op}
}

// Branch adds a branch taking the records that match pred and no earlier
// branch.
func (sp *Splitter[K, V]) Branch(pred func(K, V) bool, opts ...Option) Stream[K, V] {
	return sp.branch(pred, opts)
}

// Default adds the branch taking records no other branch matched. It must
// be the last branch.
func (sp *Splitter[K, V]) Default(opts ...Option) Stream[K, V] {
	return sp.branch(nil, opts)
}

func (sp *Splitter[K, V]) branch(pred func(K, V) bool, opts []Option) Stream[K, V] {
	n := sp.s.b.addNode(KindProcessor, "BRANCH", []*node{sp.n}, newOpConfig(opts),
		opFunc[K, V, K, V](func(_ *opEnv, next forwarder[K, V]) (receiver[K, V], error) {
			return receiverFunc[K, V](next.forward), nil
		}))
	if sp.final {
		sp.s.b.fail(errorf(n.name, "%w: branch added after the default branch of %q", ErrInvalidTopology, sp.n.name))
	}
	sp.final = pred == nil
	sp.op.preds = append(sp.op.preds, pred)
	out := sp.s
	out.n = n
	return out
}

type splitOp[K, V any] struct {
	preds []func(K, V) bool // nil: default branch
}

func (o *splitOp[K, V]) instantiate(env *opEnv, children []any) (any, error) {
	inst := &splitInst[K, V]{preds: o.preds}
	for i, c := range children {
		r, ok := c.(receiver[K, V])
		if !ok {
			return nil, errorf(env.node, "%w: branch %d does not accept %T", ErrInvalidTopology, i, Record[K, V]{})
		}
		inst.branches = append(inst.branches, r)
	}
	return inst, nil
}

type splitInst[K, V any] struct {
	preds    []func(K, V) bool
	branches []receiver[K, V]
}

func (s *splitInst[K, V]) process(r Record[K, V]) error {
	for i, p := range s.preds {
		if p == nil || p(r.Key, r.Value) {
			return s.branches[i].process(r)
		}
	}
	return nil
}
