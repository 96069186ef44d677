package bench

import (
	"fmt"
	"time"
)

// noOutputs is the error of a rate run whose system made none of its
// outputs visible while input was sent: its quantiles are zeros, which a
// table would otherwise show as the best staleness of all.
func noOutputs(sent int, outputs int64, measure time.Duration) error {
	if sent == 0 || outputs > 0 {
		return nil
	}
	return fmt.Errorf("no output visible within the %s measured, %d records sent (the system did not commit in time)", measure, sent)
}
