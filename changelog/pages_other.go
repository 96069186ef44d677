//go:build !linux

package changelog

// releaseTablePages is a no-op off Linux; see pages_linux.go.
func releaseTablePages([]string) {}
