package schemas

import (
	"embed"
	"encoding/json"
	"fmt"

	"github.com/linkedin/goavro/v2"
)

// Files holds the embedded .avsc schemas, for tools that register or print
// them.
//
//go:embed *.avsc
var Files embed.FS

// Spec describes one event type: its embedded Avro schema, the compiled
// codec and the mapping to its Go struct. The exported Specs are built once
// at package init and are safe for concurrent use.
type Spec[T Event] struct {
	file       string
	text       string
	name       string // full Avro name
	codec      *goavro.Codec
	fields     []avroField            // reader fields, for resolution
	toNative   func(T) map[string]any // goavro form; binary_test checks appendBin against it
	appendBin  func([]byte, T) []byte
	fromBin    func([]byte) (T, error) // records written with the embedded schema
	fromNative func(map[string]any) (T, error)
	self       *resolution // writer schema == reader schema
}

// The specs of the marketplace events.
var (
	Click       = mustSpec("click.avsc", clickToNative, clickBinary, clickFromBinary, clickFromNative)
	Cart        = mustSpec("cart.avsc", cartToNative, cartBinary, cartFromBinary, cartFromNative)
	Inventory   = mustSpec("inventory.avsc", inventoryToNative, inventoryBinary, inventoryFromBinary, inventoryFromNative)
	Payment     = mustSpec("payment.avsc", paymentToNative, paymentBinary, paymentFromBinary, paymentFromNative)
	Fulfillment = mustSpec("fulfillment.avsc", fulfillmentToNative, fulfillmentBinary, fulfillmentFromBinary, fulfillmentFromNative)
)

// mustSpec panics on a broken embedded schema: that is a build defect, and
// the package's tests catch it before anyone ships it.
func mustSpec[T Event](file string, to func(T) map[string]any, bin func([]byte, T) []byte, fromBin func([]byte) (T, error), from func(map[string]any) (T, error)) *Spec[T] {
	b, err := Files.ReadFile(file)
	if err != nil {
		panic(fmt.Sprintf("schemas: read embedded %s: %v", file, err))
	}
	s := &Spec[T]{file: file, text: string(b), toNative: to, appendBin: bin, fromBin: fromBin, fromNative: from}
	rec, err := parseRecord(s.text)
	if err != nil {
		panic(fmt.Sprintf("schemas: %s: %v", file, err))
	}
	s.name, s.fields = rec.fullName(), rec.Fields
	var zero T
	if want := "tidemark.marketplace." + string(zero.Type()); s.name != want {
		panic(fmt.Sprintf("schemas: %s defines %s, want %s", file, s.name, want))
	}
	if s.codec, err = goavro.NewCodec(s.text); err != nil {
		panic(fmt.Sprintf("schemas: compile %s: %v", file, err))
	}
	s.self = &resolution{codec: s.codec}
	return s
}

// Name is the full Avro name, e.g. tidemark.marketplace.ClickEvent.
func (s *Spec[T]) Name() string { return s.name }

// Schema is the text of the embedded schema, as registered with a registry.
func (s *Spec[T]) Schema() string { return s.text }

// avroRecord is the part of a record schema that resolution needs.
type avroRecord struct {
	Type      any         `json:"type"`
	Name      string      `json:"name"`
	Namespace string      `json:"namespace"`
	Fields    []avroField `json:"fields"`
}

type avroField struct {
	Name    string          `json:"name"`
	Default json.RawMessage `json:"default"` // nil when the field has no default
}

func (r avroRecord) fullName() string {
	if r.Namespace == "" || containsDot(r.Name) {
		return r.Name
	}
	return r.Namespace + "." + r.Name
}

func containsDot(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return true
		}
	}
	return false
}

// parseRecord reads the name and fields of a record schema. A schema that is
// not a record returns a record with Name describing its type, so the caller
// reports it as the wrong event type.
func parseRecord(text string) (avroRecord, error) {
	var rec avroRecord
	if err := json.Unmarshal([]byte(text), &rec); err != nil {
		var prim string
		if json.Unmarshal([]byte(text), &prim) == nil {
			return avroRecord{Name: prim}, nil
		}
		return avroRecord{Name: "(non-record schema)"}, nil
	}
	if rec.Type != "record" {
		if t, ok := rec.Type.(string); ok {
			return avroRecord{Name: t}, nil
		}
		return avroRecord{Name: "(non-record schema)"}, nil
	}
	return rec, nil
}

// resolution decodes records written with one writer schema into the
// reader's struct: goavro decodes with the writer's codec (it does not
// implement Avro schema resolution itself), fields the writer lacks are
// filled from the reader's defaults, and fields only the writer has are
// ignored by the struct mapping.
type resolution struct {
	codec *goavro.Codec
	fill  map[string]any
}

// resolve builds the resolution for a writer schema text. It fails with
// ErrWrongEventType when the writer is another record type, and with
// ErrIncompatibleSchema when a reader field without default is missing.
func (s *Spec[T]) resolve(writer string) (*resolution, error) {
	rec, err := parseRecord(writer)
	if err != nil {
		return nil, err
	}
	if got := rec.fullName(); got != s.name {
		return nil, &WrongEventTypeError{Want: s.name, Got: got}
	}
	codec, err := goavro.NewCodec(writer)
	if err != nil {
		return nil, fmt.Errorf("%w: compile writer schema: %v", ErrIncompatibleSchema, err)
	}
	if codec.CanonicalSchema() == s.codec.CanonicalSchema() {
		return s.self, nil
	}
	inWriter := make(map[string]bool, len(rec.Fields))
	for _, f := range rec.Fields {
		inWriter[f.Name] = true
	}
	res := &resolution{codec: codec, fill: map[string]any{}}
	for _, f := range s.fields {
		if inWriter[f.Name] {
			continue
		}
		if f.Default == nil {
			return nil, fmt.Errorf("%w: reader field %s.%s has no default and the writer lacks it", ErrIncompatibleSchema, s.name, f.Name)
		}
		var def any
		if err := json.Unmarshal(f.Default, &def); err != nil {
			return nil, fmt.Errorf("%w: default of %s.%s: %v", ErrIncompatibleSchema, s.name, f.Name, err)
		}
		res.fill[f.Name] = def
	}
	return res, nil
}
