package processor

import (
	"context"
	"time"

	"github.com/tidemark-streams/tidemark/txn"
)

// fenceDeparted ends the open transactions of this application's instances
// that are no longer members of the group (see txn.Fencer): a member that
// died mid-transaction would otherwise hold back every read_committed
// reader of the partitions it wrote, and every restore of its changelogs,
// until the broker times its transaction out. It runs when partitions move
// and while a restore or an offset fetch is held up; errors are the
// caller's to log.
func (s *session) fenceDeparted(ctx context.Context) error {
	a := s.app
	if a.cfg.Guarantee != ExactlyOnce {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	live, err := a.liveInstances(ctx)
	if err != nil {
		return err
	}
	// Sibling stream threads are alive whatever the group says: one that
	// is between sessions has no transaction open, and its next session's
	// producer initialisation ends any it left.
	for _, id := range a.threadInstances() {
		live[id] = true
	}
	f := txn.Fencer{App: a.topo.Application(), Self: s.instance, ClientOpts: a.clientOpts(), Adm: a.adm}
	fenced, err := f.FenceDeparted(ctx, live)
	for _, id := range fenced {
		a.log.Warn("ended the open transaction of a departed instance", "transactional_id", id)
		a.metrics.fencedTxns.Inc()
	}
	return err
}

// liveInstances are the instance ids of the group's current members.
func (a *App) liveInstances(ctx context.Context) (map[string]bool, error) {
	g, err := a.describeGroup(ctx)
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for _, m := range g.Members {
		if m.InstanceID != nil {
			live[*m.InstanceID] = true
		}
	}
	return live, nil
}
