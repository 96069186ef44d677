package testlog

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Concurrent writers lose nothing, and String reads while they write
// (run with -race).
func TestBufferConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				fmt.Fprintf(&b, "w%d-%d\n", i, j)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(b.String(), "\n"); got != 800 {
		t.Fatalf("%d lines, want 800", got)
	}
}
