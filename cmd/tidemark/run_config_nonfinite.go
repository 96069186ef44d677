package main

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// nonFinite returns the dotted path of the first value in v (a decoded
// YAML document) that is a NaN or infinite number (YAML's .nan, .inf), ""
// when there is none. Keys are visited in sorted order.
func nonFinite(v any, path string) string {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return path
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if p := nonFinite(x[k], join(k)); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range x {
			if p := nonFinite(e, join(strconv.Itoa(i))); p != "" {
				return p
			}
		}
	}
	return ""
}

// nonFiniteValue is the value at path (from nonFinite) as YAML spells it.
func nonFiniteValue(v any, path string) string {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, _ := strconv.Atoi(k)
			v = x[i]
		}
	}
	f, _ := v.(float64)
	switch {
	case math.IsNaN(f):
		return ".nan"
	case math.IsInf(f, -1):
		return "-.inf"
	default:
		return ".inf"
	}
}
