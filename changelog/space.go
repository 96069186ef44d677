package changelog

import (
	"cmp"
	"errors"
	"fmt"
)

// ErrNoSpace is wrapped by the error of a commit or restore refused
// because the state directory's file system has less free space than
// Options.MinFreeDisk. Badger writes its memtable logs, value logs and
// tables through memory maps: a write that meets a full disk there is a
// SIGBUS, which kills the process with a Go runtime fault naming no store
// and no directory. Refusing before the write fails cleanly instead: the
// commit is aborted, so nothing is committed past what the state holds.
var ErrNoSpace = errors.New("not enough free disk space for local state")

// defaultMinFreeDisk is Options.MinFreeDisk's default.
const defaultMinFreeDisk = 64 << 20

// freeDisk is the free space of the file system holding dir, -1 when it
// cannot be told (space_*.go); tests replace it.
var freeDisk = diskFree

// checkSpace fails with ErrNoSpace, naming what was being written (what)
// and dir, when dir's file system has less than opts.MinFreeDisk free.
func checkSpace(opts Options, dir, what string) error {
	if opts.MinFreeDisk < 0 {
		return nil
	}
	free, err := freeDisk(dir)
	if err != nil || free < 0 {
		return nil // unknown: Badger's own errors apply
	}
	need := cmp.Or(opts.MinFreeDisk, defaultMinFreeDisk)
	if free < need {
		return fmt.Errorf("changelog: %s: %w: %s has %d bytes free, below the %d kept free (Options.MinFreeDisk)",
			what, ErrNoSpace, dir, free, need)
	}
	return nil
}

// storeNames names t's stores for an error message.
func (t *TaskState) storeNames() []string {
	names := make([]string, 0, len(t.stores))
	for _, st := range t.stores {
		names = append(names, st.spec.Name)
	}
	return names
}
