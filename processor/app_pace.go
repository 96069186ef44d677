package processor

// Restore pacing.
//
// A task that moves here restores its changelogs (or loads a snapshot)
// on its own goroutine while the instance's other tasks keep processing.
// Off the record loop is not enough on a small machine: the restore's
// fetch decoding and Badger writes take the CPU the running tasks' records
// need, and the broker on the same cores needs its share too. Measured by
// `bench --failover` (2 cores, broker on the same machine), an unpaced
// full restore of a 1M-key table raised the other partitions' p99
// staleness 2-10x for as long as it ran. So while the instance has running
// tasks, restores, standbys catching up and snapshot loads work at most
// Config.RestoreShare of the time (changelog.SleepPacer), all of them
// together from one budget (two moved partitions restoring at once get
// half of it each), and at full speed when nothing else runs (a cold
// start, a lone instance).

// WithRestoreShare sets Config.RestoreShare.
func WithRestoreShare(share float64) Option { return func(c *Config) { c.RestoreShare = share } }

// DefaultRestoreShare is Config.RestoreShare's default: a restore beside
// running tasks works half of the time.
const DefaultRestoreShare = 0.5

// hasRunningTasks reports whether a thread of the App runs a task.
func (a *App) hasRunningTasks() bool {
	for _, th := range a.threads {
		if th.tasks.Load() > 0 {
			return true
		}
	}
	return false
}
