package serde_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/tidemark-streams/tidemark/serde"
)

// With WithAutoRegister(false), a subject that does not hold the serde's
// schema is the registry's answer, a refusal like an incompatible schema:
// no retry changes it, so the app must stop and say so rather than redo
// its transaction forever logging "schema registry unavailable". A 404
// without the registry's error code (a wrong URL, a proxy) is not that
// answer: it is an outage, and must not be reported as an unregistered
// schema.
func TestAvroUnregisteredSchemaIsARefusalNotAnOutage(t *testing.T) {
	fake := newFake(t)
	cl := fake.Client(t)
	s := mustAvro[userV1T](t, userV1, serde.WithRegistry(cl, "users-value"), serde.WithAutoRegister(false))
	_, err := s.Encode(nil, userV1T{ID: "a", Tier: "FREE"}) // 40401: no such subject
	if !errors.Is(err, serde.ErrSchemaNotRegistered) || serde.RegistryUnavailable(err) {
		t.Fatalf("unknown subject: %v (RegistryUnavailable %v); want ErrSchemaNotRegistered, not an outage", err, serde.RegistryUnavailable(err))
	}
	fake.Add("users-value", userV2)
	_, err = s.Encode(nil, userV1T{ID: "a", Tier: "FREE"}) // 40403: subject lacks the schema
	if !errors.Is(err, serde.ErrSchemaNotRegistered) || serde.RegistryUnavailable(err) {
		t.Fatalf("subject without the schema: %v (RegistryUnavailable %v); want ErrSchemaNotRegistered, not an outage", err, serde.RegistryUnavailable(err))
	}

	proxy := httptest.NewServer(http.NotFoundHandler())
	defer proxy.Close()
	pcl, err := sr.NewClient(sr.URLs(proxy.URL))
	if err != nil {
		t.Fatal(err)
	}
	p := mustAvro[userV1T](t, userV1, serde.WithRegistry(pcl, "users-value"), serde.WithAutoRegister(false))
	_, err = p.Encode(nil, userV1T{ID: "a", Tier: "FREE"})
	if errors.Is(err, serde.ErrSchemaNotRegistered) || !serde.RegistryUnavailable(err) || !errors.Is(err, serde.ErrEncode) {
		t.Fatalf("lookup through a plain 404: %v (RegistryUnavailable %v); want an outage, not ErrSchemaNotRegistered", err, serde.RegistryUnavailable(err))
	}
}

// A 429 or 408 is waited out (RegistryUnavailable), so its error must not
// say the registry refused: the app logs it while it retries.
func TestRegistryRetriedStatusesAreNotCalledRefusals(t *testing.T) {
	for _, tc := range []struct {
		status  int
		refused bool
	}{{http.StatusTooManyRequests, false}, {http.StatusRequestTimeout, false}, {http.StatusConflict, true}, {http.StatusForbidden, true}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			fmt.Fprintf(w, `{"error_code":%d,"message":"no"}`, tc.status)
		}))
		cl, err := sr.NewClient(sr.URLs(srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		s := mustAvro[userV1T](t, userV1, serde.WithRegistry(cl, "users-value"))
		_, err = s.Encode(nil, userV1T{ID: "a", Tier: "FREE"})
		srv.Close()
		if got := strings.Contains(err.Error(), "refused"); got != tc.refused || serde.RegistryUnavailable(err) == tc.refused {
			t.Errorf("%d: %v (RegistryUnavailable %v); want refused=%v", tc.status, err, serde.RegistryUnavailable(err), tc.refused)
		}
	}
}
