package bench

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"
)

// servePprof serves net/http/pprof on TIDEMARK_BENCH_PPROF (host:port)
// while ctx lives, so a worker under a benchmark can be profiled and traced
// (go tool pprof / go tool trace) at the load that matters. Unset: nothing.
func servePprof(ctx context.Context) error {
	addr := os.Getenv("TIDEMARK_BENCH_PPROF")
	if addr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the profile endpoint is best effort: the benchmark goes on
		}
	}()
	return nil
}
