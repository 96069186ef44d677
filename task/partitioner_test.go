package task

import "testing"

func TestDefaultPartitionIsPositiveMurmur2ModN(t *testing.T) {
	// murmur2("21") = -973932308; its positive form 1173551340 % 7 = 3.
	if got := DefaultPartition([]byte("21"), 7); got != 3 {
		t.Errorf("DefaultPartition(21, 7) = %d, want 3", got)
	}
	if got := DefaultPartition(nil, 7); got != 0 {
		t.Errorf("null key: partition %d, want 0", got)
	}
}
