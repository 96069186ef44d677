package topology_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestWithTTLStores checks what WithTTL declares: the table's store keeps
// its name and layout and gets a logged index store next to it.
func TestWithTTLStores(t *testing.T) {
	b := topology.NewBuilder("app")
	b.Table("orders", serde.String(), serde.String(), topology.Named("order-state"), topology.WithTTL(time.Hour)).
		ToStream().GroupByKey().Count(topology.Named("per-order"), topology.WithTTL(2*time.Minute), topology.WithoutChangelog())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, index, changelog, indexChangelog string
		ttl                                    time.Duration
	}{
		{"order-state", "order-state-TTL-INDEX", "app-order-state-changelog", "app-order-state-TTL-INDEX-changelog", time.Hour},
		{"per-order", "per-order-TTL-INDEX", "", "", 2 * time.Minute},
	} {
		info, ok := topo.Store(c.name)
		if !ok || info.TTL != c.ttl || info.TTLIndex != c.index || !info.Timestamped || info.Changelog != c.changelog {
			t.Errorf("store %q: %+v, want TTL %v, index %q, changelog %q", c.name, info, c.ttl, c.index, c.changelog)
		}
		idx, ok := topo.Store(c.index)
		if !ok || idx.Changelog != c.indexChangelog || idx.Timestamped || idx.TTL != 0 {
			t.Errorf("index store %q: %+v, want changelog %q (logged like its table)", c.index, idx, c.indexChangelog)
		}
	}
}

// TestWithTTLBuildErrors: an invalid ttl, or WithTTL on a store that does
// not support it, fails Build naming the operator.
func TestWithTTLBuildErrors(t *testing.T) {
	str := serde.String()
	cases := []struct {
		name, operator string
		add            func(b *topology.Builder)
	}{
		{"zero", "t", func(b *topology.Builder) {
			b.Table("in", str, str, topology.Named("t"), topology.WithTTL(0))
		}},
		{"negative", "tt", func(b *topology.Builder) {
			b.Stream("in", str, str).ToTable(topology.Named("tt"), topology.WithTTL(-time.Second))
		}},
		{"below 1ms", "c", func(b *topology.Builder) {
			b.Stream("in", str, str).GroupByKey().Count(topology.Named("c"), topology.WithTTL(500*time.Microsecond))
		}},
		{"windowed count", "wc", func(b *topology.Builder) {
			topology.WindowedBy(b.Stream("in", str, str).GroupByKey(), topology.TumblingWindows(time.Minute, 0)).
				Count(topology.Named("wc"), topology.WithTTL(time.Hour))
		}},
		{"sliding count", "sc", func(b *topology.Builder) {
			topology.SlidingWindowedBy(b.Stream("in", str, str).GroupByKey(), topology.SlidingWindowsWithDiff(time.Minute, 0)).
				Count(topology.Named("sc"), topology.WithTTL(time.Hour))
		}},
		{"session count", "ssc", func(b *topology.Builder) {
			topology.SessionWindowedBy(b.Stream("in", str, str).GroupByKey(), topology.SessionWindowsWithGap(time.Minute, 0)).
				Count(topology.Named("ssc"), topology.WithTTL(time.Hour))
		}},
		{"stream join", "j", func(b *topology.Builder) {
			b.Stream("in", str, str).Join(b.Stream("in2", str, str), func(_, l, r string) string { return l + r },
				topology.JoinWindowsOf(time.Minute, 0), topology.Named("j"), topology.WithTTL(time.Hour)).To("out")
		}},
		{"versioned table", "vt", func(b *topology.Builder) {
			b.Table("in", str, str, topology.Named("vt"), topology.Versioned(time.Hour), topology.WithTTL(time.Hour))
		}},
		{"versioned ToTable", "vtt", func(b *topology.Builder) {
			b.Stream("in", str, str).ToTable(topology.Named("vtt"), topology.WithTTL(time.Hour), topology.Versioned(time.Hour))
		}},
		{"deduplicate", "d", func(b *topology.Builder) {
			b.Stream("in", str, str).Deduplicate(func(_, v string) string { return v }, time.Minute,
				topology.Named("d"), topology.WithTTL(time.Hour)).To("out")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := topology.NewBuilder("app")
			c.add(b)
			_, err := b.Build()
			if !errors.Is(err, topology.ErrInvalidTopology) || !strings.Contains(err.Error(), `"`+c.operator) || !strings.Contains(err.Error(), "WithTTL") {
				t.Errorf("Build = %v, want ErrInvalidTopology naming WithTTL and operator %q", err, c.operator)
			}
			// A versioned table is a table: the error must name the
			// conflict, not claim WithTTL does not apply to tables.
			if strings.HasPrefix(c.name, "versioned") && !strings.Contains(err.Error(), "beside Versioned") {
				t.Errorf("Build = %v, want it to name Versioned as the conflict", err)
			}
		})
	}
}
