package analyzer

import (
	"hash/maphash"
	"iter"
)

// keyTable holds the open logical requests by key: an open-addressing hash
// table (linear probing, deletion by backward shift, at most half full).
// Unlike a map, it hashes a key once per record: a failed lookup's hash
// serves the insert that follows, and a state keeps its hash for its
// deletion. The seed is random, as a map's is, against keys chosen to
// collide.
type keyTable struct {
	slots []keySlot // a power of two long, or empty
	n     int
	seed  maphash.Seed
}

type keySlot struct {
	h  uint64
	st *keyState // nil: a free slot
}

func newKeyTable() keyTable { return keyTable{seed: maphash.MakeSeed()} }

func (t *keyTable) hash(key string) uint64 { return maphash.String(t.seed, key) }

// len is how many states the table holds.
func (t *keyTable) len() int { return t.n }

// get returns the state of key, whose hash is h, or nil.
func (t *keyTable) get(key string, h uint64) *keyState {
	if t.n == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.st == nil {
			return nil
		}
		if s.h == h && s.st.key == key {
			return s.st
		}
	}
}

// put adds st, whose key (hash st.hash) the table does not hold.
func (t *keyTable) put(st *keyState) {
	if 2*(t.n+1) > len(t.slots) {
		old := t.slots
		t.slots, t.n = make([]keySlot, max(64, 2*len(old))), 0
		for _, s := range old {
			if s.st != nil {
				t.put(s.st)
			}
		}
	}
	mask := uint64(len(t.slots) - 1)
	i := st.hash & mask
	for t.slots[i].st != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = keySlot{h: st.hash, st: st}
	t.n++
}

// del removes st, which the table holds.
func (t *keyTable) del(st *keyState) {
	mask := uint64(len(t.slots) - 1)
	i := st.hash & mask
	for t.slots[i].st != st {
		i = (i + 1) & mask
	}
	// Shift back each later entry of the run that may fill the hole: one
	// whose home slot is not cyclically after the hole.
	for j := (i + 1) & mask; t.slots[j].st != nil; j = (j + 1) & mask {
		if home := t.slots[j].h & mask; (j-home)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = keySlot{}
	t.n--
}

// all yields every state the table holds; the caller must not change the
// table meanwhile.
func (t *keyTable) all() iter.Seq[*keyState] {
	return func(yield func(*keyState) bool) {
		for _, s := range t.slots {
			if s.st != nil && !yield(s.st) {
				return
			}
		}
	}
}
