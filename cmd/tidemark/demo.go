package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/tidemark-streams/tidemark/marketplace/gen"
	"github.com/tidemark-streams/tidemark/marketplace/pipelines"
	"github.com/tidemark-streams/tidemark/processor"
)

func init() { rootCmd.AddCommand(newDemoCmd()) }

type demoFlags struct {
	brokers    []string
	duration   time.Duration
	rate       float64
	seed       uint64
	partitions int32
	stateDir   string
	httpAddr   string
	app        string
	prefix     string
	threshold  int64
	disorder   time.Duration
	verbose    bool
	open       bool
	// onApp, when set (tests), is called with the app before it runs.
	onApp func(*processor.App)
}

func newDemoCmd() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the marketplace pipelines on an embedded broker with a live dashboard",
		Long: `demo starts an embedded Kafka-compatible broker (franz-go's kfake; or uses
--brokers), creates the topics, and runs the traffic generator and the four
marketplace pipelines (inventory availability, payment-velocity fraud, order
state with late-fulfillment alerts, cart prices against the catalog price
valid at the add) in this process, exactly-once. A
dashboard refreshes every second: input and output rates, the commit
interval the frontier controller chose, end-to-end staleness (p50/p99) as a
read_committed consumer sees it, lag, and live inventory read with
interactive queries. When stdout is not a terminal it prints one summary
line per second instead. The app's web view (/ui: live charts, the output
frontier, the topology) is printed on stderr and opened in a browser when
xdg-open and a display exist (--open=false: not).

Ctrl-C stops cleanly; --duration bounds the run and ends with a summary.`,
		Example: `  tidemark demo
  tidemark demo --duration 30s --rate 1000
  tidemark demo --brokers localhost:9092`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.brokers, "brokers", nil, "use these Kafka brokers instead of the embedded one (default $TIDEMARK_BROKERS if set)")
	fl.DurationVar(&f.duration, "duration", 0, "stop after this long and print a summary (0: until Ctrl-C)")
	fl.Float64Var(&f.rate, "rate", 500, "generated events per second over all topics")
	fl.Uint64Var(&f.seed, "seed", 1, "generator seed")
	fl.Int32Var(&f.partitions, "partitions", 2, "partitions of each topic the demo creates")
	fl.StringVar(&f.stateDir, "state-dir", "", "state directory (default: a temporary directory, removed at exit)")
	fl.StringVar(&f.httpAddr, "http", "127.0.0.1:0", "address of the app's HTTP API (/ui, /stores, /frontier, /metrics)")
	fl.BoolVar(&f.open, "open", true, "open the web view (/ui) with xdg-open when the machine has one and a display")
	fl.StringVar(&f.app, "application", "tidemark-demo", "application id (consumer group, internal topic prefix)")
	fl.StringVar(&f.prefix, "topic-prefix", "", "prefix of the input and output topic names (with --brokers, to keep the demo's topics apart on a shared cluster)")
	fl.Int64Var(&f.threshold, "fraud-threshold", 20, "payment attempts per user per minute that raise a fraud alert")
	fl.DurationVar(&f.disorder, "max-disorder", 2*time.Second, "how far before its send time an event may be stamped (0: in order); staleness includes it")
	fl.BoolVar(&f.verbose, "verbose", false, "log the runtime to stderr at info level (default: warnings only)")
	return cmd
}

func (f demoFlags) check() error {
	switch {
	case f.duration < 0:
		return fmt.Errorf("--duration %v: must not be negative", f.duration)
	case f.rate <= 0 || f.rate > gen.MaxRate:
		return fmt.Errorf("--rate %v: accepted range (0, %d]", f.rate, gen.MaxRate)
	case f.partitions < 1 || f.partitions > 64:
		return fmt.Errorf("--partitions %d: accepted range 1..64", f.partitions)
	case f.disorder < 0 || f.disorder > time.Hour:
		return fmt.Errorf("--max-disorder %v: accepted range 0..1h", f.disorder)
	case f.threshold < 1:
		return fmt.Errorf("--fraud-threshold %d: must be ≥ 1", f.threshold)
	}
	return nil
}

func runDemo(ctx context.Context, stdout, stderr io.Writer, f demoFlags) error {
	if err := f.check(); err != nil {
		return err
	}
	if len(f.brokers) == 0 {
		if env := os.Getenv("TIDEMARK_BROKERS"); env != "" {
			f.brokers = splitList(env)
		}
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	tty := isTerminal(stdout)
	// On a terminal the log goes to a file, so warnings (Badger's cache
	// notes, rebalances) do not tear the dashboard; the footer names it.
	logw, logPath := stderr, ""
	if tty {
		lf, err := os.CreateTemp("", "tidemark-demo-*.log")
		if err != nil {
			return fmt.Errorf("demo: log file: %w", err)
		}
		defer lf.Close()
		logw, logPath = lf, lf.Name()
	}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: level}))

	pcfg := pipelines.Config{FraudThreshold: f.threshold,
		Inputs: gen.DefaultTopics.WithPrefix(f.prefix), Outputs: pipelines.DefaultOutputs.WithPrefix(f.prefix)}
	if err := pcfg.EnsureDefaults().Validate(); err != nil {
		return err
	}
	topics, err := pipelines.Topics(nil, pcfg)
	if err != nil {
		return err
	}
	brokers := f.brokers
	if len(brokers) == 0 {
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(f.partitions, topics...))
		if err != nil {
			return fmt.Errorf("demo: start embedded broker: %w", err)
		}
		defer cluster.Close()
		brokers = cluster.ListenAddrs()
		fmt.Fprintf(stderr, "demo: embedded broker (kfake) at %v\n", brokers)
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return fmt.Errorf("demo: admin client: %w", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	if len(f.brokers) > 0 {
		if err := ensureTopics(ctx, adm, topics, f.partitions); err != nil {
			return err
		}
	}
	// The clicks topic is generated but read by no pipeline.
	if err := ensureTopics(ctx, adm, []string{pcfg.Inputs.Clicks}, f.partitions); err != nil {
		return err
	}

	stateDir := f.stateDir
	if stateDir == "" {
		if stateDir, err = os.MkdirTemp("", "tidemark-demo-"); err != nil {
			return fmt.Errorf("demo: state dir: %w", err)
		}
		defer os.RemoveAll(stateDir)
	}
	topo, err := pipelines.Build(f.app, nil, pcfg)
	if err != nil {
		return err
	}
	app, err := processor.NewApp(topo, processor.WithBrokers(brokers...), processor.WithStateDir(stateDir),
		processor.WithHTTP(f.httpAddr), processor.WithLogger(log))
	if err != nil {
		return err
	}
	if f.onApp != nil {
		f.onApp(app)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return fmt.Errorf("demo: generator client: %w", err)
	}
	defer prod.Close()

	if f.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration)
		defer cancel()
	}
	dash := newDashboard(pcfg.Outputs)
	// The tenants topic feeds a global table: no group offsets to count.
	inputs := []string{pcfg.Inputs.Carts, pcfg.Inputs.Inventory, pcfg.Inputs.Payments, pcfg.Inputs.Fulfillment, pcfg.Inputs.Products}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := app.Run(gctx); err != nil {
			return fmt.Errorf("demo: pipelines: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		// Event time starts now, so staleness is measured against the wall clock.
		disorder := f.disorder
		if disorder == 0 {
			disorder = gen.NoDisorder
		}
		_, err := gen.Run(gctx, prod, gen.RunOptions{
			Config: gen.Config{Seed: f.seed, Start: time.Now(), Profile: gen.Profile{Rate: f.rate}, Topics: pcfg.Inputs,
				MaxDisorder: disorder},
			Progress: dash.onGen, ProgressEvery: 250 * time.Millisecond,
		})
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("demo: generator: %w", err)
		}
		return nil
	})
	g.Go(func() error { return dash.consumeOutputs(gctx, brokers, pcfg.Outputs.All(), pcfg.Outputs.Availability) })
	var last snapshot
	g.Go(func() error {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		announced := false
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-tick.C:
			}
			if addr := app.HTTPAddr(); addr != "" && !announced {
				announced = true
				url := "http://" + addr + "/ui"
				fmt.Fprintf(stderr, "demo: web view at %s\n", url)
				if f.open {
					openBrowser(stderr, url)
				}
			}
			dash.pollProgress(gctx, adm, f.app, inputs)
			dash.pollInventory(gctx, app, 5)
			last = dash.frame(app)
			if tty {
				dash.render(stdout, last, pcfg.Outputs, app.HTTPAddr(), logPath)
			} else {
				fmt.Fprintln(stdout, last.line())
			}
		}
	})
	err = g.Wait()
	// One last look after the app committed what it had on shutdown.
	fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	dash.pollProgress(fctx, adm, f.app, inputs)
	cancel()
	last = dash.frame(app)
	fmt.Fprintln(stdout, last.summary(pcfg.Outputs))
	if logPath != "" {
		fmt.Fprintln(stdout, "demo log:", logPath)
	}
	return err
}

// ensureTopics creates topics that do not exist yet.
func ensureTopics(ctx context.Context, adm *kadm.Client, topics []string, partitions int32) error {
	resps, err := adm.CreateTopics(ctx, partitions, -1, nil, topics...)
	if err != nil {
		return fmt.Errorf("create topics %v: %w", topics, err)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}

// splitList splits a comma-separated environment value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// openBrowser opens url with xdg-open when the machine has one and a
// graphical session (without one xdg-open falls back to a text browser,
// which would fight the dashboard for the terminal); otherwise the printed
// URL is all there is.
func openBrowser(stderr io.Writer, url string) {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return
	}
	path, err := exec.LookPath("xdg-open")
	if err != nil {
		return
	}
	cmd := exec.Command(path, url)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "demo: xdg-open: %v\n", err)
		return
	}
	go func() { _ = cmd.Wait() }()
}
