package memstore

import "github.com/google/btree"

// twoTrees holds the entries of a window or session store in two B-trees
// sharing the same pointers: byKey, ordered for lookups and scans, and
// byTime, ordered by window start or session end, so that ExpireBefore
// touches only the entries it drops. Every insert and delete goes through
// both trees here, which keeps them holding the same entries.
type twoTrees[E any] struct {
	byKey  *btree.BTreeG[*E]
	byTime *btree.BTreeG[*E]
}

func newTwoTrees[E any](byKey, byTime btree.LessFunc[*E]) twoTrees[E] {
	return twoTrees[E]{byKey: btree.NewG(degree, byKey), byTime: btree.NewG(degree, byTime)}
}

func (t *twoTrees[E]) insert(e *E) {
	t.byKey.ReplaceOrInsert(e)
	t.byTime.ReplaceOrInsert(e)
}

func (t *twoTrees[E]) delete(e *E) {
	t.byKey.Delete(e)
	t.byTime.Delete(e)
}

// expire drops entries in byTime order until the first one that is not
// expired.
func (t *twoTrees[E]) expire(expired func(*E) bool) {
	for {
		e, ok := t.byTime.Min()
		if !ok || !expired(e) {
			return
		}
		t.byTime.DeleteMin()
		t.byKey.Delete(e)
	}
}

func (t *twoTrees[E]) clear() {
	t.byKey.Clear(false)
	t.byTime.Clear(false)
}
