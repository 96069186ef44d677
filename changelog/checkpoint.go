package changelog

import (
	"context"
	"fmt"
	"time"
)

// CheckpointCost is what a checkpoint cost, for the frontier's checkpoint
// scheduler (Young's rule wants δ, the cost of one checkpoint).
type CheckpointCost struct {
	// Bytes written to Badger since the previous checkpoint: what this
	// sync had to make durable.
	Bytes int64
	// Duration of the sync.
	Duration time.Duration
	// LSMBytes and VlogBytes are Badger's on-disk size after the sync:
	// what an incremental backup or a full copy would move.
	LSMBytes, VlogBytes int64
}

// Checkpoint makes everything applied so far durable, in every open task
// DB (a task DB being restored is synced when its restore reopens it, and
// one that closed was synced by its close): after it returns, a
// machine crash loses no applied state, and a restart replays only the
// changelog tail since the offsets Badger now durably holds. Apply does not
// sync (Kafka is the durable log, and a lost unsynced Apply is replayed
// from the changelog); Checkpoint is the separate, cheaper-to-schedule
// recovery point of the design.
func (db *DB) Checkpoint(ctx context.Context) (CheckpointCost, error) {
	if err := ctx.Err(); err != nil {
		return CheckpointCost{}, fmt.Errorf("changelog: checkpoint: %w", err)
	}
	tdbs, done, err := db.readers()
	if err != nil {
		return CheckpointCost{}, fmt.Errorf("changelog: checkpoint %s: %w", db.dir, err)
	}
	defer done()
	bytes := db.written.Swap(0)
	start := time.Now()
	var cost CheckpointCost
	for _, tdb := range tdbs {
		if err := tdb.bdb.Sync(); err != nil {
			db.written.Add(bytes)
			return CheckpointCost{}, fmt.Errorf("changelog: checkpoint %s: sync task DB %s: %w", db.dir, tdb.id, err)
		}
		lsm, vlog := tdb.bdb.Size()
		cost.LSMBytes += lsm
		cost.VlogBytes += vlog
	}
	cost.Bytes, cost.Duration = bytes, time.Since(start)
	return cost, nil
}
