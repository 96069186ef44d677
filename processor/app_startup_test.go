package processor_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestStartupTimeoutErrorSaysWhatToDo starts an App whose broker is down
// for longer than StartupTimeout. Run must fail (as documented), and its
// error must say what happened and what to do: the brokers it tried, that
// it waited StartupTimeout and how long that is, the last connection
// error, and the remedy. Before, it read "processor: reach brokers [...]:
// reach brokers: context deadline exceeded (last error: ...)".
func TestStartupTimeoutErrorSaysWhatToDo(t *testing.T) {
	t.Parallel()
	// A port nothing listens on: connections are refused, as with a broker
	// that is down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	b := topology.NewBuilder("startup-timeout")
	b.Stream("in", serde.String(), serde.String()).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	app, err := processor.NewApp(topo,
		processor.WithConfig(processor.Config{StartupTimeout: time.Second}),
		processor.WithBrokers(addr), processor.WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(context.Background()) }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not give up within 30s of a 1s StartupTimeout")
	}
	if err == nil {
		t.Fatal("Run returned nil with the broker down past StartupTimeout, want an error")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q does not wrap context.DeadlineExceeded", err)
	}
	for _, want := range []string{addr, "StartupTimeout 1s", "connection refused", "raise StartupTimeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
}
