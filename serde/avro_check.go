package serde

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// checkAvroBinary walks an Avro payload along its writer schema without
// building values, and fails if a length, count or index is impossible for
// the bytes that are there. goavro allocates what a record's array, map,
// string and bytes headers announce (up to 2^31 items) before it reads
// them, so a single malformed or hostile record could make it allocate
// gigabytes; checking first bounds its allocations by the record's size.
// Every record is checked once more than it is decoded; that is the price
// of not trusting the input.
func checkAvroBinary(t *avroType, b []byte) error {
	c := binChecker{minSizes: map[*avroType]int{}}
	rest, err := c.skip(t, b, 0)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%d trailing bytes after the value", len(rest))
	}
	return nil
}

// maxZeroSizeItems bounds a block of items that take no bytes (nulls,
// empty records), whose count the input size cannot bound.
const maxZeroSizeItems = 1 << 16

// maxDepth bounds nesting, so that a recursive schema cannot exhaust the
// stack on hostile input.
const maxDepth = 256

var errShort = errors.New("payload ends early")

type binChecker struct{ minSizes map[*avroType]int }

func readLong(b []byte) (int64, []byte, error) {
	v, n := binary.Varint(b) // Avro longs are zig-zag varints, as Go's
	if n <= 0 {
		if n == 0 {
			return 0, nil, errShort
		}
		return 0, nil, errors.New("varint overflows a long")
	}
	return v, b[n:], nil
}

// minSize is the fewest bytes a value of t takes.
func (c *binChecker) minSize(t *avroType) int {
	if n, ok := c.minSizes[t]; ok {
		return n
	}
	c.minSizes[t] = 0 // a record reached again through itself
	n := 1
	switch t.kind {
	case "null":
		n = 0
	case "float":
		n = 4
	case "double":
		n = 8
	case "fixed":
		n = t.size
	case "record":
		n = 0
		for _, f := range t.fields {
			n += c.minSize(f.typ)
		}
	}
	c.minSizes[t] = n
	return n
}

func (c *binChecker) skip(t *avroType, b []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("values nested deeper than %d", maxDepth)
	}
	switch t.kind {
	case "null":
		return b, nil
	case "boolean":
		if len(b) < 1 {
			return nil, errShort
		}
		return b[1:], nil
	case "int", "long":
		_, rest, err := readLong(b)
		return rest, err
	case "float", "double", "fixed":
		n := c.minSize(t)
		if len(b) < n {
			return nil, errShort
		}
		return b[n:], nil
	case "bytes", "string":
		n, rest, err := readLong(b)
		if err != nil {
			return nil, err
		}
		if n < 0 || n > int64(len(rest)) {
			return nil, fmt.Errorf("%s of %d bytes in %d remaining", t.kind, n, len(rest))
		}
		return rest[n:], nil
	case "enum", "union":
		i, rest, err := readLong(b)
		if err != nil {
			return nil, err
		}
		n := len(t.symbols)
		if t.kind == "union" {
			n = len(t.branches)
		}
		if i < 0 || i >= int64(n) {
			return nil, fmt.Errorf("%s index %d out of [0, %d)", t.kind, i, n)
		}
		if t.kind == "enum" {
			return rest, nil
		}
		return c.skip(t.branches[i], rest, depth+1)
	case "record":
		var err error
		for _, f := range t.fields {
			if b, err = c.skip(f.typ, b, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	case "array", "map":
		return c.skipBlocks(t, b, depth)
	}
	return nil, fmt.Errorf("unexpected type %s", t.kind)
}

func (c *binChecker) skipBlocks(t *avroType, b []byte, depth int) ([]byte, error) {
	item := t.items
	min := 0
	if t.kind == "map" {
		item = t.values
		min = 1 // the key's length
	}
	min += c.minSize(item)
	for {
		count, rest, err := readLong(b)
		if err != nil {
			return nil, err
		}
		b = rest
		if count == 0 {
			return b, nil
		}
		if count < 0 {
			// A negative count is followed by the block's size in bytes.
			if count == -count { // math.MinInt64
				return nil, fmt.Errorf("%s block count %d", t.kind, count)
			}
			count = -count
			size, rest, err := readLong(b)
			if err != nil {
				return nil, err
			}
			if size < 0 || size > int64(len(rest)) {
				return nil, fmt.Errorf("%s block of %d bytes in %d remaining", t.kind, size, len(rest))
			}
			b = rest
		}
		if min == 0 && count > maxZeroSizeItems || min > 0 && count > int64(len(b)/min) {
			return nil, fmt.Errorf("%s block of %d items in %d remaining bytes", t.kind, count, len(b))
		}
		for range count {
			if t.kind == "map" {
				if b, err = c.skip(&avroType{kind: "string"}, b, depth+1); err != nil {
					return nil, err
				}
			}
			if b, err = c.skip(item, b, depth+1); err != nil {
				return nil, err
			}
		}
	}
}
