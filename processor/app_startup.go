package processor

import (
	"context"
	"errors"
	"fmt"
)

// startupTimedOut explains a start-up step (what) that gave up because
// the cluster did not answer within StartupTimeout: how long it waited,
// which brokers, the last error, and what to do. Before, the error read
// "reach brokers: context deadline exceeded", which names neither the
// timeout nor a remedy. Other errors (a caller's cancellation, a
// permanent error) are returned as they are, wrapped with what.
func (a *App) startupTimedOut(ctx, sctx context.Context, what string, err error) error {
	if ctx.Err() == nil && errors.Is(sctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("processor: %s: the brokers %v did not answer within StartupTimeout %s: %w; "+
			"check that the cluster is up and that Brokers names it, or raise StartupTimeout to wait longer for a cluster that is starting",
			what, a.cfg.Brokers, a.cfg.StartupTimeout, err)
	}
	return fmt.Errorf("processor: %s %v: %w", what, a.cfg.Brokers, err)
}
