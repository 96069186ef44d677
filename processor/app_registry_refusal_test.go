package processor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/tidemark-streams/tidemark/internal/kafkatest"
	"github.com/tidemark-streams/tidemark/processor"
	"github.com/tidemark-streams/tidemark/serde"
	"github.com/tidemark-streams/tidemark/serde/srtest"
	"github.com/tidemark-streams/tidemark/topology"
)

type regCity struct {
	City string `avro:"city"`
}

const regCitySchema = `{"type":"record","name":"City","namespace":"acme","fields":[{"name":"city","type":"string"}]}`

// A record whose writer schema uses Confluent schema references is fine:
// tidemark cannot resolve it, so it must stop and say so, not dead-letter
// (or skip) it as undecodable.
func TestRegistryWriterWithReferencesStopsTheAppNotDeadLettered(t *testing.T) {
	t.Parallel()
	fake := srtest.NewRegistry(t)
	cl := fake.Client(t)
	in, out, dlq := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	vs, err := serde.Avro[regCity](regCitySchema, serde.WithRegistry(cl, in+"-value"))
	if err != nil {
		t.Fatal(err)
	}
	b.Stream(in, serde.String(), vs).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	fake.Add("name", `{"type":"record","name":"Name","namespace":"acme","fields":[{"name":"n","type":"string"}]}`)
	id := fake.AddSchema(in+"-value", sr.Schema{
		Schema:     `{"type":"record","name":"City","namespace":"acme","fields":[{"name":"city","type":"string"},{"name":"name","type":"acme.Name"}]}`,
		References: []sr.SchemaReference{{Name: "acme.Name", Subject: "name", Version: 1}},
	})
	value := []byte{0, 0, 0, 0, byte(id), 0x02, 'a', 0x02, 'b'}
	kafkatest.Produce(t, &kgo.Record{Topic: in, Key: []byte("k"), Value: value})
	_, done := startApp(t, topo, processor.WithDeadLetterTopic(dlq))
	err = runError(t, done, 30*time.Second)
	if !errors.Is(err, serde.ErrSchemaReferences) || errors.Is(err, serde.ErrDecode) {
		t.Fatalf("Run: %v; want ErrSchemaReferences, not a deserialization error", err)
	}
	kafkatest.ConsumeExactly(t, dlq, 0, 2*time.Second, time.Second)
}

// WithAutoRegister(false) and a subject without the schema: the registry
// refused, so the app stops naming the cause rather than redoing its
// transaction forever as if the registry were down.
func TestUnregisteredOutputSchemaStopsTheApp(t *testing.T) {
	t.Parallel()
	fake := srtest.NewRegistry(t)
	cl := fake.Client(t)
	in, out := kafkatest.NewTopic(t, 1, nil), kafkatest.NewTopic(t, 1, nil)
	b := topology.NewBuilder(kafkatest.UniqueName(t, "app"))
	vs, err := serde.Avro[regCity](regCitySchema, serde.WithRegistry(cl, out+"-value"), serde.WithAutoRegister(false))
	if err != nil {
		t.Fatal(err)
	}
	b.Stream(in, serde.String(), serde.String()).
		MapValues(func(_ string, c string) regCity { return regCity{City: c} }).
		WithSerdes(serde.String(), vs).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte("delft")})
	_, done := startApp(t, topo)
	err = runError(t, done, 30*time.Second)
	if !errors.Is(err, serde.ErrSchemaNotRegistered) {
		t.Fatalf("Run: %v; want ErrSchemaNotRegistered", err)
	}
	kafkatest.ConsumeExactly(t, out, 0, 2*time.Second, time.Second)
}
