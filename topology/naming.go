package topology

import (
	"fmt"
	"slices"
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
// order. That cannot be stable: such siblings differ in nothing but their
// order, so declaring a new one before an existing one gives the new one
// the existing one's name, store and changelog, and the existing one the
// next number (and fresh, empty state). OrderNumberedState lists the
// operators whose store or repartition topic is named so, and the App
// warns of them at startup.
//
// Stores of unnamed operators are "<operator>-STORE"; repartition topics
// "<app>-<operator>-repartition". Name every stateful operator in production
// (RequireNamedState enforces it).
//
// numbered says whether a sibling already holds the generated base name:
// then both names depend on declaration order, and the holder is marked
// too.
func (b *Builder) nodeName(op string, parents []*node, explicit string) (name, chain string, pos int, numbered bool) {
	if explicit != "" {
		return explicit, explicit, 0, false
	}
	if len(parents) == 0 {
		// Sources are named after their topics by the caller.
		panic("topology: unnamed node without parents")
	}
	chain, pos = parents[0].chain, parents[0].pos+1
	base := fmt.Sprintf("%s-%s-%d", chain, op, pos)
	name = base
	if holder := b.names[base]; holder != nil {
		holder.numbered, numbered = true, true
	}
	for i := 2; b.names[name] != nil; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return name, chain, pos, numbered
}

// OrderNumberedState lists, sorted, the operators whose generated store or
// repartition topic name depends on declaration order: unnamed siblings of
// one kind on one anchor (two Counts of one grouped stream). Declaring
// another such sibling before them renames their state; name them with
// Named to keep it. The App logs them as a warning when it starts.
func (t *Topology) OrderNumberedState() []string {
	var out []string
	for _, n := range t.nodes {
		if n.numbered && n.namesState(t.app) {
			out = append(out, n.name)
		}
	}
	slices.Sort(out)
	return out
}

// namesState says whether n's name is in the name of a store it owns
// ("<name>-STORE...") or of the repartition topic it writes.
func (n *node) namesState(app string) bool {
	for _, s := range n.stores {
		if strings.HasPrefix(s, n.name+"-STORE") {
			return true
		}
	}
	return n.kind == KindSink && n.internal && slices.Contains(n.topics, app+"-"+n.name+"-repartition")
}

// sourceName is the default name of a source reading topics.
func sourceName(topics []string) string { return strings.Join(topics, "+") + "-SOURCE" }
