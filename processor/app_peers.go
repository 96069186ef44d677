package processor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Peer failure detection.
//
// Members are static (KIP-345), so the coordinator keeps a member whose
// process died, and its partitions, until its session times out
// (Config.SessionTimeout, at least the broker's
// group.min.session.timeout.ms, 6s by default). Kafka Streams waits the
// same. A process that died on a live host leaves evidence much sooner:
// its HTTP port refuses connections. So every App that serves HTTP dials
// the advertised address of the next peerWatchers instances of the group
// (watchedPeers), PeerDeadAfter/5 apart. An instance whose every dial for
// PeerDeadAfter was refused (at least minPeerRefusals) is declared dead:
// its members are removed from the group with LeaveGroup, naming each by
// member id and static instance id, and this App's threads rejoin at once,
// so the rebalance that moves its partitions starts now.
//
// Naming the member id makes the removal safe against a restart: if the
// instance came back and rejoined in the meantime, its members have new
// member ids and the coordinator answers FENCED_INSTANCE_ID instead of
// removing them. Only refusals count: a timeout (a host that is down, or
// cut off from us and perhaps not from the broker) is left to the session
// timeout, since removing a live member that cannot be dialled would only
// make it rejoin, again and again. Exactly-once does not rest on the
// detector: a member removed by mistake is in the position of one whose
// session expired, its transaction's offset commit is refused and its
// producer fenced (fenceDeparted), and it rejoins.
//
// The cost of the speed is a rebalance for a restart slower than
// PeerDeadAfter, which static membership alone would have ridden out;
// with standby replicas that rebalance hands the partitions to warm
// copies. Negative PeerDeadAfter turns the detector off.

// DefaultPeerDeadAfter is Config.PeerDeadAfter's default.
const DefaultPeerDeadAfter = 500 * time.Millisecond

// MinPeerDeadAfter bounds PeerDeadAfter from below: shorter runs of
// refusals are too easily a listener between a restart's Close and Listen.
const MinPeerDeadAfter = 100 * time.Millisecond

// peerRefreshEvery is how often the detector reads the group's members
// and their addresses.
const peerRefreshEvery = 2 * time.Second

// WithPeerDeadAfter sets Config.PeerDeadAfter.
func WithPeerDeadAfter(d time.Duration) Option { return func(c *Config) { c.PeerDeadAfter = d } }

func checkPeerDeadAfter(d time.Duration) error {
	if d > 0 && d < MinPeerDeadAfter {
		return fmt.Errorf("config: PeerDeadAfter %s must be at least %s (negative: off, 0 takes the default %s)", d, MinPeerDeadAfter, DefaultPeerDeadAfter)
	}
	return nil
}

// peerWatchOn reports whether the detector runs.
func (a *App) peerWatchOn() bool { return a.cfg.PeerDeadAfter >= 0 && a.cfg.HTTPAddr != "" }

// peerBookBeforeJoin describes the group before this App's threads join
// it, and returns what it learnt. An instance that died while no other
// watched it (the only one, or its watchers died with it) is then still
// a member of a stable group, described with the address it joined with;
// once our join starts a rebalance, describes leave every address out
// until the rebalance ends, and that one waits for the dead member's
// session to expire. A replacement started with a new instance id (a
// fresh state directory) would wait it out too. A failed describe leaves
// the book empty: the detector learns from its later describes.
func (a *App) peerBookBeforeJoin(ctx context.Context) *peerBook {
	book := newPeerBook()
	if !a.peerWatchOn() {
		return book
	}
	ctx, cancel := context.WithTimeout(ctx, peerRefreshEvery)
	defer cancel()
	g, err := a.describeGroup(ctx)
	if err != nil {
		a.log.Debug("peer detector: no describe of the group before joining it", "err", err)
		return book
	}
	book.update(g)
	return book
}

// runPeerWatch runs the detector, starting from book, until ctx ends. Run
// owns it.
func (a *App) runPeerWatch(ctx context.Context, book *peerBook) {
	if !a.peerWatchOn() {
		return
	}
	every := a.cfg.PeerDeadAfter / 5
	w := newPeerWatch(a.cfg.PeerDeadAfter)
	t := time.NewTicker(every)
	defer t.Stop()
	var refreshed time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(refreshed) >= peerRefreshEvery {
			dctx, cancel := context.WithTimeout(ctx, peerRefreshEvery)
			if g, err := a.describeGroup(dctx); err == nil {
				book.update(g)
			} // else: keep the last view; the next refresh tries again
			cancel()
			refreshed = time.Now()
		}
		addrs := book.addrs(a.cfg.InstanceID)
		watched := watchedPeers(a.cfg.InstanceID, slices.Collect(maps.Keys(addrs)))
		w.keepOnly(watched)
		for _, id := range watched {
			dead, run := w.observe(id, dialPeer(ctx, addrs[id], every), time.Now())
			if dead && ctx.Err() == nil {
				a.removeDeadInstance(ctx, book, id, addrs[id], run)
				refreshed = time.Time{}
			}
		}
		a.peers.publish(watched, addrs, w)
	}
}

// dialPeer dials addr once and classifies the outcome.
func dialPeer(ctx context.Context, addr string, timeout time.Duration) dialOutcome {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	switch {
	case err == nil:
		_ = c.Close()
		return dialAccepted
	case errors.Is(err, syscall.ECONNREFUSED):
		return dialRefused
	}
	return dialUnknown
}

// describeGroup describes the application's group.
func (a *App) describeGroup(ctx context.Context) (kadm.DescribedGroup, error) {
	group := a.topo.Application()
	groups, err := a.adm.DescribeGroups(ctx, group)
	if err != nil {
		return kadm.DescribedGroup{}, fmt.Errorf("describe group %s: %w", group, err)
	}
	g, ok := groups[group]
	if !ok {
		return kadm.DescribedGroup{}, fmt.Errorf("describe group %s: not in the response", group)
	}
	if g.Err != nil {
		return kadm.DescribedGroup{}, fmt.Errorf("describe group %s: %w", group, g.Err)
	}
	return g, nil
}

// memberInfoOf decodes the memberInfo a member joined with. A group that
// is rebalancing describes its members without their join metadata.
func memberInfoOf(m kadm.DescribedGroupMember) (memberInfo, bool) {
	meta, ok := m.Join.AsConsumer()
	if !ok {
		return memberInfo{}, false
	}
	return decodeMemberInfoUserData(meta.UserData)
}

// peerBook remembers the memberInfo of each static member of the group
// (by group instance id) from the describes that carried it: a group in
// PreparingRebalance, which is when a member has just died more often
// than not, describes its members without their join metadata.
type peerBook struct {
	byMember map[string]memberInfo
}

func newPeerBook() *peerBook { return &peerBook{byMember: map[string]memberInfo{}} }

// update learns the members of g; members no longer in g are forgotten.
func (b *peerBook) update(g kadm.DescribedGroup) {
	present := map[string]bool{}
	for _, m := range g.Members {
		if m.InstanceID == nil {
			continue
		}
		present[*m.InstanceID] = true
		if info, ok := memberInfoOf(m); ok {
			b.byMember[*m.InstanceID] = info
		}
	}
	for id := range b.byMember {
		if !present[id] {
			delete(b.byMember, id)
		}
	}
}

// addrs maps the group's instances other than self to their advertised
// HTTP addresses (instances that advertise none are left out).
func (b *peerBook) addrs(self string) map[string]string {
	out := map[string]string{}
	for _, info := range b.byMember {
		if info.HTTP != "" && info.Instance != self {
			out[info.Instance] = info.HTTP
		}
	}
	return out
}

// members names the static members of instance in g, by member id and
// group instance id.
func (b *peerBook) members(g kadm.DescribedGroup, instance string) []kmsg.LeaveGroupRequestMember {
	b.update(g)
	var out []kmsg.LeaveGroupRequestMember
	for _, m := range g.Members {
		if m.InstanceID == nil || b.byMember[*m.InstanceID].Instance != instance {
			continue
		}
		rm := kmsg.NewLeaveGroupRequestMember()
		rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
		out = append(out, rm)
	}
	return out
}

// removeDeadInstance removes the members of instance from the group, each
// named by member id and instance id, and makes this App's threads rejoin
// when any was removed. Errors are logged: the session timeout remains.
func (a *App) removeDeadInstance(ctx context.Context, book *peerBook, instance, addr string, run refusalRun) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	removed, err := a.removeMembersOf(ctx, book, instance, fmt.Sprintf("tidemark: %s refused %d connections in %s", addr, run.n, time.Since(run.since).Round(time.Millisecond)))
	if err != nil {
		a.log.Warn("peer detector: could not remove a dead instance from the group; its session timeout will", "peer", instance, "http", addr, "err", err)
		return
	}
	if removed == 0 {
		return
	}
	a.log.Warn("peer detector: instance is gone (its HTTP port refuses connections); removed its members from the group so its partitions move now",
		"peer", instance, "http", addr, "members", removed, "refused", run.n, "since", run.since.Format(time.RFC3339Nano), "session_timeout", a.cfg.SessionTimeout)
	a.metrics.peersRemoved.Add(float64(removed))
	a.peers.removed(instance, removed)
	for _, th := range a.threads {
		if cl := th.client.Load(); cl != nil {
			cl.ForceRebalance()
		}
	}
}

// removeMembersOf removes the current static members of instance from the
// group, and returns how many the coordinator removed.
func (a *App) removeMembersOf(ctx context.Context, book *peerBook, instance, reason string) (int, error) {
	g, err := a.describeGroup(ctx)
	if err != nil {
		return 0, err
	}
	return a.leaveMembers(ctx, g.Group, instance, book.members(g, instance), reason)
}

// leaveMembers sends one LeaveGroup for members (of instance) and returns
// how many the coordinator removed. A member that rejoined since it was
// described (a new member id: FENCED_INSTANCE_ID) or that is gone already
// (UNKNOWN_MEMBER_ID) is not counted and is not an error.
func (a *App) leaveMembers(ctx context.Context, group, instance string, members []kmsg.LeaveGroupRequestMember, reason string) (int, error) {
	if len(members) == 0 {
		return 0, nil
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = group
	for _, m := range members {
		m.Reason = &reason
		req.Members = append(req.Members, m)
	}
	resp, err := req.RequestWith(ctx, a.admCl)
	if err != nil {
		return 0, fmt.Errorf("leave group %s for %s: %w", group, instance, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, fmt.Errorf("leave group %s for %s: %w", group, instance, err)
	}
	removed := 0
	for _, m := range resp.Members {
		switch err := kerr.ErrorForCode(m.ErrorCode); {
		case err == nil:
			removed++
		case errors.Is(err, kerr.FencedInstanceID), errors.Is(err, kerr.UnknownMemberID):
			a.log.Info("member not removed from the group: it rejoined or left meanwhile", "peer", instance, "member", m.MemberID, "err", err)
		default:
			return removed, fmt.Errorf("leave group %s for member %s of %s: %w", group, m.MemberID, instance, err)
		}
	}
	return removed, nil
}

// peerView is what GET /peers shows of the detector: the instances this
// one watches, each one's current run of refused dials, and the last
// removals.
type peerView struct {
	mu       sync.Mutex
	watching []peerJSON
	removals []peerRemovalJSON
}

type peerJSON struct {
	Instance     string     `json:"instance"`
	HTTP         string     `json:"http"`
	Refused      int        `json:"refused"`
	RefusedSince *time.Time `json:"refused_since,omitempty"`
}

type peerRemovalJSON struct {
	Instance string    `json:"instance"`
	Members  int       `json:"members"`
	At       time.Time `json:"at"`
}

// maxPeerRemovals is how many removals GET /peers remembers.
const maxPeerRemovals = 16

func (v *peerView) publish(watched []string, addrs map[string]string, w *peerWatch) {
	out := make([]peerJSON, 0, len(watched))
	for _, id := range watched {
		p := peerJSON{Instance: id, HTTP: addrs[id]}
		if r, ok := w.runs[id]; ok {
			p.Refused, p.RefusedSince = r.n, &r.since
		}
		out = append(out, p)
	}
	v.mu.Lock()
	v.watching = out
	v.mu.Unlock()
}

func (v *peerView) removed(instance string, members int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.removals = append(v.removals, peerRemovalJSON{Instance: instance, Members: members, At: time.Now()})
	if len(v.removals) > maxPeerRemovals {
		v.removals = v.removals[1:]
	}
}

// servePeers serves GET /peers.
func (a *App) servePeers(w http.ResponseWriter, _ *http.Request) {
	a.peers.mu.Lock()
	body := struct {
		Enabled   bool              `json:"enabled"`
		DeadAfter string            `json:"dead_after"`
		Watching  []peerJSON        `json:"watching"`
		Removals  []peerRemovalJSON `json:"removals"`
	}{a.cfg.PeerDeadAfter > 0 && a.cfg.HTTPAddr != "", "off", slices.Clone(a.peers.watching), slices.Clone(a.peers.removals)}
	if a.cfg.PeerDeadAfter > 0 {
		body.DeadAfter = a.cfg.PeerDeadAfter.String()
	}
	a.peers.mu.Unlock()
	if body.Watching == nil {
		body.Watching = []peerJSON{}
	}
	if body.Removals == nil {
		body.Removals = []peerRemovalJSON{}
	}
	writeJSON(w, http.StatusOK, body)
}
