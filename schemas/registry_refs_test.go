package schemas

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/tidemark-streams/tidemark/serde"
)

// A writer schema with Confluent schema references cannot be compiled
// alone; the record was not judged, so it must not be reported as
// undecodable (skipped or dead-lettered), but refused: serde.ErrRegistry
// with serde.ErrSchemaReferences, which no retry helps.
func TestRegistryWriterSchemaWithReferencesIsRefusedNotSkipped(t *testing.T) {
	ctx := context.Background()
	fake, reg := newFakeRegistry(t)
	s, err := Payment.Registry(ctx, reg, "payments-value")
	if err != nil {
		t.Fatal(err)
	}
	good, _ := s.Encode(nil, samplePayment())
	// The same record type with a field whose type another subject holds.
	text := strings.Replace(Payment.Schema(), `"fields"`, `"fields":[{"name":"extra","type":"acme.Extra"}],"x"`, 1)
	id := fake.AddSchema("payments-value", sr.Schema{Schema: text,
		References: []sr.SchemaReference{{Name: "acme.Extra", Subject: "extra", Version: 1}}})
	_, err = s.DecodeContext(ctx, wire(id, good[5:]))
	if err == nil || errors.Is(err, serde.ErrDecode) || !errors.Is(err, serde.ErrSchemaReferences) || serde.RegistryUnavailable(err) {
		t.Fatalf("writer schema with references: %v; want ErrSchemaReferences, not ErrDecode, not an outage", err)
	}
}
