package topology

import "slices"

// CopartitionedCounts applies Kafka Streams' rule for sizing the
// repartition topics of a co-partition group (CopartitionedTopicsEnforcer)
// to the groups read by sub-topology sub, once count knows the partition
// count of its inputs (a repartition topic's from the sub-topology writing
// it). In each such group, a repartition topic without a fixed count
// (WithPartitions) that is not SizedByReader takes:
//   - the count of the group's user topics, when it has any;
//   - else the fixed count of a repartition topic of the group that has
//     one;
//   - else the largest count among the group's repartition topics.
//
// It returns the counts to give such topics (those that change); the
// co-partitioning itself is still checked by CheckCopartitioning, which
// reports user topics, or fixed counts, that differ.
func (t *Topology) CopartitionedCounts(sub int, count func(topic string) (int32, bool)) map[string]int32 {
	if sub < 0 || sub >= len(t.subs) {
		return nil
	}
	sources := t.subs[sub].SourceTopics
	repart := map[string]InternalTopic{}
	for _, r := range t.repart {
		repart[r.Name] = r
	}
	out := map[string]int32{}
	for _, g := range t.copart {
		if len(g.Topics) == 0 || !allIn(g.Topics, sources) {
			continue
		}
		var user, fixed, most int32
		for _, topic := range g.Topics {
			n, ok := count(topic)
			r, isRep := repart[topic]
			switch {
			case !isRep:
				if ok {
					user = max(user, n)
				}
			case r.Partitions > 0:
				if fixed == 0 {
					fixed = r.Partitions
				}
			case ok && !r.SizedByReader:
				most = max(most, n)
			}
		}
		target := user
		if target == 0 {
			target = fixed
		}
		if target == 0 {
			target = most
		}
		if target == 0 {
			continue
		}
		for _, topic := range g.Topics {
			r, isRep := repart[topic]
			if !isRep || r.Partitions > 0 || r.SizedByReader {
				continue
			}
			if n, ok := count(topic); !ok || n != target {
				out[topic] = target
			}
		}
	}
	return out
}

func allIn(topics, set []string) bool {
	for _, topic := range topics {
		if !slices.Contains(set, topic) {
			return false
		}
	}
	return true
}
