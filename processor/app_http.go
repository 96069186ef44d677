package processor

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tidemark-streams/tidemark/changelog"
	"github.com/tidemark-streams/tidemark/store"
	"github.com/tidemark-streams/tidemark/topology"
)

// listenHTTP binds HTTPAddr, or returns nil when it is empty. Run calls it
// first, before it touches the cluster or the state directory, so a taken
// or unusable address fails a start that has changed nothing yet.
func (a *App) listenHTTP() (net.Listener, error) {
	if a.cfg.HTTPAddr == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", a.cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("processor: cannot listen on the HTTP address %s (Config.HTTPAddr: WithHTTP, or http: in tidemark.yaml): %w; free the port or choose another address (nothing was created on the cluster or in the state directory)", a.cfg.HTTPAddr, err)
	}
	// Other instances hand this address to clients for our keys, so it
	// must be one they can dial: the default (HTTPAddr) may name port 0 or
	// no host.
	a.cfg.AdvertisedHTTP = advertisedAddr(a.cfg.AdvertisedHTTP, l.Addr().String())
	return l, nil
}

// startHTTP serves the App's API on l (from listenHTTP) and returns the
// server, or nil when l is nil.
func (a *App) startHTTP(l net.Listener) *http.Server {
	if l == nil {
		return nil
	}
	a.httpAddr.Store(l.Addr().String())
	// With port 0 this line is the only place an operator (or a harness)
	// learns the port.
	a.log.Info("serving HTTP", "addr", l.Addr().String(), "advertised", a.cfg.AdvertisedHTTP)
	srv := &http.Server{Handler: a.Handler()}
	go func() { _ = srv.Serve(l) }() // ends with Shutdown/Close in Run
	return srv
}

// advertisedAddr completes adv with what the listener bound: the bound port
// for a port 0 (or missing), and the host name for a missing or unspecified
// host (":8080", "0.0.0.0:8080").
func advertisedAddr(adv, bound string) string {
	host, port, err := net.SplitHostPort(adv)
	if err != nil {
		return adv
	}
	if port == "" || port == "0" {
		if _, bport, err := net.SplitHostPort(bound); err == nil {
			port = bport
		}
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}

// Handler serves the app's HTTP API; mount it in your own server if you
// prefer that to Config.HTTPAddr.
//
//	GET /metrics                                    Prometheus metrics
//	GET /healthz                                    200 while every stream thread's loop turns, 503 when one is stuck (LivenessTimeout)
//	GET /readyz                                     200 once every assigned task is restored, while in contact with the group
//	GET /peers                                      the peer failure detector: instances watched, removals (app_peers.go)
//	GET /frontier[?sink=S&covers=T]                 committed output frontier per sink partition
//	GET /ui                                         the web view: live charts, frontier, topology (app_ui.go)
//	GET /stores/{store}/keys/{key}                  a key of a key-value store
//	GET /stores/{store}/range[?from=&to=&limit=]    keys in [from, to) of this instance's partitions
//	GET /stores/{store}/windows/{key}[?from=&to=]   a key's windows whose start is in [from, to] (ms)
//	GET /stores/{store}/windows[?from=&to=&limit=]  every key's windows, this instance's partitions
//	GET /stores/{store}/sessions/{key}[?from=&to=]  a key's sessions overlapping [from, to] (ms)
//
// Store queries answer from committed state only, read off the record
// loop. Keys are UTF-8 path segments. Every store query takes
//
//	min_position=topic:partition:offset  (repeatable, or comma-separated)
//	wait=2s                              (default 0, at most 1m)
//	tenant=acme                          (a key's tenant, for a store fed by tenant placement: ForTenant)
//	partition=3                          (a key's partition: InPartition; required for a store fed
//	                                      through topology.WithPartitioner, else 400)
//
// and then answers only from local state at or past that position on the
// partitions it reads (the input offsets a producer got for its writes,
// plus one), waiting up to wait for commits to get it there; else 503 with
// the position the state has.
//
// A key's answer (200):
//
//	{"key": "sku-1", "value": "...", "encoding": "utf8"|"base64",
//	 "timestamp": 1700000000000,           // timestamped (DSL) stores: the 8-byte prefix, stripped from value
//	 "partition": 3,
//	 "position": {"orders": {"3": 1042}},  // input topic -> partition -> next offset the state reflects
//	 "changelog": {"app-counts-changelog": {"3": 77}}}
//
// range, windows and sessions answer {"entries": [entry...], "partitions":
// [...], "restoring": [...], "truncated": bool, "position": ..., "changelog":
// ...}, where a window entry adds "start" and "end" ([start, end); [start, end]
// for a sliding window) and a session entry "start" and "end" ([start, end]). Errors are
// {"error": "..."} with 400 for bad parameters, a store of another
// kind or a key whose partition a custom partitioner chose (give
// partition=), 404 for an unknown store or key, 421 for a key another instance
// owns (with "owner", "owner_http", "partition" and a Location header), 503
// while the key's partition is restoring here or owned by no one or this
// instance is out of contact with its group (ErrOutOfContact), or
// (range, windows) while a stream thread has no assignment (with
// Retry-After), when the state is behind min_position (with "position"),
// and 500 otherwise.
func (a *App) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", a.serveHealth)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.Ready() {
			http.Error(w, "not ready: tasks are being assigned or restored", http.StatusServiceUnavailable)
			return
		}
		if silent := a.silentThreads(time.Now()); len(silent) > 0 {
			http.Error(w, fmt.Sprintf("not ready: stream threads have not heard from the group coordinator for longer than the session timeout %s (thread: silent for) %v; their partitions may have moved",
				a.cfg.SessionTimeout, silent), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("GET /frontier", a.serveFrontier)
	mux.HandleFunc("GET /tasks", a.serveTasks)
	mux.HandleFunc("GET /peers", a.servePeers)
	mux.HandleFunc("GET /ui", a.serveUI)
	mux.HandleFunc("GET /ui/api/series", a.serveUISeries)
	mux.HandleFunc("GET /ui/api/frontier", a.serveUIFrontier)
	mux.HandleFunc("GET /ui/api/topology", a.serveUITopology)
	mux.HandleFunc("GET /stores/{store}/keys/{key}", a.serveGet)
	mux.HandleFunc("GET /stores/{store}/range", a.serveRange)
	mux.HandleFunc("GET /stores/{store}/windows/{key}", a.serveWindows)
	mux.HandleFunc("GET /stores/{store}/windows", a.serveAllWindows)
	mux.HandleFunc("GET /stores/{store}/sessions/{key}", a.serveSessions)
	return mux
}

type entryJSON struct {
	Key string `json:"key"`
	// KeyEncoding is "base64" for a key that does not read as text (a
	// serialized number), else omitted (utf8): written raw, JSON would
	// replace its invalid bytes with U+FFFD and distinct keys read alike.
	KeyEncoding string `json:"key_encoding,omitempty"`
	Value       string `json:"value"`
	Encoding    string `json:"encoding"` // the value's: "utf8" or "base64"
	Timestamp   *int64 `json:"timestamp,omitempty"`
	Start       *int64 `json:"start,omitempty"`
	End         *int64 `json:"end,omitempty"`
}

// answerJSON is what every answer says of the state it read.
type answerJSON struct {
	Partition  *int32   `json:"partition,omitempty"`
	Partitions []int32  `json:"partitions,omitempty"`
	Restoring  []int32  `json:"restoring,omitempty"`
	Truncated  bool     `json:"truncated,omitempty"`
	Position   Position `json:"position"`
	Changelog  Position `json:"changelog"`
}

func answerOf(res QueryResult, keyed bool) answerJSON {
	out := answerJSON{Restoring: res.Restoring, Truncated: res.Truncated, Position: res.Position, Changelog: res.Changelog}
	if keyed {
		out.Partition = &res.Partition
	} else {
		out.Partitions = res.Partitions
	}
	return out
}

func encodeEntry(kv KV, info topology.StoreInfo) entryJSON {
	v := kv.Value
	e := entryJSON{Key: string(kv.Key), Encoding: "utf8"}
	if info.Timestamped {
		if ts, rest, err := topology.DecodeTimestamped(v); err == nil {
			e.Timestamp, v = &ts, rest
		}
	}
	if info.Spec.Kind != store.KindKeyValue {
		e.Start, e.End = &kv.Start, &kv.End
	}
	e.Value = string(v)
	if !isText(v) {
		e.Value, e.Encoding = base64.StdEncoding.EncodeToString(v), "base64"
	}
	if !isText(kv.Key) {
		e.Key, e.KeyEncoding = base64.StdEncoding.EncodeToString(kv.Key), "base64"
	}
	return e
}

// isText reports whether b reads as text: valid UTF-8 without control
// characters (a serialized number is often valid UTF-8 made of them).
func isText(b []byte) bool { return utf8.Valid(b) && !bytes.ContainsFunc(b, unicode.IsControl) }

// answerShape is how serveQuery writes an answer.
type answerShape int

const (
	oneEntry          answerShape = iota // a key's entry, 404 when absent (keys)
	keyEntries                           // a key's windows or sessions, from and to as times
	partitionsEntries                    // the local partitions' entries (range)
	partitionsWindows                    // the local partitions' windows, from and to as times
)

func (a *App) serveGet(w http.ResponseWriter, r *http.Request) {
	a.serveQuery(w, r, oneEntry, func(p queryParams) (QueryResult, error) {
		return a.Get(r.Context(), p.store, p.key, p.opts...)
	})
}

func (a *App) serveRange(w http.ResponseWriter, r *http.Request) {
	var from, to []byte
	if v := r.URL.Query().Get("from"); v != "" {
		from = []byte(v)
	}
	if v := r.URL.Query().Get("to"); v != "" {
		to = []byte(v)
	}
	a.serveQuery(w, r, partitionsEntries, func(p queryParams) (QueryResult, error) {
		return a.Range(r.Context(), p.store, from, to, p.limit, p.opts...)
	})
}

func (a *App) serveWindows(w http.ResponseWriter, r *http.Request) {
	a.serveQuery(w, r, keyEntries, func(p queryParams) (QueryResult, error) {
		return a.FetchWindows(r.Context(), p.store, p.key, p.from, p.to, p.opts...)
	})
}

func (a *App) serveAllWindows(w http.ResponseWriter, r *http.Request) {
	a.serveQuery(w, r, partitionsWindows, func(p queryParams) (QueryResult, error) {
		return a.FetchAllWindows(r.Context(), p.store, p.from, p.to, p.limit, p.opts...)
	})
}

func (a *App) serveSessions(w http.ResponseWriter, r *http.Request) {
	a.serveQuery(w, r, keyEntries, func(p queryParams) (QueryResult, error) {
		return a.FetchSessions(r.Context(), p.store, p.key, p.from, p.to, p.opts...)
	})
}

// errBadParam is wrapped by the errors of query parameters: 400.
var errBadParam = errors.New("bad parameter")

// maxWait bounds a query's wait parameter.
const maxWait = time.Minute

// queryParams are a store query's parameters: the path's, from and to as
// times (ms since the epoch; unbounded by default; range reads them as
// keys itself), limit, and the freshness bound.
type queryParams struct {
	store    string
	key      []byte
	from, to int64
	limit    int
	opts     []QueryOption
}

func parseQuery(r *http.Request, shape answerShape) (queryParams, error) {
	q := r.URL.Query()
	p := queryParams{store: r.PathValue("store"), key: []byte(r.PathValue("key")), from: math.MinInt64, to: math.MaxInt64}
	var err error
	if shape == keyEntries || shape == partitionsWindows {
		if p.from, err = intParam(q, "from", p.from); err != nil {
			return p, err
		}
		if p.to, err = intParam(q, "to", p.to); err != nil {
			return p, err
		}
	}
	limit, err := intParam(q, "limit", 0)
	if err != nil {
		return p, err
	}
	p.limit = int(min(max(limit, 0), maxLimit))
	if q.Has("tenant") {
		p.opts = append(p.opts, ForTenant(q.Get("tenant")))
	}
	if q.Has("partition") {
		part, err := strconv.ParseInt(q.Get("partition"), 10, 32)
		if err != nil {
			return p, fmt.Errorf("%w: partition=%q is not a partition number", errBadParam, q.Get("partition"))
		}
		p.opts = append(p.opts, InPartition(int32(part)))
	}
	specs := q["min_position"]
	if len(specs) == 0 {
		return p, nil
	}
	bound, err := changelog.ParsePosition(specs...)
	if err != nil {
		return p, fmt.Errorf("%w: min_position: %v", errBadParam, err)
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		if wait, err = time.ParseDuration(v); err != nil || wait < 0 || wait > maxWait {
			return p, fmt.Errorf("%w: wait=%q: want a duration from 0 to %s", errBadParam, v, maxWait)
		}
	}
	p.opts = append(p.opts, AtLeast(bound, wait))
	return p, nil
}

// serveQuery runs a store query and writes its answer or error.
func (a *App) serveQuery(w http.ResponseWriter, r *http.Request, shape answerShape, run func(queryParams) (QueryResult, error)) {
	p, err := parseQuery(r, shape)
	var res QueryResult
	if err == nil {
		res, err = run(p)
	}
	if err != nil {
		a.writeQueryError(w, r, res, err)
		return
	}
	info := a.queryStoreInfo(r.PathValue("store"))
	answer := answerOf(res, shape == oneEntry || shape == keyEntries)
	if shape == oneEntry {
		if !res.Found {
			writeJSON(w, http.StatusNotFound, struct {
				Error string `json:"error"`
				answerJSON
			}{"key not found", answer})
			return
		}
		writeJSON(w, http.StatusOK, struct {
			entryJSON
			answerJSON
		}{encodeEntry(res.Entries[0], info), answer})
		return
	}
	entries := make([]entryJSON, 0, len(res.Entries))
	for _, kv := range res.Entries {
		entries = append(entries, encodeEntry(kv, info))
	}
	writeJSON(w, http.StatusOK, struct {
		Entries []entryJSON `json:"entries"`
		answerJSON
	}{entries, answer})
}

func (a *App) writeQueryError(w http.ResponseWriter, r *http.Request, res QueryResult, err error) {
	body := map[string]any{"error": err.Error()}
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, errBadParam), errors.Is(err, ErrStoreKind), errors.Is(err, ErrPartitionUnknown):
		code = http.StatusBadRequest
	case errors.Is(err, ErrUnknownQueryStore):
		code = http.StatusNotFound
	case errors.Is(err, ErrNotLocal):
		code = http.StatusMisdirectedRequest
		body["error"] = "key owned by another instance"
		body["partition"], body["owner"], body["owner_http"] = res.Partition, res.Owner.Instance, res.Owner.HTTP
		if res.Owner.HTTP != "" {
			w.Header().Set("Location", "http://"+res.Owner.HTTP+r.URL.RequestURI())
		}
	case errors.Is(err, ErrNotFresh):
		code = http.StatusServiceUnavailable
		body["position"], body["changelog"] = res.Position, res.Changelog
	case errors.Is(err, ErrRestoring), errors.Is(err, ErrNoOwner), errors.Is(err, ErrOutOfContact),
		errors.Is(err, store.ErrClosed), errors.Is(err, context.DeadlineExceeded):
		code = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, code, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func intParam(q url.Values, name string, dflt int64) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return dflt, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s=%q is not an integer", errBadParam, name, v)
	}
	return n, nil
}
