package topology

import (
	"fmt"
	"strings"
)

// Generated names.
//
// Kafka Streams numbers operators with one global counter
// (KSTREAM-AGGREGATE-0000000003), so adding a filter near the top of a
// topology renames every later operator, store and internal topic, and the
// renamed stores lose their state. tidemark derives a generated name from
// the operator's anchor and its distance from it instead:
//
//	<anchor>-<KIND>-<distance>
//
// The anchor is the nearest upstream operator the user named (Named), or
// else the source topic(s) the chain starts from. Distance counts operators
// along the first-parent path from the anchor. So adding or removing an
// operator renames only generated names downstream of it and before the next
// named operator on the same chain; other chains, other sources and anything
// past a named operator keep their names. Operators with several inputs
// (Merge, joins) follow their first (receiver) input. Siblings that would get
// the same name (two filters on one stream) get "-2", "-3", ... in creation
// order.
//
// Stores of unnamed operators are "<operator>-STORE"; repartition topics
// "<app>-<operator>-repartition". Name every stateful operator in production
// (RequireNamedState enforces it).
func (b *Builder) nodeName(op string, parents []*node, explicit string) (name, chain string, pos int) {
	if explicit != "" {
		return explicit, explicit, 0
	}
	if len(parents) == 0 {
		// Sources are named after their topics by the caller.
		panic("topology: unnamed node without parents")
	}
	chain, pos = parents[0].chain, parents[0].pos+1
	base := fmt.Sprintf("%s-%s-%d", chain, op, pos)
	name = base
	for i := 2; b.names[name] != nil; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return name, chain, pos
}

// sourceName is the default name of a source reading topics.
func sourceName(topics []string) string { return strings.Join(topics, "+") + "-SOURCE" }
