package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// writeResults writes v as <name>.json and markdown's rendering as
// <name>.md into dir, creating it: the files every measurement leaves.
func writeResults(dir, name string, v any, markdown func(io.Writer)) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results dir %s: %w", dir, err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s.json: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
		return err
	}
	var md strings.Builder
	markdown(&md)
	return os.WriteFile(filepath.Join(dir, name+".md"), []byte(md.String()), 0o644)
}
