// Command brokerctl starts and stops the real Apache Kafka broker that
// tidemark's integration tests and benchmarks run against, and hurts it on
// purpose for fault-injection runs.
//
//	go run ./internal/testbroker/cmd/brokerctl up                # start a fresh one, or reuse a running one
//	go run ./internal/testbroker/cmd/brokerctl down              # SIGTERM, then SIGKILL; the next up starts fresh
//	go run ./internal/testbroker/cmd/brokerctl status            # exit 0 when a broker answers
//
// These keep the broker's data and ports, so clients reconnect to the same
// address:
//
//	go run ./internal/testbroker/cmd/brokerctl stop              # graceful shutdown (SIGTERM, then SIGKILL)
//	go run ./internal/testbroker/cmd/brokerctl start             # start the stopped broker again
//	go run ./internal/testbroker/cmd/brokerctl restart [--hard]  # stop (--hard: kill) and start
//	go run ./internal/testbroker/cmd/brokerctl kill              # SIGKILL: a crash
//	go run ./internal/testbroker/cmd/brokerctl pause             # SIGSTOP: a hung broker
//	go run ./internal/testbroker/cmd/brokerctl resume            # SIGCONT
//
// `make kafka-up`, `make kafka-down`, `make kafka-status` and
// `make kafka-restart` call it. TIDEMARK_KAFKA_DIR overrides the state
// directory (default .kafka in the checkout).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tidemark-streams/tidemark/internal/testbroker"
)

const usage = `usage: brokerctl <command>
  up                start a fresh broker (new data and ports), or reuse a running one
  down              stop the broker (SIGTERM, then SIGKILL) and forget it
  status            print the bootstrap address; exit 1 unless the broker answers
  stop              graceful shutdown, keeping data and ports for start
  start             start the stopped (or killed) broker again: same data, same ports
  restart [--hard]  stop (--hard: kill) and start again, keeping data and ports
  kill              SIGKILL the broker (a crash), keeping data and ports
  pause             SIGSTOP the broker (a hung broker)
  resume            SIGCONT a paused broker`

func main() {
	args := os.Args[1:]
	if len(args) == 0 || len(args) > 2 || (len(args) == 2 && (args[0] != "restart" || args[1] != "--hard")) {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var cfg testbroker.Config
	if err := cfg.EnsureDefaults(); err != nil {
		fail(err)
	}
	progress := func(msg string) { fmt.Fprintln(os.Stderr, "kafka:", msg) }
	started := func(r testbroker.Running, err error, how string) {
		if err != nil {
			fail(err)
		}
		if r.Reused {
			how = "already running"
		}
		fmt.Fprintf(os.Stderr, "kafka: %s at %s (pid %d) in %s; log %s\n", how, r.Bootstrap, r.PID, r.Started.Round(1e6), cfg.LogFile())
		fmt.Println(r.Bootstrap)
	}
	// stopped tolerates a broker that is not running: the goal state holds.
	stopped := func(err error, what string) {
		if errors.Is(err, testbroker.ErrNotRunning) {
			fmt.Fprintln(os.Stderr, "kafka: not running")
			return
		}
		if err != nil {
			fail(err)
		}
		fmt.Fprintln(os.Stderr, "kafka:", what)
	}
	switch args[0] {
	case "up":
		r, err := cfg.Up(ctx, progress)
		started(r, err, "started")
	case "down":
		stopped(cfg.Down(ctx), "stopped")
	case "status":
		r, err := cfg.Status(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kafka:", err)
			os.Exit(1)
		}
		fmt.Println(r.Bootstrap)
	case "stop":
		stopped(cfg.Stop(ctx), "stopped (data and ports kept; `brokerctl start` brings it back)")
	case "start":
		r, err := cfg.Start(ctx, progress)
		started(r, err, "started again")
	case "restart":
		r, err := cfg.Restart(ctx, progress, len(args) == 2)
		started(r, err, "restarted")
	case "kill":
		stopped(cfg.Kill(), "killed (data and ports kept; `brokerctl start` brings it back)")
	case "pause":
		if err := cfg.Pause(); err != nil {
			fail(err)
		}
		fmt.Fprintln(os.Stderr, "kafka: paused (SIGSTOP); `brokerctl resume` continues it")
	case "resume":
		if err := cfg.Resume(); err != nil {
			fail(err)
		}
		fmt.Fprintln(os.Stderr, "kafka: resumed")
	default:
		fmt.Fprintf(os.Stderr, "brokerctl: unknown command %q\n%s\n", args[0], usage)
		os.Exit(2)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kafka:", err)
	os.Exit(1)
}
