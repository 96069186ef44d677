// Command brokerctl starts and stops the real Apache Kafka broker that
// tidemark's integration tests and benchmarks run against.
//
//	go run ./integration/brokerctl up      # start, or reuse a running one
//	go run ./integration/brokerctl down    # SIGTERM, then SIGKILL
//	go run ./integration/brokerctl status  # exit 0 when a broker answers
//
// `make kafka-up` and `make kafka-down` call it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tidemark-streams/tidemark/integration/broker"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: brokerctl up|down|status")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var cfg broker.Config
	if err := cfg.EnsureDefaults(); err != nil {
		fail(err)
	}
	progress := func(msg string) { fmt.Fprintln(os.Stderr, "kafka:", msg) }
	switch os.Args[1] {
	case "up":
		r, err := cfg.Up(ctx, progress)
		if err != nil {
			fail(err)
		}
		how := "started"
		if r.Reused {
			how = "already running"
		}
		fmt.Fprintf(os.Stderr, "kafka: %s at %s (pid %d) in %s; log %s\n", how, r.Bootstrap, r.PID, r.Started.Round(1e6), cfg.LogFile())
		fmt.Println(r.Bootstrap)
	case "down":
		if err := cfg.Down(ctx); err != nil && !errors.Is(err, broker.ErrNotRunning) {
			fail(err)
		}
		fmt.Fprintln(os.Stderr, "kafka: stopped")
	case "status":
		r, err := cfg.Status(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kafka:", err)
			os.Exit(1)
		}
		fmt.Println(r.Bootstrap)
	default:
		fmt.Fprintf(os.Stderr, "brokerctl: unknown command %q (want up, down or status)\n", os.Args[1])
		os.Exit(2)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kafka:", err)
	os.Exit(1)
}
