package processor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tidemark-streams/tidemark/changelog"
)

// errInternalCount is wrapped by the error of a start that finds an
// internal topic with another partition count than the topology needs
// (changelog.ErrChangelogMismatch when a changelog is among them).
var errInternalCount = errors.New("an internal topic's partition count does not match the topology")

// checkInternalCounts fails, before place creates anything, when an
// internal topic that exists has another partition count than the layout
// gives it: most often an input topic's partitions were added, and the
// changelogs and repartition topics still have the old count. State
// cannot move between partition counts; the error says which inputs set
// the count and what to do. Topics that do not exist, or show no
// partitions yet (created a moment ago by another instance), are left to
// the ensure functions, which wait for them.
func (a *App) checkInternalCounts(ctx context.Context, l *layout, topics []changelog.Topic, logSub map[string]int) error {
	if len(topics) == 0 {
		return nil
	}
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = t.Name
	}
	details, err := a.adm.ListTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("processor: describe internal topics: %w", err)
	}
	var errs []string
	sentinel := errInternalCount
	for _, t := range topics {
		d, ok := details[t.Name]
		if !ok || d.Err != nil || len(d.Partitions) == 0 {
			continue
		}
		got := int32(len(d.Partitions))
		if got == t.Partitions {
			continue
		}
		why := ""
		if i, isLog := logSub[t.Name]; isLog {
			sentinel = changelog.ErrChangelogMismatch // as changelog.EnsureTopics says it
			why = " (its tasks' count, from the inputs " + a.inputCounts(l, i) + ")"
		}
		errs = append(errs, fmt.Sprintf("internal topic %s has %d partitions, the topology needs %d%s", t.Name, got, t.Partitions, why))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("processor: %w: %s; if an input topic's partitions were changed, state cannot follow: restore its count, or reset the application (tidemark reset) and reprocess; nothing was created or changed",
		sentinel, strings.Join(errs, "; "))
}

// inputCounts lists the user topics feeding sub-topology i, directly or
// through repartition topics, with their partition counts:
// "orders (4), customers (4)".
func (a *App) inputCounts(l *layout, i int) string {
	subs := a.topo.SubTopologies()
	var parts []string
	seen := map[int]bool{}
	var walk func(i int)
	walk = func(i int) {
		if seen[i] {
			return
		}
		seen[i] = true
		for _, src := range subs[i].SourceTopics {
			if !a.topo.IsRepartitionTopic(src) {
				if p := fmt.Sprintf("%s (%d)", src, l.partitions[src]); !slices.Contains(parts, p) {
					parts = append(parts, p)
				}
				continue
			}
			for j, sub := range subs {
				if slices.Contains(sub.SinkTopics, src) {
					walk(j)
				}
			}
		}
	}
	walk(i)
	return strings.Join(parts, ", ")
}
