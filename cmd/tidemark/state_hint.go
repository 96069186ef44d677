package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// stateDirHint explains an open error of a --dir that is not a state
// directory but the --state-dir of 'tidemark run', which keeps each
// application's state in <state-dir>/<application>: it names the
// subdirectories that are state directories, so the user knows which
// --dir to give. err is returned unchanged when dir has none.
func stateDirHint(dir string, err error) error {
	entries, rerr := os.ReadDir(dir)
	if rerr != nil {
		return err
	}
	var subs []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, serr := os.Stat(filepath.Join(dir, e.Name(), "STATE")); serr == nil {
			subs = append(subs, filepath.Join(dir, e.Name()))
		}
	}
	if len(subs) == 0 {
		return err
	}
	return fmt.Errorf("%w; 'tidemark run --state-dir %s' keeps each application's state in a subdirectory: use --dir %s",
		err, dir, strings.Join(subs, " or --dir "))
}
