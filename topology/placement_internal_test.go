package topology

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/serde"
)

// Vectors from Apache Kafka's UtilsTest.testMurmur2: a key must land on the
// partition a Java producer would pick, or joins across tidemark- and
// Java-produced topics are not co-partitioned.
func TestMurmur2MatchesKafka(t *testing.T) {
	cases := []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, c := range cases {
		if got := int32(murmur2([]byte(c.in))); got != c.want {
			t.Errorf("murmur2(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestTenantPlacementPartition(t *testing.T) {
	p := NewTenantPlacement(map[string][]int32{"hot": {3, 1}, "vip": {5}})
	shared := []int32{0, 2, 4, 6, 7}
	seenShared := map[int32]bool{}
	for i := range 500 {
		key := []byte(fmt.Sprint("k", i))
		got, err := p.Partition("hot", key, 8)
		if err != nil || (got != 1 && got != 3) {
			t.Fatalf("hot %s: partition %d (%v), want 1 or 3", key, got, err)
		}
		if got, _ := p.Partition("vip", key, 8); got != 5 {
			t.Fatalf("vip %s: partition %d, want 5", key, got)
		}
		for _, tenant := range []string{"", "cold"} {
			got, _ := p.Partition(tenant, key, 8)
			if !slices.Contains(shared, got) {
				t.Fatalf("%q %s: partition %d, want one of the shared %v", tenant, key, got, shared)
			}
			seenShared[got] = true
			// Deterministic: the hash of the key among the shared set.
			if want := shared[DefaultPartition(key, int32(len(shared)))]; got != want {
				t.Fatalf("%q %s: partition %d, want %d", tenant, key, got, want)
			}
		}
	}
	if len(seenShared) != len(shared) {
		t.Fatalf("keys reached shared partitions %v, want all of %v", seenShared, shared)
	}
	if got, _ := p.Partition("cold", nil, 8); got != 0 {
		t.Fatalf("null key: partition %d, want the first shared (0)", got)
	}
}

func TestTenantPlacementValidate(t *testing.T) {
	tests := []struct {
		name string
		hot  map[string][]int32
		n    int32
		want string // "" for valid
	}{
		{"fits", map[string][]int32{"a": {0}, "b": {1, 2}}, 4, ""},
		{"partition beyond the topic", map[string][]int32{"a": {4}}, 4, `topic "t" has 4 partitions, but partition 4 is dedicated to "a"`},
		{"no shared partition left", map[string][]int32{"a": {0, 1}, "b": {2}}, 3, "all 3 are dedicated"},
		{"overlap", map[string][]int32{"a": {0}, "b": {0}}, 4, `partition 0 is dedicated to both "a" and "b"`},
		{"empty set", map[string][]int32{"a": {}}, 4, `tenant "a" has no dedicated partitions`},
		{"negative", map[string][]int32{"a": {-1}}, 4, "negative partition -1"},
		{"untenanted", map[string][]int32{"": {0}}, 4, `the tenant ""`},
	}
	for _, tt := range tests {
		err := NewTenantPlacement(tt.hot).Validate("t", tt.n)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidPlacement) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate = %v, want ErrInvalidPlacement containing %q", tt.name, err, tt.want)
		}
	}
}

// Build rejects a placement with a partitioner, one that does not fit a
// fixed repartition count, and a join whose inputs are placed differently.
func TestTenantPlacementBuildErrors(t *testing.T) {
	hot := NewTenantPlacement(map[string][]int32{"hot": {0}})
	build := func(f func(b *Builder)) error {
		b := NewBuilder("app")
		f(b)
		_, err := b.Build()
		return err
	}
	idKey := func(k, v string) string { return k }
	tests := []struct {
		name string
		f    func(b *Builder)
		want string
	}{
		{"with a partitioner", func(b *Builder) {
			b.Stream("in", serde.String(), serde.String()).To("out", WithPlacement(hot),
				WithPartitioner(func(string, string, string, int32) int32 { return 0 }))
		}, "WithPlacement and WithPartitioner"},
		{"fixed count too small", func(b *Builder) {
			b.Stream("in", serde.String(), serde.String()).Repartition(Named("rp"), WithPartitions(1), WithPlacement(hot)).To("out")
		}, `"app-rp-repartition" has 1 partitions and all 1 are dedicated`},
		{"join of differently placed inputs", func(b *Builder) {
			l := b.Stream("l", serde.String(), serde.String()).SelectKey(idKey).Repartition(Named("l"), WithPlacement(hot))
			r := b.Stream("r", serde.String(), serde.String()).SelectKey(idKey).Repartition(Named("r"))
			l.Join(r, func(_, a, b string) string { return a + b }, JoinWindowsOf(time.Second, 0), Named("j")).To("out")
		}, "placed differently"},
	}
	for _, tt := range tests {
		err := build(tt.f)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Build = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
	// The same placement on both inputs builds.
	if err := build(func(b *Builder) {
		l := b.Stream("l", serde.String(), serde.String()).SelectKey(idKey).Repartition(Named("l"), WithPlacement(hot))
		r := b.Stream("r", serde.String(), serde.String()).SelectKey(idKey).Repartition(Named("r"), WithPlacement(NewTenantPlacement(map[string][]int32{"hot": {0}})))
		l.Join(r, func(_, a, b string) string { return a + b }, JoinWindowsOf(time.Second, 0), Named("j")).To("out")
	}); err != nil {
		t.Fatalf("equally placed join: %v", err)
	}
}

// Describe names a placed sink's dedicated partitions, so an operator can
// check a deployment's placement without reading its code.
func TestDescribeShowsTenantPlacement(t *testing.T) {
	b := NewBuilder("app")
	s := b.Stream("in", serde.String(), serde.String())
	s.To("placed", WithPlacement(NewTenantPlacement(map[string][]int32{"hot": {3, 1}})))
	s.To("plain")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	out := topo.String()
	for _, want := range []string{"(topic: placed, tenant placement: hot=[1 3]; others share the rest)", "(topic: plain)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("Describe:\n%s\nwant it to contain %q", out, want)
		}
	}
}
