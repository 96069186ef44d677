package main

import (
	"fmt"
	"net"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/processor"
)

// preflight checks, changing nothing, what the App's Run checks first (its
// HTTP address can be bound, its state directory opened), for a run whose
// --create-topics would otherwise create the pipelines' topics before Run
// fails on them. Run binds and checks again: this only moves the likely
// failures before the topics.
func (s *service) preflight(app *processor.App) error {
	cfg := app.Config()
	if cfg.HTTPAddr != "" {
		l, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("run: cannot listen on the HTTP address %s (--http, TIDEMARK_HTTP, http: in the config file): %w; free the port or choose another address (no topic was created)", cfg.HTTPAddr, err)
		}
		if err := l.Close(); err != nil {
			return fmt.Errorf("run: HTTP address %s: close the probe: %w", cfg.HTTPAddr, err)
		}
	}
	if err := changelog.CheckDir(cfg.StateDir, s.cfg.Application); err != nil {
		return fmt.Errorf("run: state directory %s (--state-dir, TIDEMARK_STATE_DIR, state_dir: in the config file, plus the application): %w (no topic was created)", cfg.StateDir, err)
	}
	return nil
}
