package serde_test

import (
	"bytes"
	"testing"

	"github.com/tidemark-streams/tidemark/serde"
)

// Confluent's KafkaAvroSerializer writes a value of the primitive schema
// "bytes" as the header and then the bytes themselves, without Avro's
// length prefix, and its deserializer reads everything after the header as
// the value when the writer schema is "bytes" (AbstractKafkaAvroSerializer,
// AbstractKafkaAvroDeserializer). Avro[[]byte] with a registry must frame
// them the same way, or each side reads the other's values with two extra
// or two missing bytes.
func TestAvroRegistryBytesSchemaIsRawLikeConfluent(t *testing.T) {
	fake := newFake(t)
	cl := fake.Client(t)
	s := mustAvro[[]byte](t, `"bytes"`, serde.WithRegistry(cl, "blobs-value"))
	got, err := s.Encode(nil, []byte{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	id := fake.Subjects("blobs-value")[0]
	if want := wire(id, []byte{1, 2, 3}); !bytes.Equal(got, want) {
		t.Fatalf("Encode([1 2 3]) = %x, want %x (header, then the raw bytes, as Confluent writes them)", got, want)
	}
	if got, err := s.Encode(nil, []byte{}); err != nil || !bytes.Equal(got, wire(id, nil)) {
		t.Fatalf("Encode(empty) = %x, %v; want the header alone", got, err)
	}

	// What a Confluent producer wrote, with its own registration of
	// {"type":"bytes"}: read whole, whatever its first byte.
	javaID := fake.Add("blobs-value", `{"type":"bytes"}`)
	for _, payload := range [][]byte{{0x06, 'a', 'b', 'c'}, {0xff}, {}} {
		got, err := s.Decode(wire(javaID, payload))
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("Decode of Confluent's %x = %x, %v; want the payload itself", payload, got, err)
		}
	}
	// Its own output round-trips.
	b, _ := s.Encode(nil, []byte("xyz"))
	if got, err := s.Decode(b); err != nil || string(got) != "xyz" {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	// A string reader resolves a bytes writer's raw value.
	str := mustAvro[string](t, `"string"`, serde.WithRegistry(cl, "blobs-value"))
	if got, err := str.Decode(wire(javaID, []byte("hi"))); err != nil || got != "hi" {
		t.Fatalf("bytes writer read as a string: %q, %v; want \"hi\"", got, err)
	}
	// Other schemas keep Avro's framing: a string has its length.
	sb, _ := str.Encode(nil, "hi")
	if want := wire(fake.Subjects("blobs-value")[2], []byte{0x04, 'h', 'i'}); !bytes.Equal(sb, want) {
		t.Fatalf("string encodes as %x, want %x", sb, want)
	}
	// Without a registry the serde writes plain Avro, which only it reads.
	plain, _ := mustAvro[[]byte](t, `"bytes"`).Encode(nil, []byte{1})
	if !bytes.Equal(plain, []byte{0x02, 1}) {
		t.Fatalf("plain bytes = %x, want 0201", plain)
	}
}
