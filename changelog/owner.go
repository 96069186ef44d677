package changelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	badger "github.com/tidemark-streams/tidemark/third_party/badger"
)

// Owner says whose state a directory holds. Data keys carry the store name
// and partition but not the application, so two applications with stores
// of the same names would read and overwrite each other's state in one
// directory, and each would trust the applied offsets the other wrote.
type Owner struct {
	// Application is the application id. Empty: OpenDB neither checks nor
	// records an owner (tools, tests).
	Application string
	// Fingerprint is an opaque string the runtime computes from the
	// topology. When it differs from the recorded one, the stores'
	// names may now mean other things: OpenDB wipes the local state (every
	// store rebuilds from its changelog) and records the new one. Empty:
	// not checked, and the recorded one is kept.
	Fingerprint string
}

// ErrOwnedByOtherApplication is wrapped by OpenDB's error when the state
// directory holds another application's state. Nothing in the directory
// was changed.
var ErrOwnedByOtherApplication = errors.New("changelog: state directory belongs to another application")

// metaOwner is the meta key of the owner record (-> encodeOwner). It sits
// beside the sub-spaces of keys.go.
const metaOwner = 'w'

const ownerVersion = 1

func encodeOwner(o Owner) []byte {
	b := []byte{ownerVersion}
	b = binary.AppendUvarint(b, uint64(len(o.Application)))
	b = append(b, o.Application...)
	return append(b, o.Fingerprint...)
}

func decodeOwner(v []byte) (Owner, error) {
	if len(v) < 2 || v[0] != ownerVersion {
		return Owner{}, fmt.Errorf("%w: owner record of %d bytes", errBadKey, len(v))
	}
	n, w := binary.Uvarint(v[1:])
	if w <= 0 || uint64(len(v)-1-w) < n {
		return Owner{}, fmt.Errorf("%w: owner record", errBadKey)
	}
	rest := v[1+w:]
	return Owner{Application: string(rest[:n]), Fingerprint: string(rest[n:])}, nil
}

// Owner returns the owner recorded in the DB, or false when none is: a DB
// created by a version that did not record owners and not yet opened with
// an Options.Owner since, or one only ever opened without one.
func (db *DB) Owner() (Owner, bool) { return db.owner, db.hasOwner }

// readOwner reads the owner record of bdb.
func readOwner(bdb *badger.DB, log *slog.Logger) (o Owner, found bool, err error) {
	defer recoverRead(log, nil, &err, nil)
	err = bdb.View(func(txn *badger.Txn) error {
		item, err := txn.Get(metaKey(metaOwner))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		return item.Value(func(v []byte) error {
			o, err = decodeOwner(v)
			return err
		})
	})
	return o, found, readErr(err)
}

func foreignOwner(dir string, have, want Owner) error {
	return fmt.Errorf("changelog: state dir %s holds the state of application %q, not of %q: "+
		"give %q a state directory of its own, or delete %s if %q's state is no longer wanted: %w",
		dir, have.Application, want.Application, want.Application, dir, have.Application, ErrOwnedByOtherApplication)
}

// probeOwner refuses, before anything writes to dir, a directory that
// holds another application's state. Badger changes a directory it opens
// for writing (a lock file, new log files, a table flushed at close), so
// the record is read through a read-only open; that costs opening the
// tables' indexes once more, a few milliseconds next to the verification
// that precedes it. Badger refuses a read-only open after an unclean
// shutdown (its memtable log is not yet cut to its end); then the check
// waits for the read-write open (checkOwner), which replays and cuts that
// log but changes no state.
func probeOwner(dir string, opts Options) error {
	if opts.Owner.Application == "" || !hasManifest(dir) {
		return nil
	}
	ro := opts
	ro.ReadOnly = true
	bo := badgerOptions(dir, ro).WithBlockCacheSize(0).WithIndexCacheSize(0)
	bdb, err := openBadger(bo, opts.Logger)
	if err != nil {
		if isLockErr(err) {
			return fmt.Errorf("changelog: open state dir %s: in use by another process: %w", dir, err)
		}
		opts.Logger.Debug("cannot check the state directory's owner before opening it; checking after", "dir", dir, "err", err)
		return nil
	}
	have, found, err := readOwner(bdb, opts.Logger)
	_ = bdb.Close()
	if err != nil {
		return fmt.Errorf("changelog: read owner of %s: %w", dir, err)
	}
	if found && have.Application != opts.Owner.Application {
		return foreignOwner(dir, have, opts.Owner)
	}
	return nil
}

// checkOwner runs on the read-write open. It refuses another application's
// state (only reached when probeOwner could not look), adopts a DB without
// an owner record, and wipes the local state when the topology fingerprint
// changed. It leaves db.owner as recorded.
func (db *DB) checkOwner() error {
	have, found, err := readOwner(db.bdb, db.log)
	if err != nil {
		return fmt.Errorf("changelog: read owner of %s: %w", db.dir, err)
	}
	db.owner, db.hasOwner = have, found
	want := db.opts.Owner
	if db.opts.ReadOnly || want.Application == "" {
		return nil
	}
	switch {
	case found && have.Application != want.Application:
		return foreignOwner(db.dir, have, want)
	case !found:
		// A DB without an owner record was created by a version that did
		// not record one (or opened only by tools that do not claim it).
		// Its stores are either this application's, or data no one can
		// attribute; refusing it would make every upgrade fail, so the
		// first application to open it with an owner adopts it.
		db.log.Info("recording the owner of the state directory", "dir", db.dir, "application", want.Application)
	case want.Fingerprint == "" || want.Fingerprint == have.Fingerprint:
		return nil
	case have.Fingerprint == "":
		// Recorded without a fingerprint: nothing to compare with.
	default:
		db.log.Warn("topology changed since this state was written; wiping local state, every store rebuilds from its changelog",
			"dir", db.dir, "application", want.Application, "fingerprint", want.Fingerprint, "previous_fingerprint", have.Fingerprint)
		if err := db.wipeAll(); err != nil {
			return fmt.Errorf("changelog: wipe %s after a topology change: %w", db.dir, err)
		}
	}
	rec := want
	if rec.Fingerprint == "" {
		rec.Fingerprint = have.Fingerprint
	}
	// Written last: a crash during the wipe leaves the old fingerprint,
	// and the next open wipes again.
	if err := db.bdb.Update(func(txn *badger.Txn) error { return txn.Set(metaKey(metaOwner), encodeOwner(rec)) }); err != nil {
		return fmt.Errorf("changelog: record owner of %s: %w", db.dir, err)
	}
	db.owner, db.hasOwner = rec, true
	return nil
}

// wipeAll deletes every key, then stamps the format again: every store
// then has no data, no applied offsets, no expiry cut and no registry
// entry, and Restore rebuilds each from its log start. DropAll drops the
// tables and value log files whole, so this costs no more for a large
// state than a small one; it stops writes while it runs, and nothing else
// writes during OpenDB.
func (db *DB) wipeAll() error {
	if err := db.bdb.DropAll(); err != nil {
		return err
	}
	return db.stampFormat()
}
