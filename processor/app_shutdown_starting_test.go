package processor_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/topology"
)

// cancelOnLog calls cancel the first time a record whose message contains
// substr is logged: a shutdown at a known step of Run.
type cancelOnLog struct {
	slog.Handler
	substr string
	once   *sync.Once
	cancel func()
}

func (h cancelOnLog) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.substr) {
		h.once.Do(h.cancel)
	}
	return h.Handler.Handle(ctx, r)
}

func (h cancelOnLog) WithAttrs(as []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(as)
	return h
}

func (h cancelOnLog) WithGroup(name string) slog.Handler {
	h.Handler = h.Handler.WithGroup(name)
	return h
}

// TestShutdownWhileRestoringGlobalStoresIsClean: the context ends while
// Run loads a global store, before any task runs. Run returns nil, as for
// any shutdown: RunApps would otherwise report the Apps it stops because
// another failed as failing too, and `tidemark run` exit with an error on
// a SIGTERM during start-up.
func TestShutdownWhileRestoringGlobalStoresIsClean(t *testing.T) {
	t.Parallel()
	in, out, merchants := kafkatestNewTopic(t, 2), kafkatestNewTopic(t, 2), kafkatestNewTopic(t, 1)
	kafkatest.Produce(t, &kgo.Record{Topic: merchants, Key: []byte("m1"), Value: []byte("acme")})
	b := topology.NewBuilder(kafkatestName(t, "global-stop"))
	b.GlobalTable(merchants, serde.String(), serde.String(), topology.Named("merchants"))
	b.Stream(in, serde.String(), serde.String()).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(cancelOnLog{Handler: slog.NewTextHandler(t.Output(), nil), substr: "global store", once: &sync.Once{}, cancel: cancel})
	app, err := processor.NewApp(topo, processor.WithBrokers(kafkatest.Brokers(t)...), processor.WithStateDir(t.TempDir()), processor.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Run(ctx); err != nil {
		t.Fatalf("Run stopped while it loaded a global store = %v, want nil (a shutdown)", err)
	}
	if ctx.Err() == nil {
		t.Fatal("Run returned before the global store's load was logged")
	}
}
