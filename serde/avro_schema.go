package serde

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// avroType is a parsed Avro schema node. goavro compiles schemas into codecs
// but does not expose their structure, and Avro[T] needs it twice: to bind a
// Go type to the reader schema when the serde is built, and to resolve a
// writer schema against the reader schema (Avro schema resolution, which
// goavro does not implement) when a record written with another schema
// arrives.
type avroType struct {
	kind    string // null boolean int long float double bytes string record enum array map fixed union
	logical string // logicalType, e.g. timestamp-millis; "" if none
	name    string // full name of a record, enum or fixed

	fields      []*avroFieldDef // record
	symbols     []string        // enum
	enumDefault string          // enum default symbol, "" if none
	items       *avroType       // array
	values      *avroType       // map
	branches    []*avroType     // union
	size        int             // fixed
}

type avroFieldDef struct {
	name    string
	aliases []string
	typ     *avroType
	def     any // JSON default (numbers as json.Number); valid when hasDef
	hasDef  bool
}

// unionKey is the key goavro wraps a non-null union value in: the full name
// for named types, the type name otherwise, and "<type>.<logicalType>" for
// logical types.
func (t *avroType) unionKey() string {
	switch {
	case t.name != "":
		return t.name
	case t.logical != "" && t.kind != "fixed":
		return t.kind + "." + t.logical
	}
	return t.kind
}

func (t *avroType) String() string {
	if t.name != "" {
		return t.kind + " " + t.name
	}
	if t.logical != "" {
		return t.kind + "(" + t.logical + ")"
	}
	if t.kind == "union" {
		names := make([]string, len(t.branches))
		for i, b := range t.branches {
			names[i] = b.String()
		}
		return "[" + strings.Join(names, ",") + "]"
	}
	return t.kind
}

// parseAvroSchema parses a schema's JSON text into its tree. It checks the
// structure only as far as the tree needs; goavro.NewCodec, which every
// caller runs as well, is the full validation.
func parseAvroSchema(text string) (*avroType, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	p := schemaParser{named: map[string]*avroType{}}
	return p.parse(raw, "")
}

type schemaParser struct{ named map[string]*avroType }

// goavroLogical lists the logical types goavro implements, whose native
// form is not their underlying type's: time.Time for the timestamps and
// date, time.Duration for the times of day, *big.Rat for decimals.
var goavroLogical = map[string]bool{"long.timestamp-millis": true, "long.timestamp-micros": true,
	"int.time-millis": true, "long.time-micros": true, "int.date": true, "bytes.decimal": true, "fixed.decimal": true}

var avroPrimitives = map[string]bool{"null": true, "boolean": true, "int": true, "long": true,
	"float": true, "double": true, "bytes": true, "string": true}

func fullName(name, namespace string) string {
	if strings.Contains(name, ".") || namespace == "" {
		return name
	}
	return namespace + "." + name
}

func (p *schemaParser) parse(raw any, ns string) (*avroType, error) {
	switch s := raw.(type) {
	case string:
		if avroPrimitives[s] {
			return &avroType{kind: s}, nil
		}
		if t, ok := p.named[fullName(s, ns)]; ok {
			return t, nil
		}
		if t, ok := p.named[s]; ok {
			return t, nil
		}
		return nil, fmt.Errorf("unknown type %q", s)
	case []any:
		u := &avroType{kind: "union"}
		for _, b := range s {
			bt, err := p.parse(b, ns)
			if err != nil {
				return nil, err
			}
			u.branches = append(u.branches, bt)
		}
		return u, nil
	case map[string]any:
		return p.parseObject(s, ns)
	}
	return nil, fmt.Errorf("unexpected schema element %T", raw)
}

func (p *schemaParser) parseObject(s map[string]any, ns string) (*avroType, error) {
	kind, _ := s["type"].(string)
	logical, _ := s["logicalType"].(string)
	if kind == "" {
		// {"type": {...}} or {"type": [...]} wraps another schema.
		return p.parse(s["type"], ns)
	}
	if !goavroLogical[kind+"."+logical] {
		logical = "" // goavro reads unknown logical types as their type
	}
	if avroPrimitives[kind] {
		return &avroType{kind: kind, logical: logical}, nil
	}
	t := &avroType{kind: kind, logical: logical}
	switch kind {
	case "record", "error", "enum", "fixed":
		name, _ := s["name"].(string)
		if name == "" {
			return nil, fmt.Errorf("%s without a name", kind)
		}
		if n, ok := s["namespace"].(string); ok && !strings.Contains(name, ".") {
			ns = n
		}
		t.name = fullName(name, ns)
		if i := strings.LastIndex(t.name, "."); i >= 0 {
			ns = t.name[:i]
		}
		p.named[t.name] = t // before the fields: records may be recursive
	}
	switch kind {
	case "record", "error":
		t.kind = "record"
		fields, _ := s["fields"].([]any)
		for _, f := range fields {
			fm, ok := f.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("record %s: field is %T, want an object", t.name, f)
			}
			fd := &avroFieldDef{}
			fd.name, _ = fm["name"].(string)
			ft, err := p.parse(fm["type"], ns)
			if err != nil {
				return nil, fmt.Errorf("record %s field %s: %w", t.name, fd.name, err)
			}
			fd.typ = ft
			fd.def, fd.hasDef = fm["default"]
			if as, ok := fm["aliases"].([]any); ok {
				for _, a := range as {
					if a, ok := a.(string); ok {
						fd.aliases = append(fd.aliases, a)
					}
				}
			}
			t.fields = append(t.fields, fd)
		}
	case "enum":
		syms, _ := s["symbols"].([]any)
		for _, sym := range syms {
			str, _ := sym.(string)
			t.symbols = append(t.symbols, str)
		}
		t.enumDefault, _ = s["default"].(string)
	case "fixed":
		n, _ := s["size"].(json.Number)
		size, err := n.Int64()
		if err != nil || size < 0 {
			return nil, fmt.Errorf("fixed %s: bad size %v", t.name, s["size"])
		}
		t.size = int(size)
	case "array":
		it, err := p.parse(s["items"], ns)
		if err != nil {
			return nil, fmt.Errorf("array items: %w", err)
		}
		t.items = it
	case "map":
		vt, err := p.parse(s["values"], ns)
		if err != nil {
			return nil, fmt.Errorf("map values: %w", err)
		}
		t.values = vt
	default:
		return nil, fmt.Errorf("unknown type %q", kind)
	}
	return t, nil
}

// shortName is the unqualified part of a full name: Avro resolution matches
// named types by it, so a writer in another namespace still resolves.
func shortName(full string) string {
	if i := strings.LastIndex(full, "."); i >= 0 {
		return full[i+1:]
	}
	return full
}

// defaultNative converts a field's JSON default into goavro's native form
// for t, so that the decoders that read records can read defaults too. As
// the Avro specification says, the default of a union is a value of its
// first branch.
func defaultNative(t *avroType, v any) (any, error) {
	switch t.kind {
	case "null":
		if v != nil {
			return nil, fmt.Errorf("default %v for null", v)
		}
		return nil, nil
	case "boolean":
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("default %v for boolean", v)
		}
		return b, nil
	case "int", "long":
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("default %v for %s", v, t.kind)
		}
		i, err := n.Int64()
		if err != nil {
			return nil, fmt.Errorf("default %v for %s: %w", v, t.kind, err)
		}
		return i, nil
	case "float", "double":
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("default %v for %s", v, t.kind)
		}
		f, err := n.Float64()
		if err != nil {
			return nil, fmt.Errorf("default %v for %s: %w", v, t.kind, err)
		}
		return f, nil
	case "string", "enum":
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("default %v for %s", v, t.kind)
		}
		return s, nil
	case "bytes", "fixed":
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("default %v for %s", v, t.kind)
		}
		// JSON encodes Avro bytes as a string of code points 0-255.
		b := make([]byte, 0, len(s))
		for _, r := range s {
			b = append(b, byte(r))
		}
		return b, nil
	case "array":
		a, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("default %v for array", v)
		}
		out := make([]any, len(a))
		for i, e := range a {
			n, err := defaultNative(t.items, e)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case "map":
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("default %v for map", v)
		}
		out := make(map[string]any, len(m))
		for k, e := range m {
			n, err := defaultNative(t.values, e)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case "record":
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("default %v for record %s", v, t.name)
		}
		out := make(map[string]any, len(t.fields))
		for _, f := range t.fields {
			e, ok := m[f.name]
			if !ok {
				if !f.hasDef {
					return nil, fmt.Errorf("default for record %s lacks field %s", t.name, f.name)
				}
				e = f.def
			}
			n, err := defaultNative(f.typ, e)
			if err != nil {
				return nil, err
			}
			out[f.name] = n
		}
		return out, nil
	case "union":
		if len(t.branches) == 0 {
			return nil, fmt.Errorf("default for an empty union")
		}
		first := t.branches[0]
		n, err := defaultNative(first, v)
		if err != nil || first.kind == "null" {
			return nil, err
		}
		return map[string]any{first.unionKey(): n}, nil
	}
	return nil, fmt.Errorf("default for %s", t.kind)
}
