package main

import (
	"fmt"
	"time"

	"github.com/tidemark-streams/tidemark/frontier"
)

// Bounds of the commit settings, frontier.Options' ranges in the
// config's terms.
const (
	minCommitSetting = time.Millisecond
	maxCommitSetting = time.Hour
)

// commitOptions reads commit_policy, commit_interval and staleness_target
// into frontier options. Errors name the config key and its range:
// frontier's own name the Go fields (FixedInterval, MaxInterval,
// StalenessTarget), which a tidemark run user never wrote.
func (c serviceConfig) commitOptions() (frontier.Options, error) {
	var o frontier.Options
	switch frontier.Policy(c.CommitPolicy) {
	case frontier.PolicyAdaptive, frontier.PolicyFixed:
		o.Policy = frontier.Policy(c.CommitPolicy)
	default:
		return o, fmt.Errorf("config: commit_policy %q: want adaptive or fixed", c.CommitPolicy)
	}
	interval, err := positiveDuration("commit_interval", c.CommitInterval)
	if err != nil {
		return o, err
	}
	// Under fixed the interval is the period; under adaptive it caps the
	// interval the controller may choose, above its shortest.
	if o.Policy == frontier.PolicyFixed {
		o.FixedInterval = interval
		if interval != 0 && (interval < minCommitSetting || interval > maxCommitSetting) {
			return o, fmt.Errorf("config: commit_interval %s: the fixed policy's period, accepted range %v..%v", interval, minCommitSetting, maxCommitSetting)
		}
	} else {
		o.MaxInterval = interval
		if interval != 0 && (interval <= frontier.DefaultMinInterval || interval > maxCommitSetting) {
			return o, fmt.Errorf("config: commit_interval %s: the adaptive policy's longest interval, accepted range above %v (its shortest) up to %v",
				interval, frontier.DefaultMinInterval, maxCommitSetting)
		}
	}
	if o.StalenessTarget, err = positiveDuration("staleness_target", c.StalenessTarget); err != nil {
		return o, err
	}
	if t := o.StalenessTarget; t != 0 && (t < minCommitSetting || t > maxCommitSetting) {
		return o, fmt.Errorf("config: staleness_target %s: accepted range %v..%v", t, minCommitSetting, maxCommitSetting)
	}
	return o, nil
}

// positiveDuration parses a duration setting whose zero stands for its
// default downstream (frontier.Options, pipelines.Config): an explicit
// "0s" is refused rather than silently run with the default. Empty is 0.
func positiveDuration(field, v string) (time.Duration, error) {
	d, err := parseDuration(field, v)
	if err != nil {
		return 0, err
	}
	if v != "" && d == 0 {
		return 0, fmt.Errorf("config: %s %q: want a positive duration (leave it unset for the default)", field, v)
	}
	return d, nil
}
