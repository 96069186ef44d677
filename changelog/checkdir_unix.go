//go:build !windows && !plan9 && !js && !wasip1 && !aix

package changelog

import (
	"os"

	"golang.org/x/sys/unix"
)

// dirWritable reports whether this process may create files in dir.
func dirWritable(dir string) error {
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return &os.PathError{Op: "access", Path: dir, Err: err}
	}
	return nil
}
