package topology

import (
	"reflect"
	"unsafe"
)

// How each operator treats null keys is documented in the package
// documentation (doc.go); the helpers here implement it.

// keyNull returns the test for a key function's result being null, or nil
// when no value of K is (structs, strings, numbers). It is built once per
// operator so the per-record cost for other key types is one nil check.
func keyNull[K any]() func(K) bool {
	switch reflect.TypeFor[K]().Kind() {
	case reflect.Pointer, reflect.UnsafePointer, reflect.Map, reflect.Chan, reflect.Func, reflect.Slice, reflect.Interface:
		// Values of these kinds are nil exactly when their first word is
		// (reflect.Value.IsNil tests the same): reading it through unsafe
		// keeps the check free of allocations on the per-record path.
		return func(k K) bool { return *(*unsafe.Pointer)(unsafe.Pointer(&k)) == nil }
	}
	return nil
}

// isNull applies a keyNull test, nil meaning "never null".
func isNull[K any](null func(K) bool, k K) bool { return null != nil && null(k) }

// dropNullKey counts a record with a null key that node dropped; it says
// whether r was one.
func dropNullKey[K, V any](env *opEnv, r *Record[K, V]) bool {
	if r.NullKey {
		env.Dropped(env.node, DropNullKey)
		return true
	}
	return false
}

// settleRepartitionNullKeys decides, for every repartition sink, whether it
// drops null-keyed records: it does unless a null-key relaxed operator is
// downstream of the topic it writes, through further repartitions too.
func (t *Topology) settleRepartitionNullKeys() {
	readers := map[string]*node{}
	for _, n := range t.nodes {
		if n.kind == KindSource && n.internal {
			for _, topic := range n.topics {
				readers[topic] = n
			}
		}
	}
	memo := map[*node]bool{}
	var relaxed func(n *node) bool
	relaxed = func(n *node) bool {
		if v, ok := memo[n]; ok {
			return v
		}
		memo[n] = false // the graph is acyclic; this only guards the walk
		v := n.nullKeyRelaxed
		for _, c := range n.children {
			v = relaxed(c) || v
		}
		if src := readers[n.topics0()]; n.kind == KindSink && n.internal && src != nil {
			v = relaxed(src) || v
		}
		memo[n] = v
		return v
	}
	for _, n := range t.nodes {
		if src := readers[n.topics0()]; n.kind == KindSink && n.internal && src != nil {
			n.keepNullKeys = relaxed(src)
		}
	}
}
