// Package srtest provides an in-process fake Confluent Schema Registry for
// tests: it serves the REST subset franz-go's sr.Client uses for serdes, so
// registry code paths run without a network or a real registry, and counts
// requests so tests can check caching.
//
// Served: POST /subjects/{subject}/versions (register), POST
// /subjects/{subject} (look a schema up under a subject) and GET
// /schemas/ids/{id}, with the registry's error bodies
// ({"error_code":40401,"message":...}).
package srtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// Registry is a fake registry. Ids are assigned from 1 in registration
// order; registering an identical schema text again returns its id, under
// any subject, like the real registry. It compares schema texts verbatim,
// not canonical forms.
type Registry struct {
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	byID     map[int]sr.Schema
	subjects map[string][]int
	calls    map[string]int
	down     bool
	delay    time.Duration
}

// Endpoint names for Calls.
const (
	Register = "register" // POST /subjects/{subject}/versions
	Lookup   = "lookup"   // POST /subjects/{subject}
	ByID     = "by-id"    // GET /schemas/ids/{id}
)

// NewRegistry starts a fake registry that stops when the test ends.
func NewRegistry(t testing.TB) *Registry {
	r := &Registry{byID: map[int]sr.Schema{}, subjects: map[string][]int{}, calls: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /subjects/{subject}/versions", r.register)
	mux.HandleFunc("POST /subjects/{subject}", r.lookup)
	mux.HandleFunc("GET /schemas/ids/{id}", r.schemaByID)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.URL, r.srv = srv.URL, srv
	return r
}

// Close stops the server early: clients then see a registry that cannot
// be reached (connection refused).
func (r *Registry) Close() { r.srv.Close() }

// Client returns a franz-go registry client for the fake.
func (r *Registry) Client(t testing.TB) *sr.Client {
	cl, err := sr.NewClient(sr.URLs(r.URL))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// Add registers an Avro schema under subject directly, as another producer
// would, and returns its id.
func (r *Registry) Add(subject, schema string) int {
	return r.AddSchema(subject, sr.Schema{Schema: schema})
}

// AddSchema registers a schema of any type under subject and returns its id.
func (r *Registry) AddSchema(subject string, s sr.Schema) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.add(subject, s)
}

// Subjects returns the ids registered under subject, in order.
func (r *Registry) Subjects(subject string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.subjects[subject]...)
}

// Fetches counts GET /schemas/ids requests, to test caching.
func (r *Registry) Fetches() int { return r.Calls(ByID) }

// Calls counts the requests to one endpoint (Register, Lookup, ByID),
// including failed ones.
func (r *Registry) Calls(endpoint string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[endpoint]
}

// SetDown makes every request fail with 503 (down) or succeed again.
func (r *Registry) SetDown(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
}

// SetDelay makes every request wait d before it is answered, to test
// client timeouts. The wait ends early when the client gives up.
func (r *Registry) SetDelay(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delay = d
}

func (r *Registry) add(subject string, s sr.Schema) int {
	id := 0
	for i, have := range r.byID {
		if have.Schema == s.Schema && have.Type == s.Type {
			id = i
		}
	}
	if id == 0 {
		id = len(r.byID) + 1
		r.byID[id] = s
	}
	for _, i := range r.subjects[subject] {
		if i == id {
			return id
		}
	}
	r.subjects[subject] = append(r.subjects[subject], id)
	return id
}

func fail(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error_code": code, "message": msg})
}

// begin counts the call, waits out the delay (without holding the lock)
// and reports whether the request may proceed; on false the response has
// been written.
func (r *Registry) begin(w http.ResponseWriter, req *http.Request, endpoint string) bool {
	r.mu.Lock()
	r.calls[endpoint]++
	delay, down := r.delay, r.down
	r.mu.Unlock()
	if delay > 0 {
		// Read the body first: only then does the server notice a
		// client that hangs up and cancel req.Context.
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		select {
		case <-time.After(delay):
		case <-req.Context().Done():
			return false
		}
	}
	if down {
		fail(w, http.StatusServiceUnavailable, 50003, "registry is down")
		return false
	}
	return true
}

func decodeSchema(w http.ResponseWriter, req *http.Request) (sr.Schema, bool) {
	var body sr.Schema
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil || body.Schema == "" {
		fail(w, http.StatusUnprocessableEntity, 42201, fmt.Sprintf("Invalid schema: %v", err))
		return body, false
	}
	return body, true
}

func (r *Registry) register(w http.ResponseWriter, req *http.Request) {
	if !r.begin(w, req, Register) {
		return
	}
	body, ok := decodeSchema(w, req)
	if !ok {
		return
	}
	r.mu.Lock()
	id := r.add(req.PathValue("subject"), body)
	r.mu.Unlock()
	fmt.Fprintf(w, `{"id":%d}`, id)
}

func (r *Registry) lookup(w http.ResponseWriter, req *http.Request) {
	if !r.begin(w, req, Lookup) {
		return
	}
	body, ok := decodeSchema(w, req)
	if !ok {
		return
	}
	subject := req.PathValue("subject")
	r.mu.Lock()
	defer r.mu.Unlock()
	ids, ok := r.subjects[subject]
	if !ok {
		fail(w, http.StatusNotFound, 40401, fmt.Sprintf("Subject '%s' not found.", subject))
		return
	}
	for version, id := range ids {
		if s := r.byID[id]; s.Schema == body.Schema && s.Type == body.Type {
			_ = json.NewEncoder(w).Encode(sr.SubjectSchema{Subject: subject, Version: version + 1, ID: id, Schema: s})
			return
		}
	}
	fail(w, http.StatusNotFound, 40403, "Schema not found")
}

func (r *Registry) schemaByID(w http.ResponseWriter, req *http.Request) {
	if !r.begin(w, req, ByID) {
		return
	}
	id, _ := strconv.Atoi(req.PathValue("id"))
	r.mu.Lock()
	s, ok := r.byID[id]
	r.mu.Unlock()
	if !ok {
		fail(w, http.StatusNotFound, 40403, fmt.Sprintf("Schema %d not found", id))
		return
	}
	_ = json.NewEncoder(w).Encode(s)
}
