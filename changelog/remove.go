package changelog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ReadOwner returns the owner the state directory dir records, changing
// nothing in a directory of the current layout (its STATE file). exists is
// false when dir does not exist; isState is false when dir exists but is
// not a state directory (no STATE file, no Badger MANIFEST at its root). A
// directory of format 1 is read through its Badger DB, as OpenDB reads it.
func ReadOwner(dir string) (o Owner, found, isState bool, err error) {
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Owner{}, false, false, nil
		}
		return Owner{}, false, false, fmt.Errorf("changelog: state dir %s: %w", dir, err)
	}
	rec, hasState, err := readStateFile(dir)
	if err != nil {
		return Owner{}, false, false, err
	}
	if hasState {
		return rec.owner(), rec.Application != "", true, nil
	}
	if !hasManifest(dir) {
		return Owner{}, false, false, nil
	}
	var opts Options
	opts.ensureDefaults()
	o, found, err = readLegacyOwner(dir, opts)
	return o, found, true, err
}

// RemoveStateDir deletes the state directory dir of application app and
// everything in it (task DBs, the instance id): the next instance started
// on it begins empty. It refuses, changing nothing, a directory that
// records another application (ErrOwnedByOtherApplication), one that is
// not a state directory (so a mistyped path deletes nothing), and one a
// process has open (a running instance). A directory that records no
// owner (only ever opened by tools) is removed. removed is false when dir
// does not exist.
func RemoveStateDir(dir, app string) (removed bool, err error) {
	if app == "" {
		return false, errors.New("changelog: remove state dir: no application given")
	}
	o, found, isState, err := ReadOwner(dir)
	if err != nil {
		return false, err
	}
	if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
		return false, nil
	}
	if !isState {
		return false, fmt.Errorf("changelog: %s is not a state directory (no %s file, no Badger MANIFEST): not removing it", dir, stateFileName)
	}
	if found && o.Application != app {
		return false, foreignOwner(dir, o, Owner{Application: app})
	}
	unlock, err := lockDir(dir, true)
	if err != nil {
		return false, err
	}
	// Under the lock: no process opened it since the owner was read.
	entries, err := os.ReadDir(dir)
	if err == nil {
		for _, e := range entries {
			if err = os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				break
			}
		}
	}
	unlock()
	if err == nil {
		err = os.Remove(dir)
	}
	if err != nil {
		return false, fmt.Errorf("changelog: remove state dir %s: %w", dir, err)
	}
	return true, nil
}
