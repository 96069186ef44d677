// Package schemastest provides an in-process fake Confluent Schema Registry
// for tests: it serves the endpoints tidemark's serdes call, so registry
// code paths run without a network or a real registry.
package schemastest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

// Registry is a fake registry serving POST /subjects/{subject}/versions and
// GET /schemas/ids/{id}. Ids are assigned from 1 in registration order;
// registering an identical schema text again returns its id.
type Registry struct {
	URL string

	mu       sync.Mutex
	byID     map[int]string
	subjects map[string][]int
	fetches  int
	down     bool
}

// NewRegistry starts a fake registry that stops when the test ends.
func NewRegistry(t testing.TB) *Registry {
	r := &Registry{byID: map[int]string{}, subjects: map[string][]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /subjects/{subject}/versions", r.register)
	mux.HandleFunc("GET /schemas/ids/{id}", r.schemaByID)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Client returns a franz-go registry client for the fake.
func (r *Registry) Client(t testing.TB) *sr.Client {
	cl, err := sr.NewClient(sr.URLs(r.URL))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// Add registers schema under subject directly, as another producer would,
// and returns its id.
func (r *Registry) Add(subject, schema string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.add(subject, schema)
}

// Subjects returns the ids registered under subject, in order.
func (r *Registry) Subjects(subject string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.subjects[subject]...)
}

// Fetches counts GET /schemas/ids requests, to test caching.
func (r *Registry) Fetches() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fetches
}

// SetDown makes every request fail with 503 (down) or succeed again.
func (r *Registry) SetDown(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
}

func (r *Registry) add(subject, schema string) int {
	id := 0
	for i, s := range r.byID {
		if s == schema {
			id = i
		}
	}
	if id == 0 {
		id = len(r.byID) + 1
		r.byID[id] = schema
	}
	for _, i := range r.subjects[subject] {
		if i == id {
			return id
		}
	}
	r.subjects[subject] = append(r.subjects[subject], id)
	return id
}

func (r *Registry) unavailable(w http.ResponseWriter) bool {
	if r.down {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error_code":50003,"message":"registry is down"}`)
	}
	return r.down
}

func (r *Registry) register(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unavailable(w) {
		return
	}
	var body sr.Schema
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, `{"id":%d}`, r.add(req.PathValue("subject"), body.Schema))
}

func (r *Registry) schemaByID(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unavailable(w) {
		return
	}
	r.fetches++
	id, _ := strconv.Atoi(req.PathValue("id"))
	s, ok := r.byID[id]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error_code":40403,"message":"Schema %d not found"}`, id)
		return
	}
	_ = json.NewEncoder(w).Encode(sr.Schema{Schema: s})
}
