package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// report is what a bench subcommand writes and prints.
type report interface {
	WriteFiles(dir string) error
	Markdown(w io.Writer)
}

// resultsDirs are the directories a run of kind writes: out alone when
// given (an experiment: <kind>-latest stays the last default run), else
// internal/bench/results/<time>-<kind> and <kind>-latest.
func resultsDirs(root, kind, out string, now time.Time) []string {
	if out != "" {
		return []string{out}
	}
	results := filepath.Join(root, "internal", "bench", "results")
	return []string{filepath.Join(results, now.UTC().Format("20060102-150405")+"-"+kind), filepath.Join(results, kind+"-latest")}
}

// writeReport writes rep into every dir and prints it, returning runErr
// or else the first write error. Callers pass a report only when the run
// returned one (a typed nil would not compare equal to nil here).
func writeReport(rep report, dirs []string, runErr error) error {
	for _, dir := range dirs {
		if werr := rep.WriteFiles(dir); werr != nil && runErr == nil {
			runErr = werr
		}
	}
	rep.Markdown(os.Stdout)
	fmt.Fprintf(os.Stderr, "results in %s\n", strings.Join(dirs, " and "))
	return runErr
}

// progress prints a run's progress lines with the time of day.
func progress(s string) { fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), s) }
