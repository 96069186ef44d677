package soak

import (
	"context"
	"fmt"

	broker "github.com/tidemark-streams/tidemark/internal/testbroker"
)

// Broker is the Kafka broker a scenario runs against.
type Broker interface {
	Bootstrap() []string
}

// HurtableBroker is a private broker the broker-fault scenarios may kill,
// restart and freeze. Kill and Start keep the data directory and the ports,
// so clients reconnect to the same address and find the same logs.
type HurtableBroker interface {
	Broker
	// Kill sends SIGKILL and waits until the process is gone.
	Kill() error
	// Start starts the broker again from the same data and ports and waits
	// for a client round trip.
	Start(ctx context.Context) error
	// Pause and Resume send SIGSTOP and SIGCONT.
	Pause() error
	Resume() error
	// LogFile is the broker's console log, named on failures.
	LogFile() string
}

// SharedBroker is a broker the scenario must not hurt (kafkatest.Brokers).
type SharedBroker []string

func (b SharedBroker) Bootstrap() []string { return b }

// PrivateBroker is a single-node Kafka broker of one campaign, in its own
// state directory, run with internal/testbroker: Kill, Start, Pause and
// Resume keep its data directory and ports.
type PrivateBroker struct {
	cfg       broker.Config
	bootstrap string
	progress  func(string)
}

// StartPrivateBroker formats and starts a fresh broker in dir.
func StartPrivateBroker(ctx context.Context, dir string, progress func(string)) (*PrivateBroker, error) {
	if progress == nil {
		progress = func(string) {}
	}
	cfg := broker.Config{StateDir: dir}
	if err := cfg.EnsureDefaults(); err != nil {
		return nil, err
	}
	r, err := cfg.Up(ctx, progress)
	if err != nil {
		return nil, err
	}
	return &PrivateBroker{cfg: cfg, bootstrap: r.Bootstrap, progress: progress}, nil
}

func (b *PrivateBroker) Bootstrap() []string { return []string{b.bootstrap} }
func (b *PrivateBroker) LogFile() string     { return b.cfg.LogFile() }
func (b *PrivateBroker) Kill() error         { return b.cfg.Kill() }
func (b *PrivateBroker) Pause() error        { return b.cfg.Pause() }
func (b *PrivateBroker) Resume() error       { return b.cfg.Resume() }

// Start starts the broker again on the same data and ports and waits until
// it answers at the same address.
func (b *PrivateBroker) Start(ctx context.Context) error {
	r, err := b.cfg.Start(ctx, b.progress)
	if err != nil {
		return err
	}
	if r.Bootstrap != b.bootstrap {
		return fmt.Errorf("soak: broker came back at %s, not at %s", r.Bootstrap, b.bootstrap)
	}
	return nil
}

// Close stops the broker (SIGTERM, then SIGKILL) and leaves its directory.
func (b *PrivateBroker) Close(ctx context.Context) error {
	_ = b.cfg.Resume() // a paused broker cannot handle SIGTERM
	return b.cfg.Down(ctx)
}
