package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tidemark-streams/tidemark/changelog"
)

func init() { rootCmd.AddCommand(newReplayCmd()) }

type replayFlags struct {
	brokers     []string
	app         string
	stores      []string
	partitions  []int32
	dir         string
	dialTimeout time.Duration
	memory      int64
	quiet       bool
}

// newReplayCmd builds the command afresh, so tests get clean flag state.
func newReplayCmd() *cobra.Command {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Rebuild stores of an application from their changelog topics into a local directory",
		Long: `replay reads changelog topics (read_committed, up to the last stable offset)
into a state directory without running the application: to inspect state with
'tidemark state', to bring a stopped instance's state directory up to date, or
to check a changelog.

With --store it rebuilds those stores; without, every store of the app (every
topic named <application>-<store>-changelog, except those of another application
whose id extends this one, as shop-eu's for shop). A store the directory already holds is
brought up to date from its recorded offsets, in its task's DB
(<dir>/tasks/<task>); one it does not hold goes to a DB per partition
(<dir>/tasks/p<partition>), which tidemark state reads but a running instance
does not: the instance restores its tasks' stores from the changelogs.

Brokers come from --brokers or the TIDEMARK_BROKERS environment variable.`,
		Example: `  tidemark replay --brokers 127.0.0.1:9092 --application shop --store inventory --dir ./state
  tidemark replay --application shop --dir ./state --partitions 0,1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runReplay(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.brokers, "brokers", nil, "Kafka bootstrap brokers, comma-separated (default $TIDEMARK_BROKERS)")
	fl.StringVar(&f.app, "application", "", "application id: changelog topics are <application>-<store>-changelog (required)")
	// --app was this command's name for it before every command said
	// --application; scripts that use it keep working.
	fl.StringVar(&f.app, "app", "", "")
	_ = fl.MarkDeprecated("app", "use --application")
	fl.StringSliceVar(&f.stores, "store", nil, "store names to rebuild (default: every store of the app)")
	fl.Int32SliceVar(&f.partitions, "partitions", nil, "partitions to rebuild, comma-separated; all when not given")
	fl.StringVar(&f.dir, "dir", "", "state directory to write (required)")
	fl.DurationVar(&f.dialTimeout, "dial-timeout", 5*time.Second, "how long to wait for a broker to answer")
	fl.Int64Var(&f.memory, "memory-mb", changelog.DefaultMemoryBudget>>20, "Badger memory budget in MiB")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress bar")
	return cmd
}

func runReplay(cmd *cobra.Command, f replayFlags) error {
	f.brokers = brokersOrEnv(f.brokers)
	switch {
	case len(f.brokers) == 0:
		return errors.New("--brokers is required (or set TIDEMARK_BROKERS), e.g. --brokers 127.0.0.1:9092")
	case f.app == "":
		return errors.New("--application is required: the application id that names the changelog topics")
	case f.dir == "":
		return errors.New("--dir is required: the state directory to rebuild into")
	case f.dialTimeout <= 0:
		return fmt.Errorf("--dial-timeout is %v, must be positive", f.dialTimeout)
	case f.memory < 16:
		return fmt.Errorf("--memory-mb is %d, must be at least 16", f.memory)
	}
	ctx := cmd.Context()
	cl, clientOpts, err := connect(ctx, f.brokers, f.dialTimeout)
	if err != nil {
		return err
	}
	defer cl.Close()
	targets, err := replayTargets(ctx, kadm.NewClient(cl), f)
	if err != nil {
		return err
	}

	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The owner check keeps another application's changelogs out of an
	// instance's state directory: its task DBs hold stores of the same
	// names, which the replay would update with the other app's records.
	db, err := changelog.OpenDB(f.dir, changelog.Options{MemoryBudget: f.memory << 20, Logger: logger,
		Owner: changelog.Owner{Application: f.app}})
	if err != nil {
		return err
	}
	defer db.Close()

	var bar *progressbar.ProgressBar
	opts := changelog.RestoreOptions{ClientOpts: clientOpts, Logger: logger, ProgressInterval: 200 * time.Millisecond}
	if !f.quiet {
		opts.Progress = func(p changelog.RestoreProgress) {
			if bar == nil {
				bar = progressbar.NewOptions64(max(p.Total, 1),
					progressbar.OptionSetWriter(cmd.ErrOrStderr()),
					progressbar.OptionSetDescription(fmt.Sprintf("replaying %d partitions", len(targets))),
					progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("offsets"),
					progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
			}
			_ = bar.Set64(p.Total - p.Remaining)
			if p.Done {
				_ = bar.Finish()
			}
		}
	}
	res, err := db.Restore(ctx, targets, opts)
	if err != nil {
		return err
	}
	unknown, err := registerReplayed(db, targets, res)
	if err != nil {
		return err
	}
	if _, err := db.Checkpoint(ctx); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "replayed %d records into %s in %s (%.0f records/s); %d store partitions\n",
		res.Records, f.dir, res.Duration.Round(time.Millisecond), float64(res.Records)/max(res.Duration.Seconds(), 1e-9), len(targets))
	if len(unknown) > 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "not registered (their changelogs hold input positions but no data, so their kind is unknown): %s\n",
			strings.Join(unknown, ", "))
	}
	return nil
}

// replayTargets resolves the store names (or every changelog of the app)
// to topic partitions, naming what exists when something does not.
func replayTargets(ctx context.Context, adm *kadm.Client, f replayFlags) ([]changelog.RestoreTarget, error) {
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	all, err := adm.ListTopics(tctx)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	// A topic named like one of the app's may be another application's
	// whose id extends this one ("shop-eu-x-changelog" for "shop" and
	// "shop-eu"): as tidemark reset does, it is left out when such a
	// group exists, or replaying "shop" rebuilt shop-eu's stores too, as
	// stores "eu-x" of shop.
	groups, err := adm.ListGroups(tctx)
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	prefix, suffix := f.app+"-", "-changelog"
	var present, others []string
	for name := range all {
		if strings.HasPrefix(name, prefix) && strings.HasSuffix(name, suffix) && len(name) > len(prefix)+len(suffix) {
			if g := longerGroup(f.app, name, groups); g != "" {
				others = append(others, fmt.Sprintf("%s (application %s)", name, g))
				continue
			}
			present = append(present, strings.TrimSuffix(strings.TrimPrefix(name, prefix), suffix))
		}
	}
	sort.Strings(present)
	sort.Strings(others)
	stores := f.stores
	if len(stores) == 0 {
		if len(present) == 0 {
			msg := fmt.Sprintf("app %q has no changelog topics (looked for %s<store>%s)", f.app, prefix, suffix)
			if len(others) > 0 {
				msg += "; left out as other applications': " + strings.Join(others, ", ")
			}
			return nil, errors.New(msg)
		}
		stores = present
	}
	var targets []changelog.RestoreTarget
	for _, s := range stores {
		topic := changelog.TopicName(f.app, s)
		d, ok := all[topic]
		if !ok || d.Err != nil {
			return nil, fmt.Errorf("store %q: changelog topic %s does not exist; changelog topics of app %q: %s",
				s, topic, f.app, joinOrNone(present))
		}
		parts := d.Partitions.Numbers()
		if len(f.partitions) > 0 {
			var keep []int32
			for _, p := range f.partitions {
				if _, ok := d.Partitions[p]; !ok {
					return nil, fmt.Errorf("store %q: topic %s has no partition %d (it has %d)", s, topic, p, len(parts))
				}
				keep = append(keep, p)
			}
			parts = keep
		}
		for _, p := range parts {
			targets = append(targets, changelog.RestoreTarget{Store: s, Partition: p, Topic: topic})
		}
	}
	return targets, nil
}

func joinOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func brokersOrEnv(flag []string) []string {
	if len(flag) > 0 {
		return flag
	}
	var out []string
	for _, b := range strings.Split(os.Getenv("TIDEMARK_BROKERS"), ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}
