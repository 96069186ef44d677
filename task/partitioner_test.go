package task

import "testing"

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

func TestDefaultPartitionIsPositiveMurmur2ModN(t *testing.T) {
	// murmur2("21") = -973932308; its positive form 1173551340 % 7 = 3.
	if got := DefaultPartition([]byte("21"), 7); got != 3 {
		t.Errorf("DefaultPartition(21, 7) = %d, want 3", got)
	}
	if got := DefaultPartition(nil, 7); got != 0 {
		t.Errorf("null key: partition %d, want 0", got)
	}
}
