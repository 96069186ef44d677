package changelog

import (
	"fmt"

	"github.com/google/btree"
)

// Layered overlays: the record loop keeps processing while the previous
// transaction ends (the processor's pipelined commits). After Flush has
// produced the changelog records of transaction N, Seal freezes N's
// overlay as the sealed layer and lets writes go on, into transaction N+1.
// Reads then see N+1's writes over N's over Badger: the live overlay is a
// copy-on-write clone of the sealed one (btree.Clone is O(1)), and a write
// after Seal replaces an entry instead of changing it in place, so the
// sealed layer keeps exactly what N's changelog records say.
//
// Once N commits, ApplyAt writes the sealed layer (not N+1's writes) to
// Badger and drops from the live overlay every entry N+1 did not touch
// since (they are now in Badger); what is left is N+1's own overlay, which
// its Flush produces. If N aborts, Discard drops both layers: N+1 was
// computed from N's state, so it is rewound with it.
//
// Expiry follows the same split: Seal records each store's requested cut,
// and ApplyAt applies that one; a cut requested by N+1 stays pending (it
// still hides entries from reads) until N+1's own Apply.

// Seal freezes the overlay Flush just produced as the sealed layer of the
// transaction being committed and allows writes again, for the next
// transaction. It requires a Flush and no sealed layer already (one
// transaction ends at a time). ApplyAt then applies the sealed layer;
// Discard drops both.
func (t *TaskState) Seal() error {
	if t.closed {
		return fmt.Errorf("changelog: seal partition %d: closed", t.cfg.Partition)
	}
	if !t.flushed {
		return fmt.Errorf("changelog: seal partition %d: not flushed", t.cfg.Partition)
	}
	if t.sealed != nil {
		return fmt.Errorf("changelog: seal partition %d: a sealed layer is still unapplied", t.cfg.Partition)
	}
	t.sealed = t.pending.Clone()
	t.gen++
	for _, st := range t.stores {
		st.sealCut = st.newCut
	}
	t.flushed = false
	return nil
}

// Sealed reports whether a sealed layer waits for ApplyAt or Discard.
func (t *TaskState) Sealed() bool { return t.sealed != nil }

// applied returns the overlay Apply writes: the sealed layer when there
// is one, else the whole overlay.
func (t *TaskState) applied() *btree.BTreeG[*entry] {
	if t.sealed != nil {
		return t.sealed
	}
	return t.pending
}

// applyCut is the expiry cut Apply applies to st: the one sealed with the
// layer being applied, else the requested one.
func (t *TaskState) applyCut(st *storeState) int64 {
	if t.sealed != nil {
		return st.sealCut
	}
	return st.newCut
}

// unseal ends the sealed layer after it was applied: the entries of the
// live overlay that are still the sealed ones are in Badger now.
func (t *TaskState) unseal() {
	t.sealed.Ascend(func(e *entry) bool {
		if cur := t.index[string(e.key)]; cur == e {
			t.pending.Delete(e)
			delete(t.index, string(e.key))
		}
		return true
	})
	t.sealed = nil
}
