package processor

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/topology"
)

// openState opens the instance's Badger DB in StateDir. OpenDB moves a
// directory it cannot open aside, instance id file and all; the id is
// written back so that the instance keeps its identity (and its
// transactional id) across the rebuild.
func (a *App) openState() error {
	opened := time.Now()
	opts := a.cfg.State
	if opts.Logger == nil {
		// The DB's own lines (the state directory's owner, sorted
		// rebuilds, Badger's warnings) go where the App's go, with its
		// level and attributes; changelog's default is slog.Default.
		opts.Logger = a.log
	}
	opts.Owner = changelog.Owner{Application: a.topo.Application(), Fingerprint: stateFingerprint(a.topo)}
	db, err := changelog.OpenDB(a.cfg.StateDir, opts)
	if errors.Is(err, changelog.ErrInUse) {
		return a.stateDirError(err)
	}
	if err != nil {
		return fmt.Errorf("processor: open state in %s: %w", a.cfg.StateDir, err)
	}
	a.db = db
	a.ha.db.Store(db)
	if a.cfg.persistedID {
		if err := os.WriteFile(filepath.Join(a.cfg.StateDir, "instance-id"), []byte(a.cfg.InstanceID), 0o644); err != nil {
			return fmt.Errorf("processor: persist instance id: %w", err)
		}
	}
	a.log.Info("state opened", "dir", a.cfg.StateDir, "duration", time.Since(opened))
	return nil
}

// rebuildState replaces local state that turned out to be corrupt while
// running (a damaged table found by a read): the DB is closed and moved
// aside, an empty one opened, and the next session restores every task
// from its changelog. Correct, merely slower; the old directory is kept
// for inspection.
func (a *App) rebuildState(cause error) error {
	if err := a.db.Close(); err != nil {
		a.log.Warn("close corrupt state", "err", err)
	}
	if _, err := os.Stat(a.cfg.StateDir); errors.Is(err, fs.ErrNotExist) {
		// Removed while open, and no task DB open to make it again
		// (changelog/lostdir.go): nothing to move aside.
		a.log.Error("the state directory was removed; its tasks restore from their changelogs", "dir", a.cfg.StateDir, "cause", cause)
	} else {
		moved, err := changelog.Quarantine(a.cfg.StateDir, a.log)
		if err != nil {
			return fmt.Errorf("processor: %w: move corrupt state %s aside: %v (found: %v)", errFatal, a.cfg.StateDir, err, cause)
		}
		a.log.Error("local state is corrupt; moved it aside, its tasks restore from their changelogs",
			"dir", a.cfg.StateDir, "moved_to", moved, "cause", cause)
	}
	a.metrics.stateRebuilds.Inc()
	if err := a.openState(); err != nil {
		return fmt.Errorf("processor: %w: %v", errFatal, err)
	}
	return nil
}

// stateFingerprint names the layout of the topology's local state: every
// store's name, kind, window size and whether it is logged. The state
// directory records it; a topology whose stores changed finds local state
// it cannot trust (a store renamed onto another's data, a key-value store
// turned into a window store), and rebuilds it from the changelogs. A
// change elsewhere in the topology (an operator added, a retention
// changed) keeps the state.
func stateFingerprint(t *topology.Topology) string {
	var specs []string
	for i, sub := range t.SubTopologies() {
		for _, sp := range sub.Stores {
			specs = append(specs, fmt.Sprintf("%d|%s|%d|%d|%t", i, sp.Name, sp.Kind, sp.WindowSize, sp.Logged))
		}
	}
	sort.Strings(specs)
	sum := sha256.Sum256([]byte(strings.Join(specs, "\n")))
	return "stores-v1:" + hex.EncodeToString(sum[:12])
}
