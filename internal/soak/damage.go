package soak

import (
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The ways the kill campaign damages a killed instance's local state
// before it restarts: what disks, torn writes and operators do to a state
// directory. Whatever the damage, the restarted instance must notice it
// (or lose only a suffix of its writes, as a torn write does), rebuild
// what it cannot trust from the changelogs, and every output must still
// be exactly once. The checker does not know which damage was done.
var damages = []struct {
	name string
	// files is the glob, in a task DB, of the files it applies to; one
	// starting with snapshotPrefix is a glob in the fleet's file://
	// snapshot store instead.
	files string
	apply func(rng *mrand.Rand, path string) error
}{
	{"table bytes flipped", "*.sst", flipBytes},
	{"table truncated", "*.sst", truncateRandomly},
	{"table deleted", "*.sst", remove},
	{"MANIFEST garbled", "MANIFEST", garble},
	{"write-ahead log torn", "*.mem", truncateRandomly},
	{"write-ahead log bytes flipped", "*.mem", flipBytes},
	{"value log bytes flipped", "*.vlog", flipBytes},
	{"STATE garbled", "../../STATE", garble}, // the state directory's own record
	// <store>/<app>/<task>/<chain>/<seq>.backup: a snapshot every
	// instance may load (written to a temporary file and renamed, so a
	// finished one).
	{"snapshot bytes flipped", snapshotPrefix + "*/*/*/*.backup", flipBytes},
}

// snapshotPrefix marks a damage's glob as one in the snapshot store.
const snapshotPrefix = "snapshots:"

// damageLog is what tidemark logs when it moves damaged state aside.
const damageLog = "moving it aside and rebuilding"

// Damage does one of the damages above, picked by rng, to one task DB of
// instance id's state directory (or to the snapshot store the fleet
// shares), and says what it did; "" when the directory has no task DB
// yet. The instance must not be running.
func (f *Fleet) Damage(id string, rng *mrand.Rand) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.instance(id)
	if in.cmd != nil && !closed(in.done) {
		return "", fmt.Errorf("soak: damage %s: still running", id)
	}
	dbs, err := filepath.Glob(filepath.Join(in.StateDir, "tasks", "*"))
	if err != nil {
		return "", err
	}
	dbs = slices.DeleteFunc(dbs, func(p string) bool { return strings.Contains(filepath.Base(p), ".corrupt-") })
	if len(dbs) == 0 {
		return "", nil
	}
	db := dbs[rng.IntN(len(dbs))]
	// Try the damages from a random one on: a young DB has no tables yet,
	// an idle one no write-ahead log.
	first := rng.IntN(len(damages))
	for i := range damages {
		d := damages[(first+i)%len(damages)]
		pattern, base := filepath.Join(db, d.files), in.StateDir
		if glob, ok := strings.CutPrefix(d.files, snapshotPrefix); ok {
			store, ok := strings.CutPrefix(f.cfg.SnapshotStore, "file://")
			if !ok {
				continue
			}
			pattern, base = filepath.Join(store, glob), store
		}
		files, err := filepath.Glob(pattern)
		if err != nil {
			return "", err
		}
		files = slices.DeleteFunc(files, func(p string) bool {
			st, err := os.Stat(p)
			return err != nil || st.Size() == 0
		})
		if len(files) == 0 {
			continue
		}
		slices.Sort(files)
		path := files[rng.IntN(len(files))]
		if strings.HasSuffix(path, ".mem") {
			// Only the newest log can be torn by a crash; damage to an
			// older one, with newer ones intact, would leave a hole no
			// replay can see (Badger replays each log on its own).
			path = files[len(files)-1]
		}
		if err := d.apply(rng, path); errors.Is(err, os.ErrNotExist) {
			continue // a snapshot pruned by a running instance
		} else if err != nil {
			return "", fmt.Errorf("soak: damage %s: %s of %s: %w", id, d.name, path, err)
		}
		rel, _ := filepath.Rel(base, path)
		return fmt.Sprintf("%s (%s)", d.name, rel), nil
	}
	return "", nil
}

// flipBytes inverts up to 64 bytes at a random place of path, in place:
// a file deleted meanwhile is not created again.
func flipBytes(rng *mrand.Rand, path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	at := rng.Int64N(st.Size())
	b := make([]byte, min(64, st.Size()-at))
	if _, err := f.ReadAt(b, at); err != nil {
		return err
	}
	for i := range b {
		b[i] ^= 0xff
	}
	if _, err := f.WriteAt(b, at); err != nil {
		return err
	}
	return f.Close()
}

// truncateRandomly cuts path at a random length shorter than it is.
func truncateRandomly(rng *mrand.Rand, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.Truncate(path, rng.Int64N(st.Size()))
}

// garble replaces path's contents.
func garble(_ *mrand.Rand, path string) error {
	return os.WriteFile(path, []byte("garbage, not what was here"), 0o644)
}

// remove deletes path.
func remove(_ *mrand.Rand, path string) error { return os.Remove(path) }
