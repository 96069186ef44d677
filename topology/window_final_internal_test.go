package topology

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/store/memstore"
)

// countingWindow counts the scans a final emitter makes.
type countingWindow struct {
	store.Window
	scans int
}

func (w *countingWindow) FetchAll(from, to int64, fn func(key []byte, start int64, value []byte) bool) error {
	w.scans++
	return w.Window.FetchAll(from, to, fn)
}

// countingKV counts the cursor writes a final emitter makes.
type countingKV struct {
	store.KeyValue
	puts int
}

func (kv *countingKV) Put(k, v []byte) error {
	kv.puts++
	return kv.KeyValue.Put(k, v)
}

// TestFinalEmitterScansOncePerGridPoint: with a record per millisecond of
// stream time, a tumbling EmitFinal aggregation emits every window once,
// at the close time that reaches its end, and scans its store and writes
// its cursor about once per window, not once per millisecond; a task
// restarted between two grid points from the stored cursor neither repeats
// nor skips a final. Without the grid (advance 0, as for sliding windows)
// the same finals come out at the same close times.
func TestFinalEmitterScansOncePerGridPoint(t *testing.T) {
	const size = 1000
	open := func(kind store.Kind, name string) store.Store {
		s, err := memstore.NewProvider().Open(store.Spec{Name: name, Kind: kind, WindowSize: size, Retention: 1 << 40}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	run := func(advance int64, restartAt int64) (emitted []string, scans, puts int) {
		win := &countingWindow{Window: open(store.KindWindow, "w").(store.Window)}
		for _, start := range []int64{0, 1000, 2000, 3000} {
			for _, k := range []string{"b", "a"} {
				if err := win.Put([]byte(k), start, []byte(k)); err != nil {
					t.Fatal(err)
				}
			}
		}
		kv := &countingKV{KeyValue: open(store.KindKeyValue, "cursor").(store.KeyValue)}
		newEmitter := func() *finalEmitter {
			f, err := newFinalEmitter(kv, size)
			if err != nil {
				t.Fatal(err)
			}
			f.advance = advance
			return f
		}
		f := newEmitter()
		for ct := int64(-50); ct <= 3500; ct++ {
			if ct == restartAt {
				f = newEmitter() // a restart: only the stored cursor survives
			}
			err := f.emit(win, ct, func(k []byte, start int64, _ []byte) error {
				emitted = append(emitted, fmt.Sprintf("%s@%d closed at %d", k, start, ct))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		return emitted, win.scans, kv.puts
	}
	want := []string{"a@0 closed at 1000", "b@0 closed at 1000", "a@1000 closed at 2000", "b@1000 closed at 2000",
		"a@2000 closed at 3000", "b@2000 closed at 3000"}
	for _, restartAt := range []int64{-1000, 2500, 3000, 3001} {
		got, scans, puts := run(size, restartAt)
		if !slices.Equal(got, want) {
			t.Errorf("grid, restart at %d: finals\n%q\nwant\n%q", restartAt, got, want)
		}
		// The first call scans from nowhere; then one scan and one cursor
		// write per grid point crossed (0 … 3000), and after a restart
		// one more scan from the stored cursor.
		if scans > 6 || puts > 6 {
			t.Errorf("grid, restart at %d: %d scans, %d cursor writes over 3550 close times, want ≤ 6 each", restartAt, scans, puts)
		}
		ungridded, gscans, _ := run(0, restartAt)
		if !slices.Equal(ungridded, want) {
			t.Errorf("no grid, restart at %d: finals\n%q\nwant\n%q", restartAt, ungridded, want)
		}
		if gscans < 3000 {
			t.Errorf("no grid: %d scans, want one per close time (the grid is what saves them)", gscans)
		}
	}
}
