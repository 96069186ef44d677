package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/internal/retry"
	"github.com/tidemark-streams/tidemark/txn"
)

func init() { rootCmd.AddCommand(newResetCmd()) }

type resetFlags struct {
	brokers     []string
	app         string
	toEarliest  bool
	toDatetime  string
	inputTopics []string
	stateDir    string
	snapStore   string
	execute     bool
	dialTimeout time.Duration
}

// newResetCmd builds the command afresh, so tests get clean flag state.
func newResetCmd() *cobra.Command {
	var f resetFlags
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Reset an application so that it reprocesses its inputs from scratch: offsets, internal topics and local state",
		Long: `reset makes a stopped application start over, as kafka-streams-application-reset
does for Kafka Streams. With --execute it, in this order:

  1. aborts the application's open transactions (transactional ids <application>/*);
  2. deletes the group's committed offsets of the internal topics;
  3. commits the input offsets at the reset position (--to-earliest, the default,
     or --to-datetime: the first offset at or after that time), without
     tidemark's metadata, so every task starts its clocks afresh;
  4. deletes the internal topics (<application>-<store>-changelog,
     <application>-<name>-repartition, <application>-frontier) and waits until
     they are gone;
  5. deletes the local state directory given with --state-dir;
  6. deletes the application's snapshots from the store given with
     --snapshot-store (the URL given to 'tidemark run --snapshot-store'):
     they reflect changelogs that no longer exist.

Without --execute it prints that plan and changes nothing. It refuses while
the group (the application id) has live members: stop every instance first.

--state-dir is the directory given to 'tidemark run --state-dir' (the parent):
the application's state is <state-dir>/<application>. A directory whose STATE
file names the application itself is accepted too. A state directory that
records another application is refused. Every instance has its own state
directory: run reset once with each, or delete the others by hand (an
instance always rebuilds deleted state from its changelogs, and there are
none after a reset).

Input topics are, unless --input-topics names them, the topics other than the
internal ones that the group has committed offsets for; every partition of
each is reset. Output topics are not touched: the records the application
wrote before stay, and the reprocessed ones are appended.

Brokers come from --brokers or the TIDEMARK_BROKERS environment variable.`,
		Example: `  tidemark reset --brokers 127.0.0.1:9092 --application marketplace --state-dir /var/lib/tidemark
  tidemark reset --application marketplace --to-datetime 2026-01-02T15:04:05Z --state-dir ./state --execute`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("to-earliest") && cmd.Flags().Changed("to-datetime") {
				return errors.New("--to-earliest and --to-datetime exclude each other")
			}
			return runReset(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.brokers, "brokers", nil, "Kafka bootstrap brokers, comma-separated (default $TIDEMARK_BROKERS)")
	fl.StringVar(&f.app, "application", "", "application id: consumer group and internal topic prefix (required)")
	fl.BoolVar(&f.toEarliest, "to-earliest", true, "reset input offsets to the start of each partition (the default)")
	fl.StringVar(&f.toDatetime, "to-datetime", "", "reset input offsets to the first offset at or after this RFC 3339 time")
	fl.StringSliceVar(&f.inputTopics, "input-topics", nil, "input topics to reset (default: the non-internal topics the group committed offsets for)")
	fl.StringVar(&f.stateDir, "state-dir", "", "the --state-dir of 'tidemark run' (its <application> subdirectory is deleted)")
	fl.StringVar(&f.snapStore, "snapshot-store", "", "the --snapshot-store of 'tidemark run' (the application's snapshots are deleted)")
	fl.BoolVar(&f.execute, "execute", false, "do it; without, print the plan and change nothing")
	fl.DurationVar(&f.dialTimeout, "dial-timeout", 5*time.Second, "how long to wait for a broker to answer")
	return cmd
}

// resetPlan is what a reset does, worked out before it changes anything.
type resetPlan struct {
	app        string
	groupState string // "" when the group does not exist
	internal   []string
	// skipped are topics named like internal topics of app that belong to
	// another group whose id extends app's ("shop" and "shop-eu").
	skipped         map[string]string
	internalOffsets kadm.TopicsSet
	inputs          []inputReset
	target          string // how the input offsets are reset, for the output
	openTxns        []txn.OpenTxn
	stateDir        string // "" when none is to be wiped
	stateNote       string
	snapURL         string // "" when none was given
	snaps           *changelog.SnapshotStore
	snapObjects     int
}

// inputReset is one input partition's committed offset now (-1: none) and
// after the reset.
type inputReset struct {
	topic     string
	partition int32
	now, to   int64
}

func runReset(ctx context.Context, out, errw io.Writer, f resetFlags) error {
	f.brokers = brokersOrEnv(f.brokers)
	var at time.Time
	switch {
	case len(f.brokers) == 0:
		return errors.New("--brokers is required (or set TIDEMARK_BROKERS), e.g. --brokers 127.0.0.1:9092")
	case f.app == "":
		return errors.New("--application is required: the application id to reset")
	case strings.Contains(f.app, "/"):
		return fmt.Errorf("--application %q: application ids contain no '/'", f.app)
	case f.dialTimeout <= 0:
		return fmt.Errorf("--dial-timeout is %v, must be positive", f.dialTimeout)
	case f.toDatetime != "":
		t, err := time.Parse(time.RFC3339Nano, f.toDatetime)
		if err != nil {
			return fmt.Errorf("--to-datetime %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z: %w", f.toDatetime, err)
		}
		at = t
	}
	log := slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cl, clientOpts, err := connect(ctx, f.brokers, f.dialTimeout)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	state, err := groupIdle(ctx, log, adm, f.app)
	if err != nil {
		return err
	}
	p := &resetPlan{app: f.app, groupState: state}
	if err := p.resolveStateDir(f.stateDir); err != nil {
		return err
	}
	if err := p.kafka(ctx, log, adm, f.inputTopics, at); err != nil {
		return err
	}
	if f.snapStore != "" {
		ss, err := changelog.OpenSnapshotStore(ctx, f.snapStore, f.app, changelog.SnapshotOptions{})
		if err != nil {
			return fmt.Errorf("--snapshot-store: %w", err)
		}
		defer ss.Close()
		if p.snapObjects, err = ss.Objects(ctx); err != nil {
			return fmt.Errorf("--snapshot-store: %w", err)
		}
		p.snapURL, p.snaps = f.snapStore, ss
	}
	p.print(out)
	if !f.execute {
		fmt.Fprintln(out, "dry run: nothing changed; add --execute to reset")
		return nil
	}
	if err := p.execute(ctx, out, log, adm, clientOpts); err != nil {
		return err
	}
	fmt.Fprintf(out, "application %q reset\n", f.app)
	return nil
}

// groupIdle returns the group's state, "" when it does not exist, and an
// error naming the members when it has any.
func groupIdle(ctx context.Context, log *slog.Logger, adm *kadm.Client, group string) (string, error) {
	var d kadm.DescribedGroup
	err := retry.Do(ctx, log, "describe group "+group, func(ctx context.Context) error {
		gs, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		d = gs[group]
		return d.Err
	})
	switch {
	case errors.Is(err, kerr.GroupIDNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("describe group %s: %w", group, err)
	case d.State == "Dead":
		return "", nil
	case d.State == "Empty" && len(d.Members) == 0:
		return d.State, nil
	}
	var members []string
	for _, m := range d.Members {
		name := m.MemberID
		if m.InstanceID != nil {
			name = "instance " + *m.InstanceID + " (" + m.MemberID + ")"
		}
		members = append(members, name+" on "+m.ClientHost)
	}
	return "", fmt.Errorf("group %s is %s with %d live members: stop every instance of the application first (nothing was changed): %s; "+
		"an instance that crashed or was killed stays a member until its session times out (10s by default): run reset again after that",
		group, d.State, len(members), joinOrNone(members))
}

// resolveStateDir finds the application's state directory under dir (the
// parent given to tidemark run), or dir itself when its STATE file names
// the application, and checks that it is the application's.
func (p *resetPlan) resolveStateDir(dir string) error {
	if dir == "" {
		p.stateNote = "no --state-dir given: local state directories are not touched"
		return nil
	}
	sub := filepath.Join(dir, p.app)
	o, found, isState, err := changelog.ReadOwner(sub)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	target := sub
	if !isState {
		// Not <dir>/<app>: is dir itself the application's directory?
		o2, found2, isState2, err := changelog.ReadOwner(dir)
		if err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
		if !isState2 {
			if _, err := os.Stat(sub); err == nil {
				return fmt.Errorf("state dir %s is not a tidemark state directory (no STATE file): not deleting it", sub)
			}
			p.stateNote = fmt.Sprintf("no state directory at %s: nothing to delete", sub)
			return nil
		}
		o, found, target = o2, found2, dir
	}
	if found && o.Application != p.app {
		return fmt.Errorf("state dir %s holds the state of application %q, not of %q: refusing to delete it (nothing was changed): %w",
			target, o.Application, p.app, changelog.ErrOwnedByOtherApplication)
	}
	p.stateDir = target
	return nil
}

// kafka works out the topics, offsets and transactions to reset.
func (p *resetPlan) kafka(ctx context.Context, log *slog.Logger, adm *kadm.Client, inputs []string, at time.Time) error {
	var topics kadm.TopicDetails
	if err := retry.Do(ctx, log, "list topics", func(ctx context.Context) (err error) {
		topics, err = adm.ListTopics(ctx)
		return err
	}); err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	var groups kadm.ListedGroups
	if err := retry.Do(ctx, log, "list groups", func(ctx context.Context) (err error) {
		groups, err = adm.ListGroups(ctx)
		return err
	}); err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	p.skipped = map[string]string{}
	for name := range topics {
		if !isInternalTopic(p.app, name) {
			continue
		}
		if g := longerGroup(p.app, name, groups); g != "" {
			p.skipped[name] = g
			continue
		}
		p.internal = append(p.internal, name)
	}
	sort.Strings(p.internal)

	var committed kadm.OffsetResponses
	if p.groupState != "" {
		if err := retry.Do(ctx, log, "fetch offsets of group "+p.app, func(ctx context.Context) (err error) {
			committed, err = adm.FetchOffsets(ctx, p.app)
			if err == nil {
				err = committed.Error()
			}
			return err
		}); err != nil {
			return fmt.Errorf("fetch committed offsets of group %s: %w", p.app, err)
		}
	}
	p.internalOffsets = kadm.TopicsSet{}
	committedInputs := map[string]bool{}
	committed.Each(func(o kadm.OffsetResponse) {
		if isInternalTopic(p.app, o.Topic) {
			p.internalOffsets.Add(o.Topic, o.Partition)
		} else {
			committedInputs[o.Topic] = true
		}
	})
	if len(inputs) == 0 {
		for t := range committedInputs {
			inputs = append(inputs, t)
		}
	}
	sort.Strings(inputs)
	inputs = slices.Compact(inputs)
	for _, t := range inputs {
		if isInternalTopic(p.app, t) {
			return fmt.Errorf("--input-topics: %s is an internal topic of %q, which reset deletes", t, p.app)
		}
		if d, ok := topics[t]; !ok || d.Err != nil {
			return fmt.Errorf("input topic %s does not exist", t)
		}
	}
	if len(inputs) > 0 {
		var listed kadm.ListedOffsets
		if err := retry.Do(ctx, log, "list input offsets", func(ctx context.Context) (err error) {
			if at.IsZero() {
				listed, err = adm.ListStartOffsets(ctx, inputs...)
			} else {
				listed, err = adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), inputs...)
			}
			if err == nil {
				err = listed.Error()
			}
			return err
		}); err != nil {
			return fmt.Errorf("list offsets of %s: %w", strings.Join(inputs, ","), err)
		}
		listed.Each(func(l kadm.ListedOffset) {
			now := int64(-1)
			if o, ok := committed.Lookup(l.Topic, l.Partition); ok {
				now = o.At
			}
			p.inputs = append(p.inputs, inputReset{topic: l.Topic, partition: l.Partition, now: now, to: l.Offset})
		})
		sort.Slice(p.inputs, func(i, j int) bool {
			a, b := p.inputs[i], p.inputs[j]
			return a.topic < b.topic || a.topic == b.topic && a.partition < b.partition
		})
	}
	p.target = "the earliest offset"
	if !at.IsZero() {
		p.target = "the first offset at or after " + at.Format(time.RFC3339Nano)
	}

	var listed kadm.ListedTransactions
	if err := retry.Do(ctx, log, "list transactions", func(ctx context.Context) (err error) {
		listed, err = adm.ListTransactions(ctx, nil, []string{"Ongoing"})
		return err
	}); err != nil {
		return fmt.Errorf("list open transactions: %w", err)
	}
	var open []txn.OpenTxn
	for _, l := range listed {
		open = append(open, txn.OpenTxn{TxnID: l.TxnID, ProducerID: l.ProducerID, State: l.State})
	}
	p.openTxns = txn.Departed(p.app, "", nil, open)
	return nil
}

// isInternalTopic reports whether topic is named like an internal topic
// of app: a changelog, a repartition topic or the frontier topic.
func isInternalTopic(app, topic string) bool {
	if topic == app+"-frontier" {
		return true
	}
	rest, ok := strings.CutPrefix(topic, app+"-")
	if !ok {
		return false
	}
	for _, suffix := range []string{"-changelog", "-repartition"} {
		if name, ok := strings.CutSuffix(rest, suffix); ok && name != "" {
			return true
		}
	}
	return false
}

// longerGroup returns another group whose id extends app's and whose
// internal topics topic could be ("shop-eu-x-changelog" for "shop" and
// "shop-eu"), or "".
func longerGroup(app, topic string, groups kadm.ListedGroups) string {
	best := ""
	for g := range groups {
		if g != app && strings.HasPrefix(g, app+"-") && isInternalTopic(g, topic) && len(g) > len(best) {
			best = g
		}
	}
	return best
}

func (p *resetPlan) print(w io.Writer) {
	fmt.Fprintf(w, "reset plan for application %q\n", p.app)
	if p.groupState == "" {
		fmt.Fprintf(w, "group %s: does not exist (no committed offsets)\n", p.app)
	} else {
		fmt.Fprintf(w, "group %s: %s, no live members\n", p.app, p.groupState)
	}
	fmt.Fprintf(w, "open transactions to abort: %d\n", len(p.openTxns))
	for _, t := range p.openTxns {
		fmt.Fprintf(w, "  %s (producer id %d)\n", t.TxnID, t.ProducerID)
	}
	fmt.Fprintf(w, "committed offsets of internal topics to delete: %d partitions\n", countSet(p.internalOffsets))
	fmt.Fprintf(w, "input offsets to reset to %s: %d partitions\n", p.target, len(p.inputs))
	for _, in := range p.inputs {
		now := "none"
		if in.now >= 0 {
			now = fmt.Sprint(in.now)
		}
		fmt.Fprintf(w, "  %s/%d: %s -> %d\n", in.topic, in.partition, now, in.to)
	}
	fmt.Fprintf(w, "internal topics to delete: %d\n", len(p.internal))
	for _, t := range p.internal {
		fmt.Fprintf(w, "  %s\n", t)
	}
	for _, t := range slices.Sorted(maps.Keys(p.skipped)) {
		fmt.Fprintf(w, "  (keeping %s: it belongs to group %s)\n", t, p.skipped[t])
	}
	if p.stateDir != "" {
		fmt.Fprintf(w, "local state directory to delete: %s\n", p.stateDir)
	} else {
		fmt.Fprintf(w, "local state directory: %s\n", p.stateNote)
	}
	if p.snaps != nil {
		fmt.Fprintf(w, "snapshots to delete: %d objects in %s\n", p.snapObjects, p.snapURL)
	} else {
		fmt.Fprintln(w, "snapshots: none deleted (no --snapshot-store given)")
	}
}

func (p *resetPlan) execute(ctx context.Context, out io.Writer, log *slog.Logger, adm *kadm.Client, clientOpts []kgo.Opt) error {
	// A member may have joined since the plan was made.
	if _, err := groupIdle(ctx, log, adm, p.app); err != nil {
		return err
	}
	fencer := &txn.Fencer{App: p.app, ClientOpts: clientOpts, Adm: adm}
	var fenced []string
	if err := retry.Do(ctx, log, "abort open transactions", func(ctx context.Context) (err error) {
		var more []string
		more, err = fencer.FenceDeparted(ctx, nil)
		fenced = append(fenced, more...)
		return err
	}); err != nil {
		return fmt.Errorf("abort the open transactions of %s: %w", p.app, err)
	}
	fmt.Fprintf(out, "aborted %d open transactions\n", len(fenced))

	if len(p.internalOffsets) > 0 {
		err := retry.Do(ctx, log, "delete offsets", func(ctx context.Context) error {
			resp, err := adm.DeleteOffsets(ctx, p.app, p.internalOffsets)
			if err == nil {
				err = resp.Error()
			}
			return err
		})
		if err != nil && !errors.Is(err, kerr.GroupIDNotFound) && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("delete the committed offsets of the internal topics of group %s: %w", p.app, err)
		}
	}
	fmt.Fprintf(out, "deleted the committed offsets of %d internal topic partitions\n", countSet(p.internalOffsets))

	if len(p.inputs) > 0 {
		offs := kadm.Offsets{}
		for _, in := range p.inputs {
			// No metadata: the tasks start their clocks afresh.
			offs.Add(kadm.Offset{Topic: in.topic, Partition: in.partition, At: in.to, LeaderEpoch: -1})
		}
		if err := retry.Do(ctx, log, "commit offsets", func(ctx context.Context) error {
			resp, err := adm.CommitOffsets(ctx, p.app, offs)
			if err == nil {
				err = resp.Error()
			}
			return err
		}); err != nil {
			return fmt.Errorf("commit the reset input offsets of group %s (is an instance running?): %w", p.app, err)
		}
	}
	fmt.Fprintf(out, "reset %d input partitions to %s\n", len(p.inputs), p.target)

	if err := deleteTopics(ctx, log, adm, p.internal); err != nil {
		return err
	}
	fmt.Fprintf(out, "deleted %d internal topics\n", len(p.internal))

	if p.stateDir != "" {
		removed, err := changelog.RemoveStateDir(p.stateDir, p.app)
		if err != nil {
			return fmt.Errorf("delete local state: %w", err)
		}
		if removed {
			fmt.Fprintf(out, "deleted local state directory %s\n", p.stateDir)
		} else {
			fmt.Fprintf(out, "local state directory %s was already gone\n", p.stateDir)
		}
	}
	if p.snaps != nil {
		n, err := p.snaps.DeleteAll(ctx)
		if err != nil {
			return fmt.Errorf("delete snapshots: %w", err)
		}
		fmt.Fprintf(out, "deleted %d snapshot objects from %s\n", n, p.snapURL)
	}
	return nil
}

// deleteTopics deletes topics and waits until the cluster no longer lists
// them, so that the application, started next, creates them afresh.
func deleteTopics(ctx context.Context, log *slog.Logger, adm *kadm.Client, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	err := retry.Do(ctx, log, "delete topics", func(ctx context.Context) error {
		resps, err := adm.DeleteTopics(ctx, topics...)
		if err != nil {
			return err
		}
		for _, r := range resps.Sorted() {
			if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				return fmt.Errorf("%s: %w", r.Topic, r.Err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete internal topics: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var b retry.Backoff
	b.Min, b.Max = 50*time.Millisecond, time.Second
	for {
		left, err := adm.ListTopics(wctx, topics...)
		if err == nil {
			var still []string
			for _, d := range left.Sorted() {
				if d.Err == nil {
					still = append(still, d.Topic)
				}
			}
			if len(still) == 0 {
				return nil
			}
			err = fmt.Errorf("still listed: %s", strings.Join(still, ", "))
		}
		if serr := retry.Sleep(wctx, b.Next()); serr != nil {
			return fmt.Errorf("wait until the internal topics are deleted: %w (%v)", serr, err)
		}
	}
}

func countSet(s kadm.TopicsSet) int {
	n := 0
	for _, ps := range s {
		n += len(ps)
	}
	return n
}
