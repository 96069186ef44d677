package topology

import (
	"fmt"
	"slices"
	"strings"
)

// DOT renders the description as a Graphviz digraph: one cluster per
// sub-topology holding its nodes (labelled with their kind and operator)
// and the stores they use (cylinders); topics as boxes outside the
// clusters, external topics solid and internal ones (repartition and
// changelog topics) dashed and grey. Edges run in processing order: topic
// to source, node to successor, sink to topic; a store is joined to the
// processors that use it by an undirected dashed edge and to its changelog
// by a dotted one. Clusters come in sub-topology order, nodes in
// description order, topics and stores sorted by name, so the output is
// stable. Every id is quoted and prefixed with what it names ("topic:",
// "node:", "store:"), so a topic and a node may share a name.
//
// Render it with `dot -Tsvg`, or see `tidemark describe --format dot`.
func (d Description) DOT() string {
	internal := map[string]string{} // topic → "repartition" or "changelog"
	for _, t := range d.RepartitionTopics {
		internal[t] = "repartition"
	}
	storeKind := map[string]string{}
	var changelogs []StoreDescription
	for _, s := range d.Stores {
		storeKind[s.Name] = s.Kind
		if s.Changelog != "" {
			internal[s.Changelog] = "changelog"
			changelogs = append(changelogs, s)
		}
	}
	slices.SortFunc(changelogs, func(a, b StoreDescription) int { return strings.Compare(a.Name, b.Name) })

	// Every topic a node names or a store logs to, and the sub-topology
	// whose processors first use each store.
	var topics []string
	addTopic := func(t string) {
		if !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	storeSub := map[string]int{}
	for _, st := range d.SubTopologies {
		for _, n := range st.Nodes {
			for _, t := range n.Topics {
				addTopic(t)
			}
			for _, s := range n.Stores {
				if _, ok := storeSub[s]; !ok {
					storeSub[s] = st.ID
				}
			}
		}
	}
	for _, s := range changelogs {
		addTopic(s.Changelog)
	}
	slices.Sort(topics)

	var b strings.Builder
	b.WriteString("digraph \"topology\" {\n")
	b.WriteString("\trankdir=LR;\n")
	b.WriteString("\tnode [fontname=\"Helvetica\", fontsize=10];\n")
	b.WriteString("\tedge [fontname=\"Helvetica\", fontsize=9];\n")

	for _, t := range topics {
		if kind, ok := internal[t]; ok {
			fmt.Fprintf(&b, "\t%s [shape=box, style=\"rounded,dashed,filled\", fillcolor=\"#eeeeee\", color=\"#777777\", label=%s];\n",
				dotID("topic", t), dotLabel(t, "("+kind+" topic)"))
			continue
		}
		fmt.Fprintf(&b, "\t%s [shape=box, style=\"rounded,filled\", fillcolor=\"#dbeafe\", label=%s];\n",
			dotID("topic", t), dotLabel(t, "(topic)"))
	}

	for _, st := range d.SubTopologies {
		fmt.Fprintf(&b, "\tsubgraph %s {\n", dotQuote(fmt.Sprintf("cluster_%d", st.ID)))
		fmt.Fprintf(&b, "\t\tlabel=%s;\n", dotQuote(fmt.Sprintf("Sub-topology %d", st.ID)))
		b.WriteString("\t\tstyle=rounded;\n")
		for _, n := range st.Nodes {
			kind := n.Kind.String()
			if n.Kind == KindProcessor && n.Operator != "" {
				kind += " " + n.Operator
			}
			shape := "box"
			switch n.Kind {
			case KindSource:
				shape = "invhouse"
			case KindSink:
				shape = "house"
			}
			fmt.Fprintf(&b, "\t\t%s [shape=%s, label=%s];\n", dotID("node", n.Name), shape, dotLabel(n.Name, kind))
		}
		var stores []string
		for s, sub := range storeSub {
			if sub == st.ID {
				stores = append(stores, s)
			}
		}
		slices.Sort(stores)
		for _, s := range stores {
			fmt.Fprintf(&b, "\t\t%s [shape=cylinder, style=filled, fillcolor=\"#fef3c7\", label=%s];\n",
				dotID("store", s), dotLabel(s, storeLabel(storeKind[s])))
		}
		b.WriteString("\t}\n")
	}

	// Stores the description lists but no node uses.
	var orphans []string
	for _, s := range d.Stores {
		if _, ok := storeSub[s.Name]; !ok {
			orphans = append(orphans, s.Name)
		}
	}
	slices.Sort(orphans)
	for _, s := range orphans {
		fmt.Fprintf(&b, "\t%s [shape=cylinder, style=filled, fillcolor=\"#fef3c7\", label=%s];\n",
			dotID("store", s), dotLabel(s, storeLabel(storeKind[s])))
	}

	for _, st := range d.SubTopologies {
		for _, n := range st.Nodes {
			id := dotID("node", n.Name)
			if n.Kind == KindSource {
				for _, t := range n.Topics {
					fmt.Fprintf(&b, "\t%s -> %s;\n", dotID("topic", t), id)
				}
			}
			for _, s := range n.Successors {
				fmt.Fprintf(&b, "\t%s -> %s;\n", id, dotID("node", s))
			}
			if n.Kind == KindSink {
				for _, t := range n.Topics {
					fmt.Fprintf(&b, "\t%s -> %s;\n", id, dotID("topic", t))
				}
			}
			for _, s := range n.Stores {
				fmt.Fprintf(&b, "\t%s -> %s [dir=none, style=dashed];\n", id, dotID("store", s))
			}
		}
	}
	for _, s := range changelogs {
		fmt.Fprintf(&b, "\t%s -> %s [style=dotted];\n", dotID("store", s.Name), dotID("topic", s.Changelog))
	}
	b.WriteString(d.dotGlobals())
	b.WriteString("}\n")
	return b.String()
}

func storeLabel(kind string) string {
	if kind == "" {
		return "(store)"
	}
	return "(" + kind + " store)"
}

// dotID is the quoted id of a graph element: what it names, a colon, and
// its name.
func dotID(what, name string) string { return dotQuote(what + ":" + name) }

// dotLabel is a quoted label of lines.
func dotLabel(lines ...string) string {
	for i, l := range lines {
		lines[i] = dotEscape(l)
	}
	return `"` + strings.Join(lines, `\n`) + `"`
}

func dotQuote(s string) string { return `"` + dotEscape(s) + `"` }

// dotEscape escapes s for a DOT double-quoted string.
func dotEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
