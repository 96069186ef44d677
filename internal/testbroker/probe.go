package testbroker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Ping does one Kafka round trip (metadata) against addr. The client port
// opens only once the broker is ready, but a round trip is the robust probe:
// it also proves the advertised listener is right.
func Ping(ctx context.Context, addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(2*time.Second),
		kgo.RequestRetries(0), kgo.RetryTimeout(2*time.Second))
	if err != nil {
		return fmt.Errorf("broker: client for %s: %w", addr, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		return fmt.Errorf("broker: ping %s: %w", addr, err)
	}
	return nil
}

// waitReady polls Ping until it succeeds, timeout passes, or gone reports
// that the broker process exited.
func waitReady(ctx context.Context, addr string, timeout time.Duration, gone func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = Ping(ctx, addr); last == nil {
			return nil
		}
		if err := gone(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker not ready at %s after %s: %w", addr, timeout, last)
		case <-tick.C:
		}
	}
}
