package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"time"
)

// servePprof serves net/http/pprof on TIDEMARK_BENCH_PPROF (host:port)
// while ctx lives, so a worker under a benchmark can be profiled and traced
// (go tool pprof / go tool trace) at the load that matters. Unset: nothing.
// Several workers at once (the failover cases' two instances) take the
// port and the next free ones after it, in the order they start.
func servePprof(ctx context.Context) error {
	addr := os.Getenv("TIDEMARK_BENCH_PPROF")
	if addr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := listenFrom(addr)
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

// listenFrom listens on addr or, if its port is taken, on one of the next
// seven ports.
func listenFrom(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("pprof port %q: %w", port, err)
	}
	for i := range 8 {
		ln, lerr := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p+i)))
		if lerr == nil {
			return ln, nil
		}
		err = lerr
	}
	return nil, err
}
