//go:build windows || plan9 || js || wasip1 || aix

package changelog

// lockDir is a no-op where Badger takes no flock; see dirlock_unix.go.
func lockDir(string, bool) (func(), error) { return func() {}, nil }
