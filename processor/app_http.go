package processor

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// startHTTP binds HTTPAddr and returns the server, or nil when disabled.
func (a *App) startHTTP() (*http.Server, error) {
	if a.cfg.HTTPAddr == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", a.cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("processor: listen %s: %w", a.cfg.HTTPAddr, err)
	}
	a.httpAddr.Store(l.Addr().String())
	// Other instances hand this address to clients for our keys, so it
	// must be one they can dial: the default (HTTPAddr) may name port 0 or
	// no host.
	a.cfg.AdvertisedHTTP = advertisedAddr(a.cfg.AdvertisedHTTP, l.Addr().String())
	srv := &http.Server{Handler: a.Handler()}
	go func() { _ = srv.Serve(l) }() // ends with Shutdown/Close in Run
	return srv, nil
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
//	GET /metrics                     Prometheus metrics
//	GET /healthz                     200 while the process runs
//	GET /readyz                      200 once every assigned task is restored
//	GET /frontier[?sink=S&covers=T]  committed output frontier per sink partition
//	GET /stores/{store}/keys/{key}   a key of a key-value store (key as UTF-8)
//	GET /stores/{store}/range[?from=&to=&limit=]
func (a *App) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.Ready() {
			http.Error(w, "not ready: tasks are being assigned or restored", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("GET /frontier", a.serveFrontier)
	mux.HandleFunc("GET /stores/{store}/keys/{key}", a.serveGet)
	mux.HandleFunc("GET /stores/{store}/range", a.serveRange)
	return mux
}

type entryJSON struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Encoding string `json:"encoding"` // "utf8" or "base64"
}

func encodeEntry(kv KV, timestamped bool) entryJSON {
	v := kv.Value
	if timestamped && len(v) >= 8 {
		v = v[8:] // the 8-byte timestamp prefix of DSL stores
	}
	e := entryJSON{Key: string(kv.Key), Value: string(v), Encoding: "utf8"}
	// Text only when it reads as text: a serialized number is often valid
	// UTF-8 made of control characters.
	if !utf8.Valid(v) || bytes.ContainsFunc(v, unicode.IsControl) {
		e.Value, e.Encoding = base64.StdEncoding.EncodeToString(v), "base64"
	}
	return e
}

func (a *App) serveGet(w http.ResponseWriter, r *http.Request) {
	name, key := r.PathValue("store"), r.PathValue("key")
	res, err := a.Get(r.Context(), name, []byte(key))
	switch {
	case errors.Is(err, ErrNotLocal):
		body := map[string]any{"error": "key owned by another instance", "partition": res.Partition,
			"owner": res.Owner.Instance, "owner_http": res.Owner.HTTP}
		if res.Owner.HTTP != "" {
			w.Header().Set("Location", "http://"+res.Owner.HTTP+r.URL.RequestURI())
		}
		writeJSON(w, http.StatusMisdirectedRequest, body)
		return
	case errors.Is(err, ErrUnknownQueryStore):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	if !res.Found {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "key not found", "partition": res.Partition})
		return
	}
	info, _ := a.topo.Store(name)
	writeJSON(w, http.StatusOK, encodeEntry(res.Entries[0], info.Timestamped))
}

func (a *App) serveRange(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("store")
	q := r.URL.Query()
	var from, to []byte
	if v := q.Get("from"); v != "" {
		from = []byte(v)
	}
	if v := q.Get("to"); v != "" {
		to = []byte(v)
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	res, err := a.Range(r.Context(), name, from, to, limit)
	if errors.Is(err, ErrUnknownQueryStore) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	info, _ := a.topo.Store(name)
	entries := make([]entryJSON, 0, len(res.Entries))
	for _, kv := range res.Entries {
		entries = append(entries, encodeEntry(kv, info.Timestamped))
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
