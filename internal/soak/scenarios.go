package soak

import (
	"context"
	"slices"
	"time"
)

// The scenarios of the campaign.
var (
	// KillCampaign SIGKILLs one of 1–3 instances at random moments and
	// restarts it, sometimes with its state directory deleted or damaged
	// (Fleet.Damage); sometimes it removes the state directory of a
	// running instance instead; now and then
	// the fleet grows or shrinks (gracefully) within 1–3.
	KillCampaign = Scenario{Name: "kill", About: "SIGKILL instances at random moments, restart (sometimes from empty or damaged state)", schedule: killCampaign}
	// BrokerKills SIGKILLs the broker and restarts it on the same data and
	// ports while two instances run.
	BrokerKills = Scenario{Name: "broker-kill", About: "SIGKILL the broker and restart it (same data, same ports)", BrokerFaults: true, schedule: brokerKills}
	// RebalanceStorm scales 1→3→1→2→1 instances, members leaving by a mix
	// of SIGTERM and SIGKILL; a killed member comes back at the next
	// scale-up, with its state.
	RebalanceStorm = Scenario{Name: "storm", About: "rebalance storm 1→3→1→2→1, leaving by SIGTERM or SIGKILL", schedule: rebalanceStorm}
	// BrokerPause freezes the broker (SIGSTOP), longer than the group's
	// session timeout, then resumes it.
	BrokerPause = Scenario{Name: "broker-pause", About: "SIGSTOP the broker, then SIGCONT", BrokerFaults: true, schedule: brokerPause}
	// Freezes suspends instances (SIGSTOP) for 0.2–20 s, now and then two
	// at once, then resumes them, or kills them frozen and restarts them.
	// Shorter than the session timeout a freeze only stalls; longer, the
	// group moves the frozen instance's partitions while its transaction
	// is open, and it resumes as a zombie; past the transaction timeout
	// the broker has aborted that transaction too.
	Freezes = Scenario{Name: "freeze", About: "SIGSTOP instances for 0.2-20 s (zombies past the session timeout), then SIGCONT or SIGKILL", schedule: freezes}
	// Partitions cuts instances off the broker (each instance reaches it
	// through a netfault.Proxy of its own that then drops every packet) for
	// 0.5-20 s, now and then two at once, while they keep running and
	// their peers still reach them over HTTP. Unlike a frozen one, a
	// partitioned instance sees its requests time out, its commit's
	// outcome unknown, and keeps answering queries from its state.
	Partitions = Scenario{Name: "partition", About: "cut instances off the broker for 0.5-20 s (requests time out; the group moves on past the session timeout), then heal", Proxied: true, schedule: partitions}
)

// Scenarios is the whole campaign, in order.
var Scenarios = []Scenario{KillCampaign, BrokerKills, RebalanceStorm, BrokerPause, Freezes, Partitions}

// ScenarioByName finds a scenario.
func ScenarioByName(name string) (Scenario, bool) {
	for _, s := range Scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

func killCampaign(ctx context.Context, r *Run) error {
	kills := r.Pick(8, 50)
	for range 1 + r.Rand.IntN(3) {
		if err := r.Start(r.NewInstanceID()); err != nil {
			return err
		}
	}
	if err := sleep(ctx, r.Between(3*time.Second, 4*time.Second)); err != nil {
		return err
	}
	for k := range kills {
		if err := sleep(ctx, r.Between(1500*time.Millisecond, time.Duration(r.Pick(5, 6))*time.Second)); err != nil {
			return err
		}
		running := r.Fleet.Running()
		// Now and then resize the fleet within 1..3, gracefully.
		if r.Rand.Float64() < 0.15 {
			if len(running) < 3 && (len(running) == 1 || r.Rand.IntN(2) == 0) {
				id := r.NewInstanceID()
				if stopped := r.Fleet.Stopped(); len(stopped) > 0 && r.Rand.IntN(2) == 0 {
					id = stopped[r.Rand.IntN(len(stopped))]
				}
				if err := r.Start(id); err != nil {
					return err
				}
			} else if len(running) > 1 {
				if err := r.Term(running[r.Rand.IntN(len(running))]); err != nil {
					return err
				}
			}
			running = r.Fleet.Running()
		}
		if len(running) == 0 {
			// A crash the supervisor has not restarted yet.
			continue
		}
		victim := running[r.Rand.IntN(len(running))]
		if r.Rand.Float64() < r.Opts.Damage/3 {
			// Not a kill this time: the state directory of a running
			// instance removed under it.
			if err := r.Fleet.RemoveState(victim); err != nil {
				return err
			}
			r.damaged()
			r.Logf("kill %d/%d: %s's state directory removed while it runs", k+1, kills, victim)
			continue
		}
		down := r.Between(0, 2*time.Second)
		wipe := r.Rand.Float64() < 0.25
		if err := r.Kill(victim); err != nil {
			return err
		}
		r.Logf("kill %d/%d: %s down for %s%s", k+1, kills, victim, down.Round(time.Millisecond), map[bool]string{true: ", state directory deleted"}[wipe])
		if wipe {
			if err := r.Fleet.Wipe(victim); err != nil {
				return err
			}
		} else if r.Rand.Float64() < r.Opts.Damage {
			what, err := r.Fleet.Damage(victim, r.Rand)
			if err != nil {
				return err
			}
			if what != "" {
				r.damaged()
				r.Logf("kill %d/%d: %s's state damaged: %s", k+1, kills, victim, what)
			}
		}
		if err := sleep(ctx, down); err != nil {
			return err
		}
		if err := r.Start(victim); err != nil {
			return err
		}
	}
	return sleep(ctx, r.Between(4*time.Second, 5*time.Second))
}

func brokerKills(ctx context.Context, r *Run) error {
	for _, id := range []string{r.NewInstanceID(), r.NewInstanceID()} {
		if err := r.Start(id); err != nil {
			return err
		}
	}
	if err := sleep(ctx, r.Between(6*time.Second, 8*time.Second)); err != nil {
		return err
	}
	kills := r.Pick(2, 3)
	for range kills {
		if err := r.KillBroker(ctx, r.Between(500*time.Millisecond, 4*time.Second)); err != nil {
			return err
		}
		if err := sleep(ctx, r.Between(time.Duration(r.Pick(6, 20))*time.Second, time.Duration(r.Pick(8, 35))*time.Second)); err != nil {
			return err
		}
	}
	return nil
}

func rebalanceStorm(ctx context.Context, r *Run) error {
	sizes := []int{1, 3, 1, 2, 1}
	cycles := r.Pick(1, 3)
	// Holds outlast the session timeout, so a killed member's partitions
	// move while its transaction still hangs.
	hold := func() error {
		return sleep(ctx, r.Between(time.Duration(r.Pick(8, 12))*time.Second, time.Duration(r.Pick(10, 20))*time.Second))
	}
	killed := map[string]bool{} // left by SIGKILL and not back yet
	for c := range cycles {
		r.Logf("storm cycle %d/%d: %v", c+1, cycles, sizes)
		for i, size := range sizes {
			running := r.Fleet.Running()
			switch {
			case size > len(running):
				// Joiners: members that left gracefully first, then killed
				// ones (with their state), then new ones. A member that
				// left by SIGTERM taking over while a killed member's
				// transaction hangs is the hard case for restores.
				for range size - len(running) {
					var termed, dead []string
					for _, id := range r.Fleet.Stopped() {
						if killed[id] {
							dead = append(dead, id)
						} else {
							termed = append(termed, id)
						}
					}
					id := r.NewInstanceID()
					switch {
					case len(termed) > 0:
						id = termed[r.Rand.IntN(len(termed))]
					case len(dead) > 0:
						id = dead[r.Rand.IntN(len(dead))]
					}
					delete(killed, id)
					if err := r.Start(id); err != nil {
						return err
					}
				}
			case size < len(running):
				leavers := slices.Clone(running)
				r.Rand.Shuffle(len(leavers), func(a, b int) { leavers[a], leavers[b] = leavers[b], leavers[a] })
				leavers = leavers[:len(running)-size]
				// A mix: when two leave, one is killed and one stopped,
				// so every cycle has both; a lone leaver flips a coin.
				kills := []bool{r.Rand.IntN(2) == 0}
				if len(leavers) > 1 {
					kills = []bool{true, false}
					r.Rand.Shuffle(2, func(a, b int) { kills[a], kills[b] = kills[b], kills[a] })
				}
				for j, id := range leavers {
					if j < len(kills) && kills[j] {
						if err := r.Kill(id); err != nil {
							return err
						}
						killed[id] = true
					} else if err := r.Term(id); err != nil {
						return err
					}
				}
			}
			r.Logf("storm: %d instance(s) %v (step %d/%d)", size, r.Fleet.Running(), i+1, len(sizes))
			if err := hold(); err != nil {
				return err
			}
		}
	}
	// Killed members come back, as a supervisor would bring them back.
	var back []string
	for id := range killed {
		back = append(back, id)
	}
	slices.Sort(back)
	for _, id := range back {
		if err := r.Start(id); err != nil {
			return err
		}
	}
	return sleep(ctx, r.Between(4*time.Second, 5*time.Second))
}

func brokerPause(ctx context.Context, r *Run) error {
	for _, id := range []string{r.NewInstanceID(), r.NewInstanceID()} {
		if err := r.Start(id); err != nil {
			return err
		}
	}
	if err := sleep(ctx, r.Between(time.Duration(r.Pick(5, 15))*time.Second, time.Duration(r.Pick(6, 25))*time.Second)); err != nil {
		return err
	}
	pause := time.Duration(r.Pick(8, 20)) * time.Second
	if err := r.PauseBroker(ctx, pause); err != nil {
		return err
	}
	return sleep(ctx, r.Between(time.Duration(r.Pick(8, 25))*time.Second, time.Duration(r.Pick(10, 35))*time.Second))
}

func freezes(ctx context.Context, r *Run) error {
	return isolations(ctx, r, "freeze", func(id string, d time.Duration) func() error {
		kill := r.Rand.Float64() < 0.2
		return func() error { return r.Freeze(ctx, id, d, kill) }
	})
}

func partitions(ctx context.Context, r *Run) error {
	return isolations(ctx, r, "partition", func(id string, d time.Duration) func() error {
		return func() error { return r.Partition(ctx, id, d) }
	})
}

// isolations runs 2–3 instances and, round after round, isolates one of
// them (a quarter of the rounds two, overlapping) with fault(id, d),
// which draws what else it needs from r.Rand and returns the fault to run.
// The lengths d are a third of each kind: within the session timeout (a
// stall), the session timeout to 3 s past it (the group moves on while
// the isolated instance's transaction is open), and past the
// transaction timeout as well (11–20 s, 11–13 s in the short runs: the
// broker aborted it too).
func isolations(ctx context.Context, r *Run, what string, fault func(id string, d time.Duration) func() error) error {
	for range 2 + r.Rand.IntN(2) {
		if err := r.Start(r.NewInstanceID()); err != nil {
			return err
		}
	}
	if err := sleep(ctx, r.Between(4*time.Second, 6*time.Second)); err != nil {
		return err
	}
	length := func() time.Duration {
		switch r.Rand.IntN(3) {
		case 0:
			return r.Unscaled(200*time.Millisecond, 3*time.Second)
		case 1:
			return r.Unscaled(r.Opts.SessionTimeout, r.Opts.SessionTimeout+3*time.Second)
		default:
			return r.Unscaled(11*time.Second, time.Duration(r.Pick(13, 20))*time.Second)
		}
	}
	rounds := r.Pick(4, 12)
	for k := range rounds {
		if err := sleep(ctx, r.Between(time.Second, 4*time.Second)); err != nil {
			return err
		}
		running := r.Fleet.Running()
		if len(running) == 0 {
			continue
		}
		r.Rand.Shuffle(len(running), func(a, b int) { running[a], running[b] = running[b], running[a] })
		victims := running[:1]
		if len(running) > 1 && r.Rand.Float64() < 0.25 {
			victims = running[:2]
		}
		r.Logf("%s %d/%d: %v", what, k+1, rounds, victims)
		// Each victim on its own clock, started a little apart, so two
		// faults overlap without ending together. The draws happen here,
		// in order, so a seed replays the schedule.
		errs := make(chan error, len(victims))
		for i, id := range victims {
			run := fault(id, length())
			lag := time.Duration(i) * r.Between(0, 2*time.Second)
			go func() {
				if err := sleep(ctx, lag); err != nil {
					errs <- err
					return
				}
				errs <- run()
			}()
		}
		var first error
		for range victims {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		if first != nil {
			return first
		}
	}
	return sleep(ctx, r.Between(4*time.Second, 5*time.Second))
}
