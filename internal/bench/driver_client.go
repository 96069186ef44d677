package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// driverClient is the client a harness produces input and administers
// topics with: a short linger and a deep buffer, so the driver outruns the
// system under test. It fails when the broker does not answer.
func driverClient(ctx context.Context, brokers []string) (*kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		return nil, err
	}
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("bench: broker %v: %w", brokers, err)
	}
	return cl, nil
}

// checkWorkers fails when a tidemark system has no worker in this binary,
// before any broker time is spent on it.
func checkWorkers(systems []System) error {
	for _, s := range systems {
		if err := checkWorker(s.Name, s.Kind); err != nil {
			return err
		}
	}
	return nil
}

func checkWorker(name, kind string) error {
	if kind == "kstreams" {
		return nil
	}
	if _, ok := worker(kind); !ok {
		return fmt.Errorf("bench: system %s: no worker of kind %q in this binary", name, kind)
	}
	return nil
}
