package analyzer

import (
	"hash/maphash"
	"iter"

	"github.com/retrylab/retrylab/timeline"
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

// attemptLite is what a check needs of an attempt to judge the next one.
type attemptLite struct {
	n        int32
	status   int32
	class    ResponseClass // ClassifyResponse of the record
	fault    bool
	upFailed bool // the stub's upstream gave no response (timeline.UpstreamFailed)
	beFailed bool // the stub's quota backend failed and it answered 503 itself (timeline.BackendClosed)
	hasNB    bool
	refused  bool // a gRPC answer whose pushback said not to retry (pushbackRefuses)
	prevDone bool // paired with its predecessor (or the first attempt)
	at, done int64
	nb       int64
	claim    int64 // the wait the client claimed before it (timeline.WaitHeader), ns; noClaim, badClaim
}

// What attemptLite.claim holds when the attempt claimed no wait, or one
// that does not parse.
const (
	noClaim  = -1
	badClaim = -2
)

// claimOf reads an attempt's wait claim.
func claimOf(s string) int64 {
	if s == "" {
		return noClaim
	}
	if d, ok := timeline.ParseWaitClaim(s); ok {
		return int64(d)
	}
	return badClaim
}

// keyState is one open logical request: the attempts not yet paired with
// both neighbours, sorted by number (one entry when records come in order).
type keyState struct {
	key    string // the table's key
	hash   uint64 // its hash (keyTable)
	client string
	att    []attemptLite
	buf    [2]attemptLite // att's storage while it is short
	base   int            // attempts before the current logical request (a reused key)
	last   int64          // stream time of the last news
	closed int64          // stream time of the outcome + 1; 0 while open

	// What the stub recorded of the logical request, the evidence its
	// outcome is checked against.
	count int32  // attempts (the highest attempt number seen, less base)
	got2x bool   // an attempt was answered 2xx
	capAt int64  // arrival of the attempt past the attempts cap, 0 when none
	idem  string // IdemKey of the earliest attempt seen
	idemN int32  // its number (0: none seen yet)
	// idemOwned: the write's key was checked against the other writes'
	// (idemOwners).
	idemOwned bool
	// What its outcome claimed, once it came.
	outcome    bool // an outcome was recorded
	excluded   bool // the outcome is one the checks do not see (judgedOutcome)
	reportedOK bool
	outEnd     int64
	outStart   int64
	// firstAt is 1 + the arrival of the request's first attempt (0: not
	// seen), for the fleet's send lateness (Analyzer.firstLate).
	firstAt int64
}
