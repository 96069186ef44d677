// Package testlog holds what tests need to read the logs of code that
// writes them from its own goroutines.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer for a logger that the code under test writes
// from its goroutines while the test reads it: bytes.Buffer behind a
// mutex, so `go test -race` stays quiet.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
