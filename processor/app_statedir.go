package processor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tidemark-streams/tidemark/changelog"
)

// stateDirSetting names where an operator sets the state directory.
const stateDirSetting = "Config.StateDir: WithStateDir, or state_dir in tidemark.yaml"

// checkStateDir fails a start whose state directory cannot be opened (a
// file in its place, no write permission, locked by another process,
// another application's state) before the start creates topics or
// writes anything. openState decides; this makes its likely errors come
// first.
func (a *App) checkStateDir() error {
	if err := changelog.CheckDir(a.cfg.StateDir, a.topo.Application()); err != nil {
		return a.stateDirError(err)
	}
	return nil
}

// stateDirError says what to do about err, an error of opening the state
// directory: for one another process holds, which process that is, as
// far as its running marker and instance id tell.
func (a *App) stateDirError(err error) error {
	dir := a.cfg.StateDir
	if errors.Is(err, changelog.ErrInUse) {
		return fmt.Errorf("processor: state directory %s (%s) is in use by another process (%s): stop it, or give each instance its own state directory: %w",
			dir, stateDirSetting, stateDirHolder(dir), err)
	}
	if errors.Is(err, changelog.ErrOwnedByOtherApplication) {
		return fmt.Errorf("processor: state directory %s (%s): %w", dir, stateDirSetting, err)
	}
	return fmt.Errorf("processor: state directory %s (%s) cannot be used: %w; fix it or choose another",
		dir, stateDirSetting, err)
}

// stateDirHolder describes the process that holds dir, from the running
// marker a running App keeps there and the instance id it persisted.
func stateDirHolder(dir string) string {
	var parts []string
	if b, err := os.ReadFile(filepath.Join(dir, runningMarkerName)); err == nil {
		var m struct {
			PID      int       `json:"pid"`
			Host     string    `json:"host"`
			Instance string    `json:"instance"`
			Started  time.Time `json:"started"`
		}
		if json.Unmarshal(b, &m) == nil && m.PID > 0 {
			parts = append(parts, fmt.Sprintf("pid %d", m.PID))
			if m.Host != "" {
				parts = append(parts, "host "+m.Host)
			}
			if m.Instance != "" {
				parts = append(parts, "instance "+m.Instance)
			}
			parts = append(parts, "running since "+m.Started.Format(time.RFC3339))
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "instance-id")); len(parts) == 0 && err == nil && len(strings.TrimSpace(string(b))) > 0 {
		parts = append(parts, "instance "+strings.TrimSpace(string(b)))
	}
	if len(parts) == 0 {
		return "no running App's marker in it: a tidemark state, replay or reset command may hold it"
	}
	return strings.Join(parts, ", ")
}
