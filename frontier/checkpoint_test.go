package frontier

import (
	"math"
	"testing"
	"time"
)

func TestCheckpointRules(t *testing.T) {
	tests := []struct {
		name       string
		opts       CheckpointOptions
		writeRate  float64 // changelog records/s
		cost       time.Duration
		wantReason CheckpointReason
		check      func(t *testing.T, s *CheckpointScheduler, d CheckpointDecision, gap time.Duration)
	}{
		{"daly's rule with cap: light writes follow Daly", CheckpointOptions{MeanTimeBetweenFailures: time.Hour}, 10, 200 * time.Millisecond, CheckpointDaly,
			func(t *testing.T, s *CheckpointScheduler, d CheckpointDecision, gap time.Duration) {
				m := 1 / s.hazard.rate()
				want := math.Sqrt(2*0.2*m)*(1+math.Sqrt(0.2/(2*m))/3+0.2/(18*m)) - 0.2
				if math.Abs(d.Interval.Seconds()-want) > 0.01*want {
					t.Errorf("interval %v, want Daly's %.1fs", d.Interval, want)
				}
			}},
		{"daly's rule with cap: heavy writes are capped by the restore target", CheckpointOptions{MeanTimeBetweenFailures: time.Hour, RestoreTarget: 10 * time.Second, RestoreRatePrior: 10000}, 50000, 200 * time.Millisecond, CheckpointRestoreTarget,
			func(t *testing.T, s *CheckpointScheduler, d CheckpointDecision, gap time.Duration) {
				if young := s.Young(); d.Interval >= young {
					t.Errorf("interval %v, want below Young's %v", d.Interval, young)
				}
				// The replay when the checkpoint started, plus the writes
				// while it ran, must fit the target.
				replay := time.Duration((gap.Seconds() + 0.2) * 50000 / 10000 * 1e9)
				if replay > 10*time.Second+50*time.Millisecond { // one 10ms step of writes
					t.Errorf("replay at checkpoint end %v, want ≤ 10s", replay)
				}
			}},
		{"checkpoint interval never below its minimum", CheckpointOptions{MeanTimeBetweenFailures: time.Second, MinInterval: 5 * time.Second}, 10, time.Millisecond, CheckpointMinInterval,
			func(t *testing.T, s *CheckpointScheduler, d CheckpointDecision, gap time.Duration) {
				if d.Interval < 5*time.Second || gap < 5*time.Second {
					t.Errorf("interval %v gap %v, want ≥ 5s", d.Interval, gap)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewCheckpointScheduler(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			now := t0
			var last time.Time
			var d CheckpointDecision
			var gaps []time.Duration
			// Writes land every 10ms; the runtime ticks every 100ms or at
			// the decision's Wake, whichever is sooner.
			var wake time.Time
			var carry float64
			for i := 0; i < 4*3600*100 && (len(gaps) < 3 || now.Sub(t0) < 2*time.Minute); i++ {
				now = now.Add(10 * time.Millisecond)
				carry += tt.writeRate / 100
				s.ObserveChangelogWrites(now, int(carry))
				carry -= float64(int(carry))
				if i%10 != 0 && now.Before(wake) {
					continue
				}
				d = s.Tick(now)
				wake = d.Wake
				if d.Checkpoint {
					if d.Reason != tt.wantReason {
						t.Fatalf("checkpoint for %v, want %v", d.Reason, tt.wantReason)
					}
					if !last.IsZero() {
						gaps = append(gaps, now.Sub(last))
					}
					last = now
					s.ObserveCheckpointStarted(now)
					s.ObserveCheckpointFinished(now.Add(tt.cost), tt.cost)
				}
			}
			if len(gaps) == 0 {
				t.Fatal("no two checkpoints in four hours")
			}
			tt.check(t, s, d, gaps[len(gaps)-1])
		})
	}
}

func TestCheckpointStateRules(t *testing.T) {
	s, _ := NewCheckpointScheduler(CheckpointOptions{MinInterval: time.Second})
	if d := s.Tick(t0.Add(2 * time.Hour)); d.Checkpoint || d.Reason != CheckpointIdle {
		t.Fatalf("no writes: %+v, want idle", d)
	}
	s.ObserveChangelogWrites(t0.Add(2*time.Hour), 1)
	if d := s.Tick(t0.Add(4 * time.Hour)); !d.Checkpoint {
		t.Fatalf("writes and the interval passed: %+v, want checkpoint", d)
	}
	s.ObserveCheckpointStarted(t0.Add(4 * time.Hour))
	if d := s.Tick(t0.Add(6 * time.Hour)); d.Checkpoint || d.Reason != CheckpointInFlight {
		t.Fatalf("during a checkpoint: %+v, want in-flight", d)
	}
	s.ObserveCheckpointFailed(t0.Add(6 * time.Hour))
	if d := s.Tick(t0.Add(6 * time.Hour)); d.Replay <= 0 {
		t.Fatalf("after a failed checkpoint replay %v, want the covered writes back", d.Replay)
	}
	s.ObserveRestore(100000, 2*time.Second)
	if got := s.restoreRate(); got != 50000 {
		t.Fatalf("restore rate %v after one measurement, want 50000", got)
	}
}

func TestCheckpointOptionsValidate(t *testing.T) {
	for _, tt := range []struct {
		name  string
		opts  CheckpointOptions
		field string
	}{
		{"zero options are valid defaults", CheckpointOptions{}, ""},
		{"max interval must exceed min", CheckpointOptions{MinInterval: time.Minute, MaxInterval: time.Minute}, "MaxInterval"},
		{"restore rate must be positive", CheckpointOptions{RestoreRatePrior: -1}, "RestoreRatePrior"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			err := o.Validate()
			if o != tt.opts {
				t.Fatalf("Validate modified the options: %+v", o)
			}
			if (err == nil) != (tt.field == "") {
				t.Fatalf("Validate = %v, want error naming %q", err, tt.field)
			}
			if err != nil && !containsAll(err.Error(), tt.field+" = ", "want") {
				t.Fatalf("Validate = %v, want it to name %s and the range", err, tt.field)
			}
		})
	}
	var o CheckpointOptions
	if o.EnsureDefaults(); o.RestoreTarget != DefaultRestoreTarget || o.RestoreRatePrior != DefaultRestoreRatePrior {
		t.Fatalf("EnsureDefaults left %+v", o)
	}
}
