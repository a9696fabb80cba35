package analyzer

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestKeyTable: random puts, gets and deletions agree with a map, through
// growth and deletions whose runs wrap around the end of the slots; all
// yields each state once.
func TestKeyTable(t *testing.T) {
	for _, keys := range []int{10, 100, 5000} {
		r := rand.New(rand.NewPCG(uint64(keys), 1))
		tab := newKeyTable()
		model := map[string]*keyState{}
		for step := range 200_000 {
			k := strconv.Itoa(r.IntN(keys))
			h := tab.hash(k)
			got := tab.get(k, h)
			if got != model[k] {
				t.Fatalf("%d keys, step %d: get(%q) = %p; want %p", keys, step, k, got, model[k])
			}
			switch {
			case got == nil:
				st := &keyState{key: k, hash: h}
				tab.put(st)
				model[k] = st
			case r.IntN(3) > 0:
				tab.del(got)
				delete(model, k)
			}
			if tab.len() != len(model) {
				t.Fatalf("%d keys, step %d: len %d; want %d", keys, step, tab.len(), len(model))
			}
		}
		seen := map[*keyState]bool{}
		for st := range tab.all() {
			if seen[st] || model[st.key] != st {
				t.Fatalf("%d keys: all yields %q twice or a state not held", keys, st.key)
			}
			seen[st] = true
		}
		if len(seen) != len(model) {
			t.Fatalf("%d keys: all yields %d states; want %d", keys, len(seen), len(model))
		}
	}
}

// TestKeyTableCollisions: keys of one hash (the worst a timeline could
// choose) are all found and deleted, runs crossing the end of the slots.
func TestKeyTableCollisions(t *testing.T) {
	tab := newKeyTable()
	var sts []*keyState
	for i := range 20 {
		st := &keyState{key: strconv.Itoa(i), hash: 63} // the last slot of 64: the run wraps
		tab.put(st)
		sts = append(sts, st)
	}
	for _, i := range []int{0, 7, 19, 3, 12} {
		tab.del(sts[i])
		sts[i] = nil
	}
	for i, st := range sts {
		got := tab.get(strconv.Itoa(i), 63)
		if got != st {
			t.Errorf("get(%d) = %p; want %p", i, got, st)
		}
	}
}
