package bench

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Without TIDEMARK_BENCH_SERIES a series records nothing; with it, each
// second's outputs become one JSON line carrying the run's labels, in
// second order, appended to what the file held.
func TestSecondSeriesAppendsOneLinePerSecond(t *testing.T) {
	t.Setenv(seriesEnv, "")
	if s := newSecondSeries(); s != nil {
		t.Fatalf("series without %s: %v, want nil", seriesEnv, s)
	}
	var off secondSeries
	off.observe(1, 5) // must not panic
	path := filepath.Join(t.TempDir(), "series.jsonl")
	t.Setenv(seriesEnv, path)
	for run := range 2 {
		s := newSecondSeries()
		for _, us := range []int64{1000, 2000, 50000} {
			s.observe(3, us)
		}
		s.observe(1, 7000)
		if err := s.write(map[string]any{"mode": "on", "round": run + 1}); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []map[string]any
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		rows = append(rows, row)
	}
	if len(rows) != 4 {
		t.Fatalf("%d lines, want 4 (two runs of two seconds): %v", len(rows), rows)
	}
	first, second := rows[0], rows[1]
	if first["second"] != 1.0 || first["n"] != 1.0 || second["second"] != 3.0 || second["n"] != 3.0 {
		t.Errorf("run 1 rows %v, %v: want second 1 (1 output) then 3 (3 outputs)", first, second)
	}
	if second["mode"] != "on" || second["round"] != 1.0 || rows[3]["round"] != 2.0 {
		t.Errorf("labels %v / %v: want mode on, rounds 1 then 2", second, rows[3])
	}
	if m := second["max_ms"].(float64); m < 49.5 || m > 50.5 {
		t.Errorf("second 3 max %v ms, want 50", m)
	}
}
