package topology

import "slices"

// JoinTable looks each record up in table t: records whose key is in t
// yield joiner(key, value, tableValue) with the stream record's timestamp.
// A versioned table (see Versioned) is looked up as of the record's
// timestamp, any other table at its latest value.
// Table updates do not trigger output. Tombstones are skipped (DropSkipped)
// and records with a null key dropped (DropNullKey). A stream whose key may
// have changed is repartitioned first, through a topic sized like the
// table's source; the stream and the table's source must be co-partitioned.
func (s Stream[K, V]) JoinTable[V2, VR any](t Table[K, V2], joiner func(key K, value V, tableValue V2) VR, opts ...Option) Stream[K, VR] {
	return joinStreamTable(s, t, false, func(k K, v V, tv V2, _ bool) VR { return joiner(k, v, tv) }, opts)
}

// LeftJoinTable is JoinTable that also emits records whose key is not in t,
// as joiner(key, value, zero, false). A record with a null key is emitted
// that way too, keeping its null key, without a lookup (KIP-962).
func (s Stream[K, V]) LeftJoinTable[V2, VR any](t Table[K, V2], joiner func(key K, value V, tableValue V2, found bool) VR, opts ...Option) Stream[K, VR] {
	return joinStreamTable(s, t, true, joiner, opts)
}

func joinStreamTable[K, V, V2, VR any](s Stream[K, V], t Table[K, V2], left bool, joiner func(K, V, V2, bool) VR, opts []Option) Stream[K, VR] {
	cfg := newOpConfig(opts)
	if s.rekeyed {
		// Sized like the table, which it must be co-partitioned with, as
		// Kafka Streams sizes a join's repartition topic.
		s = s.repartition("REPARTITION", sideCfg(cfg, "-left"))
		s.b.sizeByReader(s.n.topics0())
	}
	op := "STREAM-TABLE-JOIN"
	if left {
		op = "STREAM-TABLE-LEFTJOIN"
	}
	src := t.src
	n := s.b.addNode(KindProcessor, op, []*node{s.n}, cfg,
		opFunc[K, V, K, VR](func(env *opEnv, next forwarder[K, VR]) (receiver[K, V], error) {
			g, err := src.newGetter(env)
			if err != nil {
				return nil, err
			}
			return receiverFunc[K, V](func(r Record[K, V]) error {
				if r.Tombstone {
					env.Dropped(env.node, DropSkipped)
					return nil
				}
				if r.NullKey {
					if !left {
						env.Dropped(env.node, DropNullKey)
						return nil
					}
					var zero V2
					return next.forward(Record[K, VR]{Key: r.Key, Value: joiner(r.Key, r.Value, zero, false), Timestamp: r.Timestamp, Headers: r.Headers, NullKey: true})
				}
				tv, found, err := lookup(g, r.Key, r.Timestamp)
				if err != nil {
					return errorf(env.node, "%w", err)
				}
				if !found && !left {
					return nil
				}
				return next.forward(Record[K, VR]{Key: r.Key, Value: joiner(r.Key, r.Value, tv, found), Timestamp: r.Timestamp, Headers: r.Headers})
			}), nil
		}))
	n.nullKeyRelaxed = left
	s.b.checkSame(n, t.b)
	for _, st := range src.storeNames() {
		s.b.connect(n, st)
	}
	s.b.requireCopartition(n.name, s.n, t.n)
	return Stream[K, VR]{b: s.b, n: n, ks: s.ks, vs: serdeAs[VR](s.vs)}
}

// Join joins two tables on their keys: the result has a row for each key in
// both, joiner(key, left, right), timestamped with the later of the two
// rows. Changes on either side update it; the result is computed on read.
func (t Table[K, V]) Join[V2, VR any](other Table[K, V2], joiner func(key K, left V, right V2) VR, opts ...Option) Table[K, VR] {
	return joinTables(t, other, innerJoin, func(k K, l V, _ bool, r V2, _ bool) VR { return joiner(k, l, r) }, opts)
}

// LeftJoin has a row for each key of t, with right found or not.
func (t Table[K, V]) LeftJoin[V2, VR any](other Table[K, V2], joiner func(key K, left V, right V2, rightFound bool) VR, opts ...Option) Table[K, VR] {
	return joinTables(t, other, leftJoin, func(k K, l V, _ bool, r V2, rok bool) VR { return joiner(k, l, r, rok) }, opts)
}

// OuterJoin has a row for each key of either table.
func (t Table[K, V]) OuterJoin[V2, VR any](other Table[K, V2], joiner func(key K, left V, leftFound bool, right V2, rightFound bool) VR, opts ...Option) Table[K, VR] {
	return joinTables(t, other, outerJoin, joiner, opts)
}

// present says whether a join row exists given which sides have a value.
func (k joinKind) present(l, r bool) bool {
	switch k {
	case innerJoin:
		return l && r
	case leftJoin:
		return l
	}
	return l || r
}

func joinTables[K, V, V2, VR any](t Table[K, V], o Table[K, V2], kind joinKind, joiner func(K, V, bool, V2, bool) VR, opts []Option) Table[K, VR] {
	b := t.b
	cfg := newOpConfig(opts)
	ls, rs := t.src, o.src
	this := b.addNode(KindProcessor, "TABLE-"+kind.String()+"-THIS", []*node{t.n}, sideCfg(cfg, "-this"),
		tableJoinSide(rs, kind.present, joiner))
	that := b.addNode(KindProcessor, "TABLE-"+kind.String()+"-OTHER", []*node{o.n}, sideCfg(cfg, "-other"),
		tableJoinSide(ls, func(mine, theirs bool) bool { return kind.present(theirs, mine) },
			func(k K, r V2, rok bool, l V, lok bool) VR { return joiner(k, l, lok, r, rok) }))
	b.checkSame(this, o.b)
	merge := b.addNode(KindProcessor, "TABLE-"+kind.String(), []*node{this, that}, cfg,
		opFunc[K, change[VR], K, change[VR]](func(_ *opEnv, next forwarder[K, change[VR]]) (receiver[K, change[VR]], error) {
			return receiverFunc[K, change[VR]](next.forward), nil
		}))
	stores := slices.Concat(ls.storeNames(), rs.storeNames())
	for _, st := range stores {
		b.connect(this, st)
		b.connect(that, st)
	}
	b.requireCopartition(merge.name, t.n, o.n)
	src := &funcGetters[K, VR]{stores: stores, mk: func(env *opEnv) (getter[K, VR], error) {
		lg, err := ls.newGetter(env)
		if err != nil {
			return nil, err
		}
		rg, err := rs.newGetter(env)
		if err != nil {
			return nil, err
		}
		return getterFunc[K, VR](func(k K) (v VR, ts int64, found bool, err error) {
			lv, lts, lok, err := lg.get(k)
			if err != nil {
				return v, 0, false, err
			}
			rv, rts, rok, err := rg.get(k)
			if err != nil || !kind.present(lok, rok) {
				return v, 0, false, err
			}
			return joiner(k, lv, lok, rv, rok), max(lts, rts), true, nil
		}), nil
	}}
	return Table[K, VR]{b: b, n: merge, ks: t.ks, vs: serdeAs[VR](t.vs), src: src}
}

// tableJoinSide is the node for one input of a table-table join, which sees
// the join as (its row, their row): each change of its row is looked up in
// theirs and yields the joined row's new value, timestamped with the later
// of the two rows, or a delete when the joined row no longer exists, with
// the joined row it replaces (their row with my old one); a change
// yielding neither still goes on, as a delete, when their row exists. present
// and join take the sides in that order; the right input passes them
// swapped back into the join's (left, right) order.
func tableJoinSide[K, VM, VO, VR any](theirs getterSource[K, VO], present func(mine, theirs bool) bool, join func(k K, mine VM, mineFound bool, their VO, theirFound bool) VR) opFunc[K, change[VM], K, change[VR]] {
	return func(env *opEnv, next forwarder[K, change[VR]]) (receiver[K, change[VM]], error) {
		g, err := theirs.newGetter(env)
		if err != nil {
			return nil, err
		}
		return receiverFunc[K, change[VM]](func(r Record[K, change[VM]]) error {
			tv, tts, tok, err := g.get(r.Key)
			if err != nil {
				return errorf(env.node, "look up other table: %w", err)
			}
			c := r.Value
			out := Record[K, change[VR]]{Key: r.Key, Timestamp: r.Timestamp, Headers: r.Headers}
			if tok {
				out.Timestamp = max(out.Timestamp, tts)
			}
			// The old joined row is their row with my old one, as Kafka
			// Streams computes it when old values are sent: GroupBy
			// subtracts it, Filter and the record cache need it to pass
			// a delete on.
			if present(c.hasNew, tok) {
				out.Value.newV, out.Value.hasNew = join(r.Key, c.newV, c.hasNew, tv, tok), true
			}
			if present(c.hasOld, tok) {
				out.Value.oldV, out.Value.hasOld = join(r.Key, c.oldV, c.hasOld, tv, tok), true
			}
			// With their row present a change goes on even when it yields
			// neither a new nor an old joined row: a delete of a key I
			// did not hold, which Kafka Streams' inner and left join
			// forward as Change(null, null), so toStream() writes a
			// tombstone.
			if !tok && !out.Value.hasNew && !out.Value.hasOld {
				return nil
			}
			return next.forward(out)
		}), nil
	}
}
