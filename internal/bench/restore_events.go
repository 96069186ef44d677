package bench

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Workers report restores on stdout, one line each, so the failover
// measurement can tell how the new owner made the moved state current:
//
//	RESTORED <task> <store> <records>   a changelog restore finished
//	SNAPSHOT <task> <bytes>             a snapshot was loaded (tidemark)
const (
	restoredLine = "RESTORED"
	snapshotLine = "SNAPSHOT"
)

func printRestored(task, store string, records int64) {
	fmt.Printf("%s %s %s %d\n", restoredLine, task, store, records)
}

func printSnapshot(task string, bytes int64) {
	fmt.Printf("%s %s %d\n", snapshotLine, task, bytes)
}

type event struct {
	at   time.Time
	line string
}

// eventLog keeps a worker's event lines.
type eventLog struct {
	mu sync.Mutex
	ev []event
}

func (l *eventLog) add(line string) {
	if line == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ev = append(l.ev, event{time.Now(), line})
}

// restoresSince sums what the worker reported after t: changelog records
// restored, and snapshots loaded with their bytes.
func (l *eventLog) restoresSince(t time.Time) (records int64, snapshots int, snapshotBytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.ev {
		if e.at.Before(t) {
			continue
		}
		f := strings.Fields(e.line)
		switch {
		case len(f) == 4 && f[0] == restoredLine:
			n, _ := strconv.ParseInt(f[3], 10, 64)
			records += n
		case len(f) == 3 && f[0] == snapshotLine:
			n, _ := strconv.ParseInt(f[2], 10, 64)
			snapshots++
			snapshotBytes += n
		}
	}
	return records, snapshots, snapshotBytes
}
