package processor

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/tidemark-streams/tidemark/internal/testlog"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// TestStateLogsGoToTheAppsLogger: the state DB's log lines (here the
// owner it records in a new state directory) go to WithLogger's logger,
// with the App's attributes and level, not to slog.Default: 'tidemark run
// --log-level warn' printed "recording the owner of the state directory"
// and "task DB written sorted" at info level, in the default format and
// without app= or instance=.
func TestStateLogsGoToTheAppsLogger(t *testing.T) {
	var def testlog.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&def, nil)))
	defer slog.SetDefault(old)

	b := topology.NewBuilder("statelog")
	b.Stream("in", serde.String(), serde.String()).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var own testlog.Buffer
	a, err := NewApp(topo, WithBrokers("127.0.0.1:1"), WithStateDir(t.TempDir()),
		WithLogger(slog.New(slog.NewTextHandler(&own, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.openState(); err != nil {
		t.Fatal(err)
	}
	defer a.db.Close()
	if strings.Contains(def.String(), "recording the owner") {
		t.Fatalf("the state DB logged to slog.Default:\n%s", def.String())
	}
	got := own.String()
	if !strings.Contains(got, "recording the owner") || !strings.Contains(got, "app=statelog") {
		t.Fatalf("the App's logger has no owner line with app=statelog:\n%s", got)
	}
}
