package bench

import (
	"testing"
	"time"
)

func TestNoOutputsIsAnErrorNotAZeroStaleness(t *testing.T) {
	if err := noOutputs(1000, 0, 10*time.Second); err == nil {
		t.Fatal("a rate run with input sent and no output visible reported no error")
	}
	if err := noOutputs(1000, 5, 10*time.Second); err != nil {
		t.Fatalf("a run with outputs: %v", err)
	}
	if err := noOutputs(0, 0, 10*time.Second); err != nil {
		t.Fatalf("a run that sent nothing: %v", err)
	}
}
