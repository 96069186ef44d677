package serde_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/tidemark-streams/tidemark/serde"
)

// A Confluent producer may register a schema that names a type from
// another subject (schema references). The serde does not resolve them,
// so it cannot judge such a record: it must not call it undecodable
// (ErrDecode would skip or dead-letter good records) nor wait for the
// registry forever, but refuse with an error that says why.
func TestAvroWriterSchemaWithReferencesIsRefusedNotSkipped(t *testing.T) {
	fake := newFake(t)
	cl := fake.Client(t)
	type addr struct {
		City string `avro:"city"`
	}
	type person struct {
		Name string `avro:"name"`
		Home addr   `avro:"home"`
	}
	r := mustAvro[person](t, `{"type":"record","name":"Person","namespace":"acme","fields":[
		{"name":"name","type":"string"},
		{"name":"home","type":{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}}]}`,
		serde.WithRegistry(cl, "people-value"))
	fake.Add("address", `{"type":"record","name":"Address","namespace":"acme","fields":[{"name":"city","type":"string"}]}`)
	id := fake.AddSchema("people-value", sr.Schema{
		Schema:     `{"type":"record","name":"Person","namespace":"acme","fields":[{"name":"name","type":"string"},{"name":"home","type":"acme.Address"}]}`,
		References: []sr.SchemaReference{{Name: "acme.Address", Subject: "address", Version: 1}},
	})
	_, err := r.Decode(wire(id, []byte{0x02, 'a', 0x02, 'b'}))
	if err == nil {
		t.Fatal("decoded")
	}
	if errors.Is(err, serde.ErrDecode) || !errors.Is(err, serde.ErrRegistry) || serde.RegistryUnavailable(err) {
		t.Fatalf("writer schema with references: %v (ErrDecode %v, RegistryUnavailable %v); want a refusal: ErrRegistry, not ErrDecode, not an outage",
			err, errors.Is(err, serde.ErrDecode), serde.RegistryUnavailable(err))
	}
}
