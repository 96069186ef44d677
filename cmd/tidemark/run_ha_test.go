package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// The recovery settings reach the App from the file, the environment and
// the flags, each later source winning.
func TestRunConfigHASettingsReachTheApp(t *testing.T) {
	snaps := "file://" + t.TempDir()
	path := writeFile(t, "tidemark.yaml", "brokers: [k:9092]\nstandby_replicas: 1\nacceptable_recovery_lag: 500\nsnapshot_store: "+snaps+"\nmax_records_per_task_pass: 100\nthreads: 2\npeer_dead_after: 2s\nrestore_share: 0.8\nmax_warmup_replicas: 4\nliveness_timeout: 90s\n")
	var configPath string
	f := defaultServiceConfig()
	fl := pflag.NewFlagSet("run", pflag.ContinueOnError)
	addServiceFlags(fl, &configPath, &f)
	if err := fl.Parse([]string{"--standby-replicas", "2", "--peer-dead-after", "750ms"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TIDEMARK_LIVENESS_TIMEOUT": "2m", "TIDEMARK_MAX_RECORDS_PER_TASK_PASS": "-1", "TIDEMARK_STATE_DIR": t.TempDir(), "TIDEMARK_PROBING_REBALANCE_INTERVAL": "2m"}
	cfg, err := resolveServiceConfig(path, func(k string) string { return env[k] }, fl, f)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.validate()
	if err != nil {
		t.Fatal(err)
	}
	app, err := s.app(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := app.Config()
	if got.MaxWarmupReplicas != 4 || got.ProbingRebalanceInterval != 2*time.Minute {
		t.Fatalf("MaxWarmupReplicas %d (want the file's 4), ProbingRebalanceInterval %s (want the env's 2m)", got.MaxWarmupReplicas, got.ProbingRebalanceInterval)
	}
	if got.LivenessTimeout != 2*time.Minute {
		t.Fatalf("LivenessTimeout %s, want the env's 2m over the file's 90s", got.LivenessTimeout)
	}
	if got.PeerDeadAfter != 750*time.Millisecond || got.RestoreShare != 0.8 {
		t.Fatalf("PeerDeadAfter %s (want the flag's 750ms), RestoreShare %g (want the file's 0.8)", got.PeerDeadAfter, got.RestoreShare)
	}
	if got.StandbyReplicas != 2 || got.AcceptableRecoveryLag != 500 || got.Snapshots.URL != snaps || got.MaxRecordsPerTaskPass != -1 || got.Threads != 2 {
		t.Fatalf("standbys %d (want the flag's 2), recovery lag %d (want the file's 500), snapshots %q (want %q), records per pass %d (want the env's -1), threads %d (want 2)",
			got.StandbyReplicas, got.AcceptableRecoveryLag, got.Snapshots.URL, snaps, got.MaxRecordsPerTaskPass, got.Threads)
	}
}

func TestRunConfigHAErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ file, env, want string }{
		{file: "standby_replicas: -1", want: "standby_replicas -1"},
		{file: "acceptable_recovery_lag: -5", want: "acceptable_recovery_lag -5"},
		{file: "max_records_per_task_pass: -2", want: "max_records_per_task_pass -2"},
		{file: "threads: -1", want: "threads -1"},
		{file: "peer_dead_after: soon", want: `peer_dead_after "soon"`},
		{file: "restore_share: 1.5", want: "restore_share 1.5"},
		{file: "max_warmup_replicas: -1", want: "max_warmup_replicas -1"},
		{file: "probing_rebalance_interval: often", want: `probing_rebalance_interval "often"`},
		{file: "peer_dead_after: 50ms", want: "peer_dead_after 50ms: want at least 100ms"},
		{file: "liveness_timeout: never", want: `liveness_timeout "never"`},
		{file: "liveness_timeout: 10ms", want: "liveness_timeout 10ms: want at least 1s"},
		{file: "snapshot_store: /no/scheme", want: `snapshot_store "/no/scheme"`},
		{file: "snapshot_store: s3://bucket", want: "no s3:// driver"},
		{env: "x", want: `TIDEMARK_STANDBY_REPLICAS="x"`},
	} {
		path := writeFile(t, "tidemark.yaml", "brokers: [k:9092]\n"+tc.file+"\n")
		cfg, err := resolveServiceConfig(path, func(k string) string {
			if k == "TIDEMARK_STANDBY_REPLICAS" {
				return tc.env
			}
			return ""
		}, nil, defaultServiceConfig())
		if err == nil {
			_, err = cfg.validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q/%q: error %v, want it to contain %q", tc.file, tc.env, err, tc.want)
		}
	}
}
