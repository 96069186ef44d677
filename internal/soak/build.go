package soak

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	broker "github.com/tidemark-streams/tidemark/internal/testbroker"
)

// ServicePackage is the service under test.
const ServicePackage = "github.com/tidemark-streams/tidemark/internal/soak/countsvc"

// BuildService builds countsvc into dir once per run and returns its path.
// It is an ordinary build (no -race): the service runs as a user would run
// it.
func BuildService(ctx context.Context, dir string) (string, error) {
	root, err := broker.FindRepoRoot()
	if err != nil {
		return "", err
	}
	gocmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gocmd); err != nil {
		gocmd = "go"
	}
	bin := filepath.Join(dir, "countsvc")
	cmd := exec.CommandContext(ctx, gocmd, "build", "-o", bin, ServicePackage)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("soak: go build %s: %w\n%s", ServicePackage, err, out)
	}
	return bin, nil
}
