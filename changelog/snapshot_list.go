package changelog

import (
	"context"
	"time"

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
// the callers already handle.
const listAttempts = 5

// listAgainOnNotFound runs list, again while it fails with NotFound, at
// most listAttempts times, with a short pause that lets a delete in
// progress finish.
func listAgainOnNotFound(ctx context.Context, list func() error) error {
	var err error
	for i := range listAttempts {
		if err = list(); gcerrors.Code(err) != gcerrors.NotFound {
			return err
		}
		t := time.NewTimer(time.Duration(i+1) * 10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return err
}
