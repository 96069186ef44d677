package changelog

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
)

// The state directory (see the package doc, Layout):
//
//	<dir>/STATE          stateRecord, JSON
//	<dir>/tasks/<task>/  one Badger DB per task
//
// Format 1 kept one Badger DB for every task at the root of the directory.

// layoutFormat is the format of the state directory's layout.
const layoutFormat = 2

// stateFileName is the state directory's own record.
const stateFileName = "STATE"

// stateRecord is what STATE holds: the layout's format and the owner.
type stateRecord struct {
	Format      int    `json:"format"`
	Application string `json:"application,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
}

func (r stateRecord) owner() Owner { return Owner{r.Application, r.Fingerprint} }

// readStateFile reads dir's STATE; found=false when there is none. An
// unreadable one is ErrCorrupt.
func readStateFile(dir string) (rec stateRecord, found bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFileName))
	if errors.Is(err, os.ErrNotExist) {
		return stateRecord{}, false, nil
	}
	if err != nil {
		return stateRecord{}, false, fmt.Errorf("changelog: read %s of %s: %w", stateFileName, dir, err)
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.Format == 0 {
		return stateRecord{}, false, fmt.Errorf("changelog: state dir %s: %w: %s is not a state record (%v)", dir, ErrCorrupt, stateFileName, err)
	}
	return rec, true, nil
}

// writeStateFile replaces dir's STATE atomically: a new file, synced, then
// renamed over the old one, then the directory synced.
func writeStateFile(dir string, rec stateRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateFileName+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err == nil {
		_, err = f.Write(append(b, '\n'))
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, stateFileName))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("changelog: write %s of %s: %w", stateFileName, dir, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// isBadgerFile reports whether name is one of the files Badger keeps in
// its directory.
func isBadgerFile(name string) bool {
	switch name {
	case badger.ManifestFilename, "MANIFEST-REWRITE", badger.KeyRegistryFileName, badger.KeyRegistryRewriteFileName, "DISCARD", "LOCK":
		return true
	}
	for _, ext := range []string{".sst", ".vlog", ".mem"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// hasLegacyFiles reports whether dir holds Badger files at its root: the
// layout of format 1, or what is left of it.
func hasLegacyFiles(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !e.IsDir() && isBadgerFile(e.Name()) && e.Name() != "LOCK" {
			return true
		}
	}
	return false
}

func hasKeyRegistry(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, badger.KeyRegistryFileName))
	return err == nil
}

// removeLegacyFiles deletes the Badger files at dir's root, MANIFEST
// last, and nothing else (the runtime keeps its instance id there).
func removeLegacyFiles(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("changelog: remove the old DB in %s: %w", dir, err)
	}
	var manifest bool
	for _, e := range entries {
		if e.IsDir() || !isBadgerFile(e.Name()) {
			continue
		}
		if e.Name() == badger.ManifestFilename {
			manifest = true
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("changelog: remove the old DB in %s: %w", dir, err)
		}
	}
	if manifest {
		if err := os.Remove(filepath.Join(dir, badger.ManifestFilename)); err != nil {
			return fmt.Errorf("changelog: remove the old DB in %s: %w", dir, err)
		}
	}
	return syncDir(dir)
}

// readLegacyOwner reads the owner recorded in the format-1 DB at dir's
// root, after verifying its tables (Badger opens tables in goroutines of
// its own, where a damaged one would kill the process). A DB that cannot
// be read is ErrCorrupt; one in use by another process is an error.
func readLegacyOwner(dir string, opts Options) (Owner, bool, error) {
	if err := checkManifest(dir); err != nil {
		return Owner{}, false, err
	}
	if !hasManifest(dir) {
		return Owner{}, false, nil // logs without tables: nothing was ever flushed
	}
	bopts := badgerOptions(dir, opts, normalMode, 1)
	if !opts.NoVerifyChecksums {
		if err := verifyTables(dir, bopts); err != nil {
			return Owner{}, false, err
		}
	}
	// Read-only first: that changes nothing. Badger refuses it after an
	// unclean shutdown (its memtable log is not cut to its end); then a
	// read-write open replays and cuts the log, but changes no state.
	bdb, err := openBadger(bopts.WithReadOnly(true).WithBlockCacheSize(0).WithIndexCacheSize(0), opts.Logger)
	if err != nil && !isLockErr(err) {
		bdb, err = openBadger(bopts.WithBlockCacheSize(0), opts.Logger)
	}
	if err != nil {
		if isLockErr(err) {
			return Owner{}, false, fmt.Errorf("changelog: open state dir %s: in use by another process: %w", dir, errInUse)
		}
		if !errors.Is(err, ErrCorrupt) {
			err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return Owner{}, false, fmt.Errorf("changelog: open the old DB in %s: %w", dir, err)
	}
	defer bdb.Close()
	o, found, err := readOwner(bdb, opts.Logger)
	if err != nil {
		return Owner{}, false, fmt.Errorf("changelog: read owner of %s: %w", dir, err)
	}
	return o, found, nil
}
