package processor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
)

// WithMemoryBudget bounds the Badger caches of the App's state (see
// changelog.Options.MemoryBudget; at least 16 MiB). Apps in one process
// each have their own budget: give each tenant class's App its share of
// the process's memory.
func WithMemoryBudget(bytes int64) Option {
	return func(c *Config) { c.State.MemoryBudget = bytes }
}

// RunApps runs several Apps in one process, for example one per tenant
// class (a gold App with tight staleness targets and a standard App with a
// long fixed commit interval), until ctx is done, then shuts all of them
// down together and returns when every one has stopped. If one App fails,
// the others are stopped too (a process that half works is harder to
// operate than one that restarts), and the errors are joined, each naming
// its application.
//
// The Apps must be independent: each needs its own application id (its
// group, transactional ids and internal topics), its own StateDir, and
// its own HTTPAddr (or none, mounting App.Handler elsewhere). Everything
// else is per App already: the franz-go clients, the Badger DB and its
// memory budget (WithMemoryBudget), the frontier controller and its
// options (WithCommitPolicy), the checkpoint scheduler, and the Prometheus
// registry behind /metrics, whose series carry the application label.
// The Apps share the process's CPUs: a hot App slows the others through
// the scheduler, not through shared state.
func RunApps(ctx context.Context, apps ...*App) error {
	seen, dirs, addrs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, a := range apps {
		if addr := a.cfg.HTTPAddr; addr != "" && !strings.HasSuffix(addr, ":0") {
			if addrs[addr] {
				return fmt.Errorf("processor: RunApps: two apps serve HTTP on %q", addr)
			}
			addrs[addr] = true
		}
		id := a.topo.Application()
		if seen[id] {
			return fmt.Errorf("processor: RunApps: two apps with application id %q", id)
		}
		dir, err := filepath.Abs(a.cfg.StateDir) // one directory however it is spelled
		if err != nil {
			return fmt.Errorf("processor: RunApps: app %q: state dir: %w", id, err)
		}
		if dirs[dir] {
			return fmt.Errorf("processor: RunApps: two apps with state dir %q", dir)
		}
		seen[id], dirs[dir] = true, true
	}
	// Every app's HTTP address is bound, and its state directory checked,
	// before any app starts: one app's taken port or unusable directory
	// must not fail the start after the others created their topics.
	lns := make([]net.Listener, len(apps))
	closeAll := func() {
		for _, ln := range lns {
			if ln != nil {
				_ = ln.Close()
			}
		}
	}
	for i, a := range apps {
		ln, err := a.listenHTTP()
		if err == nil {
			lns[i] = ln
			err = a.checkStateDir()
		}
		if err != nil {
			closeAll()
			return fmt.Errorf("app %q: %w", a.topo.Application(), err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(apps))
	var wg sync.WaitGroup
	for i, a := range apps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.run(ctx, lns[i]); err != nil {
				errs[i] = fmt.Errorf("app %q: %w", a.topo.Application(), err)
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
