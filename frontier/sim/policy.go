package sim

import (
	"fmt"
	"time"

	"github.com/tidemark-streams/tidemark/frontier"
)

// Policy is a named controller configuration to simulate.
type Policy struct {
	Name    string
	Options frontier.Options
}

// Adaptive is the adaptive policy with default options.
func Adaptive() Policy {
	return Policy{Name: "adaptive", Options: frontier.Options{Policy: frontier.PolicyAdaptive}}
}

// Fixed is the fixed-interval baseline.
func Fixed(d time.Duration) Policy {
	return Policy{Name: fmt.Sprintf("fixed-%v", d), Options: frontier.Options{Policy: frontier.PolicyFixed, FixedInterval: d}}
}

// DefaultPolicies compares adaptive with Kafka Streams' 100ms and a 1s
// timer.
func DefaultPolicies() []Policy {
	return []Policy{Adaptive(), Fixed(100 * time.Millisecond), Fixed(time.Second)}
}
