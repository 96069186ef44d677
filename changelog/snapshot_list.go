package changelog

import (
	"context"
	"fmt"
	"io"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// listAttempts bounds how often a snapshot listing is started over after
// an object vanished under it.
//
// Listings race deletes: an instance prunes old chains (Retention) while
// another lists them to load a task's newest snapshot, or a tool lists
// while the application prunes. gocloud's file:// driver reads a
// directory and then stats each entry, so an object deleted in between
// fails the whole listing with NotFound (seen in CI: "lstat
// …/00000001.backup: no such file or directory"), and so does reading a
// manifest the listing named. Listing again sees the bucket without it;
// a chain deleted meanwhile is then simply absent, or incomplete, which
// the callers already handle. A prune deletes file after file, so under
// load several listings in a row can each meet one (CI saw five): the
// attempts cover a prune of a long chain, about 1.5 s in all.
const listAttempts = 20

// listAgainOnNotFound runs list, again while it fails with NotFound, at
// most listAttempts times, with a short pause that lets a delete in
// progress finish.
func listAgainOnNotFound(ctx context.Context, list func() error) error {
	var err error
	for i := range listAttempts {
		if err = list(); gcerrors.Code(err) != gcerrors.NotFound {
			return err
		}
		t := time.NewTimer(min(time.Duration(i+1)*10*time.Millisecond, 100*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return err
}

// Objects counts the application's objects in the store: every snapshot
// of every task, complete or not.
func (s *SnapshotStore) Objects(ctx context.Context) (int, error) {
	n := 0
	err := listAgainOnNotFound(ctx, func() error {
		n = 0
		return s.eachAppObject(ctx, func(string) error { n++; return nil })
	})
	return n, err
}

// DeleteAll deletes every snapshot of the application (tidemark reset):
// after a reset the changelogs they reflect are gone, and a new instance
// would load them only to find their offsets point nowhere. It returns how
// many objects it deleted.
func (s *SnapshotStore) DeleteAll(ctx context.Context) (int, error) {
	n := 0
	err := listAgainOnNotFound(ctx, func() error {
		return s.eachAppObject(ctx, func(key string) error {
			if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				return fmt.Errorf("changelog: delete snapshot object %s: %w", key, err)
			}
			n++
			return nil
		})
	})
	return n, err
}

// eachAppObject calls fn with the key of each of the application's
// objects.
func (s *SnapshotStore) eachAppObject(ctx context.Context, fn func(key string) error) error {
	it := s.bucket.List(&blob.ListOptions{Prefix: s.app + "/"})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("changelog: list the snapshots of %s: %w", s.app, err)
		}
		if err := fn(obj.Key); err != nil {
			return err
		}
	}
}
