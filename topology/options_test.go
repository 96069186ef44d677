package topology_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/internal/buildcheck"
)

// TestOperatorOptionsAreTyped compiles calls the way a user would: Named
// and each option on the operators it applies to compile; an option on an
// operator it does not apply to is a compile error, not a Build error.
func TestOperatorOptionsAreTyped(t *testing.T) {
	valid := []string{
		`b.Stream("a", str, str, topology.Named("n1"), topology.SkipUndecodable(), topology.WithTimestampExtractor(func(r topology.Record[string, string], _ int64) int64 { return r.Timestamp }))`,
		`b.Stream("a2", str, str, topology.WithTenant(func(k, _ string) string { return k }))`,
		`s.Filter(keep, topology.Named("n2")).Peek(func(string, string) {}, topology.Named("n3")).To("o", topology.Named("n4"), topology.WithPartitioner(func(string, string, string, int32) int32 { return 0 }))`,
		`s.Repartition(topology.Named("n5"), topology.WithPartitions(3), topology.WithPartitioner(func(string, string, string, int32) int32 { return 0 }))`,
		`s.GroupBy(func(k, _ string) string { return k }, str, topology.WithPartitions(2)).Count(topology.Named("n6"), topology.WithoutChangelog())`,
		`s.GroupByKey(topology.Named("n7")).Reduce(func(a, _ string) string { return a }, topology.WithChangelogConfig(map[string]string{"segment.ms": "60000"}))`,
		`topology.WindowedBy(g, topology.TumblingWindows(time.Minute, 0)).Count(topology.Named("n8"), topology.EmitFinal(), topology.WithRetention(time.Hour), topology.WithoutChangelog())`,
		`topology.SessionWindowedBy(g, topology.SessionWindowsWithGap(time.Minute, 0)).Count(topology.Named("n9"), topology.EmitFinal(), topology.WithRetention(time.Hour))`,
		`topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(time.Minute, 0)).Count(topology.Named("n10"), topology.EmitFinal(), topology.WithoutChangelog())`,
		`s.Join(s, func(_, l, _ string) string { return l }, topology.JoinWindowsOf(time.Minute, 0), topology.Named("n11"), topology.WithoutChangelog())`,
		`s.JoinTable(tab, func(_, v, _ string) string { return v }, topology.Named("n12"))`,
		`s.ToTable(topology.Named("n13"), topology.WithoutChangelog()).Filter(func(_, _ string) bool { return true }, topology.Named("n14"))`,
		`b.Table("t2", str, str, topology.Named("n15"), topology.WithoutChangelog())`,
		`s.Process(func() topology.Processor[string, string, string, string] { return nil }, topology.Named("n16"), topology.WithStores("st"))`,
		`s.Split(topology.Named("n17")).Branch(keep, topology.Named("n18"))`,
		`tab.GroupBy(func(k, v string) (string, string) { return k, v }, str, str, topology.WithPartitions(2)).Count(topology.Named("n19"))`,
		`s.Deduplicate(func(_, v string) string { return v }, time.Hour, topology.Named("n20"), topology.WithoutChangelog(), topology.WithChangelogConfig(nil))`,
		`tab.Suppress(topology.UntilTimeLimit(time.Second, topology.BufferConfig{MaxRecords: 10}), topology.Named("n21"), topology.WithoutChangelog(), topology.WithChangelogConfig(nil))`,
	}
	wrong := []struct{ call, missing string }{
		{`s.GroupByKey().Count(topology.EmitFinal())`, "storeOption"},
		{`s.GroupByKey().Count(topology.WithRetention(time.Hour))`, "slidingWindowOption"},
		{`topology.SlidingWindowedBy(g, topology.SlidingWindowsWithDiff(time.Minute, 0)).Count(topology.WithRetention(time.Hour))`, "slidingWindowOption"},
		{`s.Filter(keep, topology.WithoutChangelog())`, "Option"},
		{`s.MapValues(func(_, v string) string { return v }, topology.EmitFinal())`, "Option"},
		{`s.To("o", topology.WithPartitions(3))`, "sinkOption"},
		{`s.To("o", topology.SkipUndecodable())`, "SinkOption"},
		{`s.Filter(keep, topology.WithTimestampExtractor(func(r topology.Record[string, string], _ int64) int64 { return 0 }))`, "Option"},
		{`b.Table("t3", str, str, topology.SkipUndecodable())`, "StoreOption"},
		{`b.Stream("c", str, str, topology.WithoutChangelog())`, "SourceOption"},
		{`s.GroupByKey().Aggregate(func() string { return "" }, func(_, _, a string) string { return a }, str, topology.WithStores("st"))`, "StoreOption"},
		{`s.Repartition(topology.WithChangelogConfig(nil))`, "RepartitionOption"},
		{`s.Join(s, func(_, l, _ string) string { return l }, topology.JoinWindowsOf(time.Minute, 0), topology.EmitFinal())`, "storeOption"},
		{`s.JoinTable(tab, func(_, v, _ string) string { return v }, topology.WithoutChangelog())`, "Option"},
		{`s.Process(func() topology.Processor[string, string, string, string] { return nil }, topology.WithoutChangelog())`, "ProcessOption"},
		{`s.GroupByKey(topology.WithoutChangelog())`, "RepartitionOption"},
		{`s.Deduplicate(func(_, v string) string { return v }, time.Hour, topology.WithRetention(time.Hour))`, "slidingWindowOption"},
		{`s.Deduplicate(func(_, v string) string { return v }, time.Hour, topology.WithPartitions(3))`, "StoreOption"},
		{`tab.Suppress(topology.UntilTimeLimit(time.Second, topology.BufferConfig{}), topology.EmitFinal())`, "storeOption"},
	}
	var src strings.Builder
	src.WriteString(`package main

import (
	"time"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

var _ = time.Second

func main() {
	str := serde.String()
	keep := func(_, _ string) bool { return true }
	b := topology.NewBuilder("app")
	s := b.Stream("in", str, str)
	g := s.GroupByKey()
	tab := b.Table("t", str, str)
	_, _, _, _ = s, g, tab, keep
`)
	const first = 20 // the line of the first call below
	lines := append(append([]string{}, valid...), func() []string {
		var w []string
		for _, c := range wrong {
			w = append(w, c.call)
		}
		return w
	}()...)
	for _, l := range lines {
		src.WriteString("\t" + l + "\n")
	}
	src.WriteString("}\n")
	if n := strings.Count(strings.SplitN(src.String(), lines[0], 2)[0], "\n") + 1; n != first {
		t.Fatalf("first call on line %d, want %d", n, first)
	}
	out, err := buildcheck.Build(t, map[string]string{"main.go": src.String()})
	if err == nil {
		t.Fatalf("every call compiled; want errors for the %d misplaced options", len(wrong))
	}
	errs := map[int][]string{}
	for _, m := range regexp.MustCompile(`(?m)^\./main\.go:(\d+):\d+: (.*)$`).FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		errs[n] = append(errs[n], m[2])
	}
	for i, l := range valid {
		if e := errs[first+i]; len(e) > 0 {
			t.Errorf("valid call does not compile:\n\t%s\n\t%s", l, strings.Join(e, "\n\t"))
		}
	}
	for i, c := range wrong {
		line := first + len(valid) + i
		e := strings.Join(errs[line], "\n")
		if !strings.Contains(e, fmt.Sprintf("missing method %s", lowerFirst(c.missing))) && !strings.Contains(e, "does not implement topology."+c.missing) {
			t.Errorf("misplaced option compiles, or fails for another reason:\n\t%s\n\tgot: %q", c.call, e)
		}
	}
	if len(errs) != len(wrong) {
		t.Errorf("compiler output has errors on %d lines, want %d:\n%s", len(errs), len(wrong), out)
	}
}

func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }
