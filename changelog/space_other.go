//go:build !unix

package changelog

func diskFree(string) (int64, error) { return -1, nil }
