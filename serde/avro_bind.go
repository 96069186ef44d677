package serde

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/linkedin/goavro/v2"
)

// This file binds Go types to Avro schemas by reflection. An encoder turns
// a Go value into goavro's native form (map[string]any for records, []any
// for arrays, map[string]any{"branch": v} for non-null union values, ...)
// for the reader schema; a decoder reads the native form goavro decoded
// with a writer schema into a Go value bound to the reader schema, applying
// Avro schema resolution on the way: fields the writer lacks get the
// reader's defaults, fields the reader lacks are skipped, numbers are
// promoted (int to long, float or double; long to float or double; float to
// double), string and bytes convert, a writer union is read branch by
// branch, a non-union writer is read into a reader union's matching branch,
// and an enum symbol the reader lacks takes the reader enum's default.
//
// Both are built once per (schema, type) pair, so the per-record work is
// walking the value, not the schema or the struct tags.

type avroEncoder func(v reflect.Value) (any, error)

type avroDecoder func(native any, dst reflect.Value) error

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[time.Duration]()
)

// avroFieldName is the schema field a struct field maps to: its `avro` tag,
// else its `json` tag, else its lower-cased name; "-" skips the field.
func avroFieldName(f reflect.StructField) string {
	for _, key := range []string{"avro", "json"} {
		if tag, ok := f.Tag.Lookup(key); ok {
			name, _, _ := strings.Cut(tag, ",")
			if name == "-" {
				return ""
			}
			if name != "" {
				return name
			}
		}
	}
	return strings.ToLower(f.Name)
}

// structFields maps schema field names to struct field indexes.
func structFields(gt reflect.Type) map[string][]int {
	out := map[string][]int{}
	for i := 0; i < gt.NumField(); i++ {
		f := gt.Field(i)
		if !f.IsExported() {
			continue
		}
		if name := avroFieldName(f); name != "" {
			out[name] = f.Index
		}
	}
	return out
}

// nullUnion splits a union into its one non-null branch; ok is false for
// unions that are not [null, T] or [T, null], which Avro[T] does not bind.
func nullUnion(t *avroType) (branch *avroType, ok bool) {
	if t.kind != "union" || len(t.branches) != 2 {
		return nil, false
	}
	a, b := t.branches[0], t.branches[1]
	switch {
	case a.kind == "null" && b.kind != "null":
		return b, true
	case b.kind == "null" && a.kind != "null":
		return a, true
	}
	return nil, false
}

type bindKey struct {
	w, r *avroType
	gt   reflect.Type
}

// binder builds encoders and decoders. The memo makes recursive schemas
// (a record that contains itself through an array or a union) terminate:
// a pair under construction is reached through an indirection.
type binder struct {
	encs map[bindKey]*avroEncoder
	decs map[bindKey]*avroDecoder
}

func newBinder() *binder {
	return &binder{encs: map[bindKey]*avroEncoder{}, decs: map[bindKey]*avroDecoder{}}
}

func isIntKind(k reflect.Kind) bool {
	return k >= reflect.Int && k <= reflect.Int64 || k >= reflect.Uint && k <= reflect.Uintptr
}

func isFloatKind(k reflect.Kind) bool { return k == reflect.Float32 || k == reflect.Float64 }

func isByteSlice(gt reflect.Type) bool {
	return gt.Kind() == reflect.Slice && gt.Elem().Kind() == reflect.Uint8
}

func (b *binder) encoder(t *avroType, gt reflect.Type, path string) (avroEncoder, error) {
	k := bindKey{r: t, gt: gt}
	if p, ok := b.encs[k]; ok {
		return func(v reflect.Value) (any, error) { return (*p)(v) }, nil
	}
	p := new(avroEncoder)
	b.encs[k] = p
	enc, err := b.buildEncoder(t, gt, path)
	if err != nil {
		delete(b.encs, k)
		return nil, err
	}
	*p = enc
	return enc, nil
}

func mismatch(path string, t *avroType, gt reflect.Type) error {
	return fmt.Errorf("%s: Go type %v does not fit Avro %v", path, gt, t)
}

func (b *binder) buildEncoder(t *avroType, gt reflect.Type, path string) (avroEncoder, error) {
	if t.kind == "union" {
		branch, ok := nullUnion(t)
		if !ok {
			return nil, fmt.Errorf("%s: union %v is not supported: only unions of null and one type are, bound to a pointer", path, t)
		}
		if gt.Kind() != reflect.Pointer {
			return nil, fmt.Errorf("%s: union %v needs a pointer Go type, got %v", path, t, gt)
		}
		elem, err := b.encoder(branch, gt.Elem(), path)
		if err != nil {
			return nil, err
		}
		key := branch.unionKey()
		return func(v reflect.Value) (any, error) {
			if v.IsNil() {
				return nil, nil
			}
			n, err := elem(v.Elem())
			if err != nil {
				return nil, err
			}
			return goavro.Union(key, n), nil
		}, nil
	}
	if gt.Kind() == reflect.Pointer {
		elem, err := b.encoder(t, gt.Elem(), path)
		if err != nil {
			return nil, err
		}
		return func(v reflect.Value) (any, error) {
			if v.IsNil() {
				return nil, fmt.Errorf("%s: nil pointer for non-optional %v", path, t)
			}
			return elem(v.Elem())
		}, nil
	}
	if t.logical == "decimal" {
		return nil, fmt.Errorf("%s: the decimal logical type is not supported", path)
	}
	kind := gt.Kind()
	switch t.kind {
	case "boolean":
		if kind == reflect.Bool {
			return func(v reflect.Value) (any, error) { return v.Bool(), nil }, nil
		}
	case "int", "long":
		if gt == timeType {
			switch {
			case t.logical == "timestamp-millis" || t.logical == "" && t.kind == "long":
				return func(v reflect.Value) (any, error) { return v.Interface().(time.Time).UnixMilli(), nil }, nil
			case t.logical == "timestamp-micros":
				return func(v reflect.Value) (any, error) { return v.Interface().(time.Time).UnixMicro(), nil }, nil
			case t.logical == "date":
				return func(v reflect.Value) (any, error) { return v.Interface(), nil }, nil // goavro converts
			}
			break
		}
		if gt == durationType && (t.logical == "time-millis" || t.logical == "time-micros") {
			return func(v reflect.Value) (any, error) { return v.Interface(), nil }, nil // goavro converts
		}
		if !isIntKind(kind) {
			break
		}
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		if t.kind == "int" {
			lo, hi = math.MinInt32, math.MaxInt32
		}
		long := t.kind == "long"
		return func(v reflect.Value) (any, error) {
			var n int64
			if v.CanInt() {
				n = v.Int()
			} else {
				u := v.Uint()
				if u > uint64(hi) {
					return nil, fmt.Errorf("%s: %d overflows Avro %s", path, u, t.kind)
				}
				n = int64(u)
			}
			if n < lo || n > hi {
				return nil, fmt.Errorf("%s: %d overflows Avro %s", path, n, t.kind)
			}
			if long {
				return n, nil
			}
			return int32(n), nil
		}, nil
	case "float", "double":
		if isFloatKind(kind) {
			if t.kind == "float" {
				return func(v reflect.Value) (any, error) { return float32(v.Float()), nil }, nil
			}
			return func(v reflect.Value) (any, error) { return v.Float(), nil }, nil
		}
	case "string":
		if kind == reflect.String {
			return func(v reflect.Value) (any, error) { return v.String(), nil }, nil
		}
	case "bytes":
		if isByteSlice(gt) {
			return func(v reflect.Value) (any, error) { return v.Bytes(), nil }, nil
		}
	case "enum":
		if kind == reflect.String {
			symbols := map[string]bool{}
			for _, s := range t.symbols {
				symbols[s] = true
			}
			return func(v reflect.Value) (any, error) {
				s := v.String()
				if !symbols[s] {
					return nil, fmt.Errorf("%s: %q is not a symbol of enum %s %v", path, s, t.name, t.symbols)
				}
				return s, nil
			}, nil
		}
	case "fixed":
		if kind == reflect.Array && gt.Elem().Kind() == reflect.Uint8 && gt.Len() == t.size {
			return func(v reflect.Value) (any, error) {
				out := make([]byte, v.Len())
				reflect.Copy(reflect.ValueOf(out), v)
				return out, nil
			}, nil
		}
		if isByteSlice(gt) {
			return func(v reflect.Value) (any, error) {
				if v.Len() != t.size {
					return nil, fmt.Errorf("%s: %d bytes for fixed %s of size %d", path, v.Len(), t.name, t.size)
				}
				return v.Bytes(), nil
			}, nil
		}
	case "array":
		if (kind == reflect.Slice || kind == reflect.Array) && !isByteSlice(gt) {
			item, err := b.encoder(t.items, gt.Elem(), path+"[]")
			if err != nil {
				return nil, err
			}
			return func(v reflect.Value) (any, error) {
				out := make([]any, v.Len())
				for i := range out {
					n, err := item(v.Index(i))
					if err != nil {
						return nil, err
					}
					out[i] = n
				}
				return out, nil
			}, nil
		}
	case "map":
		if kind == reflect.Map && gt.Key().Kind() == reflect.String {
			val, err := b.encoder(t.values, gt.Elem(), path+"{}")
			if err != nil {
				return nil, err
			}
			return func(v reflect.Value) (any, error) {
				out := make(map[string]any, v.Len())
				it := v.MapRange()
				for it.Next() {
					n, err := val(it.Value())
					if err != nil {
						return nil, err
					}
					out[it.Key().String()] = n
				}
				return out, nil
			}, nil
		}
	case "record":
		if kind == reflect.Struct {
			return b.recordEncoder(t, gt, path)
		}
	}
	return nil, mismatch(path, t, gt)
}

func (b *binder) recordEncoder(t *avroType, gt reflect.Type, path string) (avroEncoder, error) {
	type field struct {
		name  string
		index []int
		enc   avroEncoder
	}
	byName := structFields(gt)
	var fields []field
	for _, f := range t.fields {
		idx, ok := byName[f.name]
		if !ok {
			// goavro writes the default of a field missing from the map.
			if !f.hasDef {
				return nil, fmt.Errorf("%s: %v has no field for %s.%s, which has no default", path, gt, t.name, f.name)
			}
			continue
		}
		enc, err := b.encoder(f.typ, gt.FieldByIndex(idx).Type, path+"."+f.name)
		if err != nil {
			return nil, err
		}
		fields = append(fields, field{f.name, idx, enc})
	}
	return func(v reflect.Value) (any, error) {
		out := make(map[string]any, len(fields))
		for _, f := range fields {
			n, err := f.enc(v.FieldByIndex(f.index))
			if err != nil {
				return nil, err
			}
			out[f.name] = n
		}
		return out, nil
	}, nil
}

// decoder builds the decoder for values written with w, read with r (the
// schema gt is bound to). A writer that cannot be resolved to the reader
// fails here, once per writer schema, not once per record.
func (b *binder) decoder(w, r *avroType, gt reflect.Type, path string) (avroDecoder, error) {
	k := bindKey{w: w, r: r, gt: gt}
	if p, ok := b.decs[k]; ok {
		return func(n any, dst reflect.Value) error { return (*p)(n, dst) }, nil
	}
	p := new(avroDecoder)
	b.decs[k] = p
	dec, err := b.buildDecoder(w, r, gt, path)
	if err != nil {
		delete(b.decs, k)
		return nil, err
	}
	*p = dec
	return dec, nil
}

func incompatible(path string, w, r *avroType) error {
	return fmt.Errorf("%s: writer type %v cannot be read as reader type %v", path, w, r)
}

// promotes reports whether a writer of kind w can be read as kind r.
func promotes(w, r string) bool {
	switch {
	case w == r:
		return true
	case w == "int":
		return r == "long" || r == "float" || r == "double"
	case w == "long":
		return r == "float" || r == "double"
	case w == "float":
		return r == "double"
	case w == "string":
		return r == "bytes"
	case w == "bytes":
		return r == "string"
	}
	return false
}

// matches reports whether a writer type resolves to reader type r outside
// unions: named types by unqualified name, the rest by kind or promotion.
func matches(w, r *avroType) bool {
	switch r.kind {
	case "record", "enum", "fixed":
		return w.kind == r.kind && shortName(w.name) == shortName(r.name)
	case "array", "map":
		return w.kind == r.kind
	}
	return promotes(w.kind, r.kind)
}

func (b *binder) buildDecoder(w, r *avroType, gt reflect.Type, path string) (avroDecoder, error) {
	if w.kind == "union" {
		// Each branch resolves on its own; a branch that does not
		// resolve fails only the records written with it.
		byKey := map[string]avroDecoder{}
		for _, wb := range w.branches {
			dec, err := b.decoder(wb, r, gt, path)
			if err != nil {
				err := err
				dec = func(any, reflect.Value) error { return err }
			}
			byKey[wb.unionKey()] = dec
		}
		return func(n any, dst reflect.Value) error {
			if n == nil {
				if dec, ok := byKey["null"]; ok {
					return dec(nil, dst)
				}
				return fmt.Errorf("%s: null for union %v without null", path, w)
			}
			m, ok := n.(map[string]any)
			if ok && len(m) == 1 {
				for key, v := range m {
					if dec, ok := byKey[key]; ok {
						return dec(v, dst)
					}
				}
			}
			return fmt.Errorf("%s: %T is not a value of union %v", path, n, w)
		}, nil
	}
	if r.kind == "union" {
		branch, _ := nullUnion(r) // the binding made sure of the shape
		if w.kind == "null" {
			return func(_ any, dst reflect.Value) error {
				dst.SetZero()
				return nil
			}, nil
		}
		if branch == nil || !matches(w, branch) {
			return nil, incompatible(path, w, r)
		}
		elem, err := b.decoder(w, branch, gt.Elem(), path)
		if err != nil {
			return nil, err
		}
		return pointerDecoder(gt, elem), nil
	}
	if gt.Kind() == reflect.Pointer {
		elem, err := b.decoder(w, r, gt.Elem(), path)
		if err != nil {
			return nil, err
		}
		return pointerDecoder(gt, elem), nil
	}
	if !matches(w, r) {
		return nil, incompatible(path, w, r)
	}
	switch r.kind {
	case "boolean":
		return func(n any, dst reflect.Value) error {
			v, ok := n.(bool)
			if !ok {
				return fmt.Errorf("%s: got %T, want bool", path, n)
			}
			dst.SetBool(v)
			return nil
		}, nil
	case "int", "long":
		if gt == timeType {
			return timeDecoder(r.logical, path), nil
		}
		return intDecoder(r.logical, path), nil
	case "float", "double":
		return func(n any, dst reflect.Value) error {
			var f float64
			switch v := n.(type) {
			case float32:
				f = float64(v)
			case float64:
				f = v
			case int32:
				f = float64(v)
			case int64:
				f = float64(v)
			default:
				return fmt.Errorf("%s: got %T, want a number", path, n)
			}
			if gt.Kind() == reflect.Float32 && !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) > math.MaxFloat32 {
				return fmt.Errorf("%s: %v overflows %v", path, f, gt)
			}
			dst.SetFloat(f)
			return nil
		}, nil
	case "string", "bytes":
		if r.kind == "string" {
			return func(n any, dst reflect.Value) error {
				switch v := n.(type) {
				case string:
					dst.SetString(v)
				case []byte:
					dst.SetString(string(v))
				default:
					return fmt.Errorf("%s: got %T, want a string", path, n)
				}
				return nil
			}, nil
		}
		return bytesDecoder(path), nil
	case "fixed":
		if gt.Kind() == reflect.Slice {
			return bytesDecoder(path), nil
		}
		return func(n any, dst reflect.Value) error {
			v, ok := n.([]byte)
			if !ok || len(v) != dst.Len() {
				return fmt.Errorf("%s: got %T of %d bytes, want %d bytes", path, n, len(v), dst.Len())
			}
			reflect.Copy(dst, reflect.ValueOf(v))
			return nil
		}, nil
	case "enum":
		symbols := map[string]bool{}
		for _, s := range r.symbols {
			symbols[s] = true
		}
		return func(n any, dst reflect.Value) error {
			s, ok := n.(string)
			if !ok {
				return fmt.Errorf("%s: got %T, want an enum symbol", path, n)
			}
			if !symbols[s] {
				if r.enumDefault == "" {
					return fmt.Errorf("%s: writer symbol %q is not in reader enum %s, which has no default", path, s, r.name)
				}
				s = r.enumDefault
			}
			dst.SetString(s)
			return nil
		}, nil
	case "array":
		item, err := b.decoder(w.items, r.items, gt.Elem(), path+"[]")
		if err != nil {
			return nil, err
		}
		return func(n any, dst reflect.Value) error {
			a, ok := n.([]any)
			if !ok {
				return fmt.Errorf("%s: got %T, want an array", path, n)
			}
			if gt.Kind() == reflect.Array {
				if len(a) != gt.Len() {
					return fmt.Errorf("%s: %d items for %v", path, len(a), gt)
				}
			} else {
				dst.Set(reflect.MakeSlice(gt, len(a), len(a)))
			}
			for i, e := range a {
				if err := item(e, dst.Index(i)); err != nil {
					return err
				}
			}
			return nil
		}, nil
	case "map":
		val, err := b.decoder(w.values, r.values, gt.Elem(), path+"{}")
		if err != nil {
			return nil, err
		}
		return func(n any, dst reflect.Value) error {
			m, ok := n.(map[string]any)
			if !ok {
				return fmt.Errorf("%s: got %T, want a map", path, n)
			}
			out := reflect.MakeMapWithSize(gt, len(m))
			for k, e := range m {
				v := reflect.New(gt.Elem()).Elem()
				if err := val(e, v); err != nil {
					return err
				}
				out.SetMapIndex(reflect.ValueOf(k).Convert(gt.Key()), v)
			}
			dst.Set(out)
			return nil
		}, nil
	case "record":
		return b.recordDecoder(w, r, gt, path)
	}
	return nil, incompatible(path, w, r)
}

func (b *binder) recordDecoder(w, r *avroType, gt reflect.Type, path string) (avroDecoder, error) {
	type field struct {
		name  string
		index []int
		dec   avroDecoder
		def   any // native default, read when the writer lacks the field
		isDef bool
	}
	writerFields := map[string]*avroFieldDef{}
	for _, f := range w.fields {
		writerFields[f.name] = f
	}
	byName := structFields(gt)
	var fields []field
	for _, rf := range r.fields {
		idx, ok := byName[rf.name]
		if !ok {
			continue // not bound to the struct: nothing to fill
		}
		ft := gt.FieldByIndex(idx).Type
		fpath := path + "." + rf.name
		wf := writerFields[rf.name]
		for _, a := range rf.aliases {
			if wf == nil {
				wf = writerFields[a]
			}
		}
		if wf != nil {
			dec, err := b.decoder(wf.typ, rf.typ, ft, fpath)
			if err != nil {
				return nil, err
			}
			fields = append(fields, field{name: wf.name, index: idx, dec: dec})
			continue
		}
		if !rf.hasDef {
			return nil, fmt.Errorf("%s: the writer lacks reader field %s.%s, which has no default", fpath, r.name, rf.name)
		}
		def, err := defaultNative(rf.typ, rf.def)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fpath, err)
		}
		dec, err := b.decoder(rf.typ, rf.typ, ft, fpath)
		if err != nil {
			return nil, err
		}
		fields = append(fields, field{name: rf.name, index: idx, dec: dec, def: def, isDef: true})
	}
	return func(n any, dst reflect.Value) error {
		m, ok := n.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: got %T, want a record", path, n)
		}
		for _, f := range fields {
			v := f.def
			if !f.isDef {
				if v, ok = m[f.name]; !ok {
					return fmt.Errorf("%s: record lacks field %s", path, f.name)
				}
			}
			if err := f.dec(v, dst.FieldByIndex(f.index)); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// pointerDecoder decodes into a new value of gt's element type with elem
// and sets dst (of pointer type gt) to it: a non-null branch of a
// ["null", T] union, or a plain T bound to a Go pointer.
func pointerDecoder(gt reflect.Type, elem avroDecoder) avroDecoder {
	return func(n any, dst reflect.Value) error {
		p := reflect.New(gt.Elem())
		if err := elem(n, p.Elem()); err != nil {
			return err
		}
		dst.Set(p)
		return nil
	}
}

// intDecoder reads Avro ints and longs into Go integers. goavro gives the
// time-of-day logical types as time.Duration and date as time.Time: a
// time.Duration field takes the duration, other integers the count of the
// logical type's unit, as in the encoded value.
func intDecoder(logical, path string) avroDecoder {
	return func(n any, dst reflect.Value) error {
		var v int64
		switch x := n.(type) {
		case int32, int64: // a plain int or long, or a default
			v = reflect.ValueOf(x).Int()
			if dst.Type() == durationType {
				switch logical {
				case "time-millis":
					v *= int64(time.Millisecond)
				case "time-micros":
					v *= int64(time.Microsecond)
				}
			}
		case time.Duration:
			switch {
			case dst.Type() == durationType:
				v = int64(x)
			case logical == "time-micros":
				v = x.Microseconds()
			default:
				v = x.Milliseconds()
			}
		case time.Time:
			v = x.Unix() / 86400 // date: days since the epoch
			if x.Unix()%86400 < 0 {
				v--
			}
		default:
			return fmt.Errorf("%s: got %T, want an integer", path, n)
		}
		if dst.CanInt() {
			if dst.OverflowInt(v) {
				return fmt.Errorf("%s: %d overflows %v", path, v, dst.Type())
			}
			dst.SetInt(v)
			return nil
		}
		if v < 0 || dst.OverflowUint(uint64(v)) {
			return fmt.Errorf("%s: %d overflows %v", path, v, dst.Type())
		}
		dst.SetUint(uint64(v))
		return nil
	}
}

func timeDecoder(logical, path string) avroDecoder {
	return func(n any, dst reflect.Value) error {
		var t time.Time
		switch x := n.(type) {
		case time.Time:
			t = x
		case int64: // a plain long, or a default
			switch logical {
			case "timestamp-micros":
				t = time.UnixMicro(x).UTC()
			case "date":
				t = time.Unix(x*86400, 0).UTC()
			default:
				t = time.UnixMilli(x).UTC()
			}
		default:
			return fmt.Errorf("%s: got %T, want a timestamp", path, n)
		}
		dst.Set(reflect.ValueOf(t))
		return nil
	}
}

func bytesDecoder(path string) avroDecoder {
	return func(n any, dst reflect.Value) error {
		switch v := n.(type) {
		case []byte:
			dst.SetBytes(append([]byte{}, v...))
		case string:
			dst.SetBytes([]byte(v))
		default:
			return fmt.Errorf("%s: got %T, want bytes", path, n)
		}
		return nil
	}
}
