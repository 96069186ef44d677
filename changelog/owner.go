package changelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	badger "github.com/dgraph-io/badger/v4"
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

// metaOwner is the meta key of the owner record (-> encodeOwner) in a state
// directory of format 1 (one DB at its root); format 2 keeps the owner in
// the STATE file. It sits beside the sub-spaces of keys.go.
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

// Owner returns the owner recorded in the state directory, or false when
// none is: a directory created by a version that did not record owners and
// not yet opened with an Options.Owner since, or one only ever opened
// without one.
func (db *DB) Owner() (Owner, bool) { return db.owner, db.hasOwner }

// readOwner reads the owner record of a format-1 DB.
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

// claim checks the owner recorded in the state directory (have, found)
// against the one the DB is opened with, and returns the record to keep.
// It refuses another application's state, adopts a directory without an
// owner record, and asks for a wipe (every task rebuilds) when the
// topology fingerprint changed.
func (db *DB) claim(have Owner, found bool) (rec Owner, wipe bool, err error) {
	want := db.opts.Owner
	if want.Application == "" {
		return have, false, nil
	}
	switch {
	case found && have.Application != want.Application:
		return have, false, foreignOwner(db.dir, have, want)
	case !found:
		// A directory without an owner record was created by a version
		// that did not record one (or opened only by tools that do not
		// claim it). Its stores are either this application's, or data
		// no one can attribute; refusing it would make every upgrade
		// fail, so the first application to open it with an owner
		// adopts it.
		db.log.Info("recording the owner of the state directory", "dir", db.dir, "application", want.Application)
	case want.Fingerprint == "" || want.Fingerprint == have.Fingerprint:
		return have, false, nil
	case have.Fingerprint == "":
		// Recorded without a fingerprint: nothing to compare with.
	default:
		db.log.Warn("topology changed since this state was written; wiping local state, every store rebuilds from its changelog",
			"dir", db.dir, "application", want.Application, "fingerprint", want.Fingerprint, "previous_fingerprint", have.Fingerprint)
		wipe = true
	}
	rec = want
	if rec.Fingerprint == "" {
		rec.Fingerprint = have.Fingerprint
	}
	return rec, wipe, nil
}
