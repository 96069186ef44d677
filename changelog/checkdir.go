package changelog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrInUse is wrapped by the errors of a state directory another process
// (or another DB of this one) holds open: its directory lock is held.
var ErrInUse = errInUse

// CheckDir reports, changing nothing, whether OpenDB could open dir for
// writing now for application (none: any): dir is a directory (or can be
// created: its nearest existing ancestor is a writable directory),
// writable, not locked by another process (ErrInUse) and not recorded as
// another application's (ErrOwnedByOtherApplication). A caller checks it
// before it does anything a failed open would leave behind; OpenDB still
// decides.
func CheckDir(dir, application string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		parent := dir
		for {
			next := filepath.Dir(parent)
			if next == parent {
				return nil // nothing exists up to the root: MkdirAll says
			}
			parent = next
			pfi, perr := os.Stat(parent)
			if errors.Is(perr, fs.ErrNotExist) {
				continue
			}
			if perr != nil {
				return fmt.Errorf("changelog: state dir %s cannot be created: %w", dir, perr)
			}
			if !pfi.IsDir() {
				return fmt.Errorf("changelog: state dir %s cannot be created: %s is a file, not a directory", dir, parent)
			}
			if err := dirWritable(parent); err != nil {
				return fmt.Errorf("changelog: state dir %s cannot be created in %s: %w", dir, parent, err)
			}
			return nil
		}
	case err != nil:
		return fmt.Errorf("changelog: state dir %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("changelog: state dir %s is a file, not a directory", dir)
	}
	if err := dirWritable(dir); err != nil {
		return fmt.Errorf("changelog: state dir %s is not writable: %w", dir, err)
	}
	unlock, err := lockDir(dir, true)
	if err != nil {
		return err
	}
	unlock()
	if application == "" {
		return nil
	}
	rec, found, err := readStateFile(dir)
	if err == nil && found && rec.Application != "" && rec.Application != application {
		return foreignOwner(dir, rec.owner(), Owner{Application: application})
	}
	return nil // an unreadable STATE is OpenDB's to judge
}
