//go:build !windows && !plan9 && !js && !wasip1 && !aix

package changelog

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lockDir takes the lock Badger takes on a state directory (flock of the
// directory itself): shared to read it, exclusive to move it. It fails at
// once when a process has the DB open, so OpenDB never verifies, and
// Quarantine never moves, a directory a running process is writing. The
// lock must be released before Badger opens dir: flock locks of two
// descriptors conflict even within one process.
func lockDir(dir string, exclusive bool) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("changelog: state dir %s: in use by another process: %w", dir, errInUse)
		}
		return nil, fmt.Errorf("changelog: lock state dir %s: %w", dir, err)
	}
	return func() { _ = f.Close() }, nil // closing the descriptor releases the lock
}
