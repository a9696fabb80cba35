package timeline

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// mergeCoverage turns Merge's coverage check on (a variable so that the
// benchmark can measure the merge without it in the same run).
var mergeCoverage = true

// keyTally is what a merge learned of one logical request.
type keyTally struct {
	recorded int32 // attempt records with its key, every input's
	claimed  int32 // the most attempts its outcome claims (0: none)
	reported bool  // the outcome reported its attempts (Outcome.Attempts > 0)
	src      int32 // 1 + the index of the fleet file with its outcome; 0: none yet
}

// backed reports whether the recordings hold what the request's outcome
// claims: an attempt when it claims any, as many as it reports when it
// reports them. More attempts never make a backed request unbacked.
func (t *keyTally) backed() bool {
	switch {
	case t.claimed == 0:
		return true
	case t.recorded == 0:
		return false
	}
	return !t.reported || t.recorded >= t.claimed
}

// coverage tallies, per logical request, the attempts the merged inputs
// recorded and what the fleet files' outcomes claim. A request leaves the
// table once its outcome is in and backed; what stays is the requests
// without an outcome yet (in flight, or attempts answered after their
// outcome was backed: abandoned, hung) and those whose outcome is not
// backed yet. The latter wait for the end of the merge, since their
// attempts may still come (answered after the outcome ended, or on a
// host whose clock runs ahead); what is still unbacked then is a problem.
// The answer is the one a table of every request would give; the table
// holds about the requests in flight when the recordings back the
// outcomes, and grows to the unbacked ones when they do not. Keys of the
// fleet's form, "client/seq" in canonical decimal, are packed into a
// uint64 and kept in a table of their own (a lookup per record is most of
// the check's cost); any other key is kept as a string.
type coverage struct {
	num      keyTable
	str      map[string]*keyTally
	peak     int   // the most requests held at once
	unbacked int64 // outcomes the recordings do not back (problems)
}

func newCoverage() *coverage {
	return &coverage{str: make(map[string]*keyTally)}
}

func (c *coverage) len() int { return c.num.n + len(c.str) }

// Unbacked is End.Unbacked once problems has run: the outcomes the
// recordings do not back.
func (c *coverage) Unbacked() int64 { return c.unbacked }

// packKey packs a "client/seq" key of two canonical decimal numbers below
// 2^32 into one uint64, never math.MaxUint64 (keyTable's empty mark); ok
// is false for any other key.
func packKey(key string) (k uint64, ok bool) {
	client, seq, found := strings.Cut(key, "/")
	if !found {
		return 0, false
	}
	a, ok1 := canonUint32(client)
	b, ok2 := canonUint32(seq)
	k = a<<32 | b
	return k, ok1 && ok2 && k != math.MaxUint64
}

// keyTable maps packed keys to tallies: open addressing with linear
// probing in a power-of-two array at most 3/4 full, deletion by backward
// shift (no tombstones, so a table whose requests come and go stays as
// fast as a fresh one). It grows, never shrinks: its size follows the most
// requests held at once.
type keyTable struct {
	slots []keySlot
	n     int
	shift uint // 64 − log2(len(slots))
}

// keySlot holds key k+1 (0: empty) and its tally.
type keySlot struct {
	k uint64
	t keyTally
}

// home is k's first slot (Fibonacci hashing of k+1).
func (t *keyTable) home(k1 uint64) int { return int((k1 * 0x9E3779B97F4A7C15) >> t.shift) }

// slot returns the index of k's slot, adding a zero tally when k is not
// there (isNew).
func (t *keyTable) slot(k uint64) (i int, isNew bool) {
	if 4*(t.n+1) > 3*len(t.slots) {
		t.grow()
	}
	k1 := k + 1
	mask := len(t.slots) - 1
	for i = t.home(k1); ; i = (i + 1) & mask {
		switch t.slots[i].k {
		case k1:
			return i, false
		case 0:
			t.slots[i].k = k1
			t.n++
			return i, true
		}
	}
}

func (t *keyTable) grow() {
	old := t.slots
	size := max(64, 2*len(old))
	t.slots, t.n = make([]keySlot, size), 0
	t.shift = uint(64 - bits.TrailingZeros(uint(size)))
	for _, s := range old {
		if s.k != 0 {
			i, _ := t.slot(s.k - 1)
			t.slots[i].t = s.t
		}
	}
}

// removeAt empties slot i, moving back the entries after it that could
// not sit in their home slot (Knuth's algorithm R).
func (t *keyTable) removeAt(i int) {
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.slots[j].k != 0; j = (j + 1) & mask {
		h := t.home(t.slots[j].k)
		// The entry at j stays when its home is cyclically in (i, j].
		if i <= j && i < h && h <= j || i > j && (h > i || h <= j) {
			continue
		}
		t.slots[i] = t.slots[j]
		i = j
	}
	t.slots[i] = keySlot{}
	t.n--
}

// canonUint32 parses a decimal number without sign or leading zeros
// ("0" itself excepted) below 2^32.
func canonUint32(s string) (uint64, bool) {
	if s == "" || len(s) > 10 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, n <= math.MaxUint32
}

// update applies f to key's tally, and forgets the request when its
// outcome is in and backed.
func (c *coverage) update(key string, f func(*keyTally)) {
	if k, ok := packKey(key); ok {
		i, isNew := c.num.slot(k)
		t := &c.num.slots[i].t
		f(t)
		switch {
		case t.src != 0 && t.backed():
			c.num.removeAt(i)
		case isNew:
			c.peak = max(c.peak, c.len())
		}
		return
	}
	// A pointer, so that an existing entry keeps its own copy of the key
	// (key is a slice of the decoder's buffer).
	t := c.str[key]
	if t == nil {
		t = new(keyTally)
		f(t)
		if t.src == 0 || !t.backed() {
			c.str[strings.Clone(key)] = t
			c.peak = max(c.peak, c.len())
		}
		return
	}
	f(t)
	if t.src != 0 && t.backed() {
		delete(c.str, key)
	}
}

func countAttempt(t *keyTally) { t.recorded = min(t.recorded+1, math.MaxInt32) }

// attempt counts an attempt record of key.
func (c *coverage) attempt(key string) { c.update(key, countAttempt) }

// outcome notes the outcome o of fleet file src. It claims at least one
// attempt when it reports attempts, a final status, or success.
func (c *coverage) outcome(o *Outcome, src int) {
	claim := int32(min(max(o.Attempts, 0), math.MaxInt32))
	if claim == 0 && (o.Status > 0 || o.Result == ResultOK) {
		claim = 1
	}
	reported := o.Attempts > 0
	c.update(o.Key, func(t *keyTally) {
		t.src = int32(src + 1)
		t.claimed = max(t.claimed, claim)
		t.reported = t.reported || reported
	})
}

// shortfall is what one fleet file's outcomes claim that the recordings
// do not hold.
type shortfall struct {
	none, fewer     int64    // outcomes with no attempt recorded; with fewer than reported
	noneEx, fewerEx keyOrder // the smallest such request of each kind
	fewerSaid       int32    // fewerEx's claimed attempts
	fewerHeld       int32    // and recorded ones
}

// keyOrder orders example keys: packed ones first, by client and seq,
// then the others as strings, so a merge names the same example each
// time whatever the map's order.
type keyOrder struct {
	set   bool
	isStr bool
	num   uint64
	str   string
}

func (k keyOrder) less(o keyOrder) bool {
	switch {
	case !o.set:
		return true
	case k.isStr != o.isStr:
		return !k.isStr
	case k.isStr:
		return k.str < o.str
	}
	return k.num < o.num
}

func (k keyOrder) String() string {
	if k.isStr {
		return k.str
	}
	return fmt.Sprintf("%d/%d", k.num>>32, k.num&math.MaxUint32)
}

// problems returns one sentence per fleet file and kind of shortfall, in
// input order.
func (c *coverage) problems(srcs []*mergeSrc) []string {
	fall := make([]shortfall, len(srcs))
	note := func(k keyOrder, t *keyTally) {
		if t.src == 0 || t.backed() {
			return
		}
		f := &fall[t.src-1]
		switch {
		case t.recorded == 0:
			f.none++
			if k.less(f.noneEx) {
				f.noneEx = k
			}
		case t.reported && t.claimed > t.recorded:
			f.fewer++
			if k.less(f.fewerEx) {
				f.fewerEx, f.fewerSaid, f.fewerHeld = k, t.claimed, t.recorded
			}
		}
	}
	for i := range c.num.slots {
		if s := &c.num.slots[i]; s.k != 0 {
			note(keyOrder{set: true, num: s.k - 1}, &s.t)
		}
	}
	for k, t := range c.str {
		note(keyOrder{set: true, isStr: true, str: k}, t)
	}
	var out []string
	for i, s := range srcs {
		f := fall[i]
		c.unbacked += int64(f.none + f.fewer)
		if f.none == 0 && f.fewer == 0 {
			continue
		}
		who := "the fleet"
		if s.shard.Count > 1 {
			who = "shard " + s.shard.String()
		}
		dial := ""
		if s.end != nil && s.end.DialErrors > 0 {
			dial = fmt.Sprintf(" (its end record counts %d dial errors: attempts that reached no stub)", s.end.DialErrors)
		}
		if f.none > 0 {
			out = append(out, fmt.Sprintf("%s of %s (file %s) %s no recording holds (such as %s): a stub's recording is missing from the merge?%s",
				count(f.none, "outcome", "outcomes"), who, s.name, verb(f.none, "names a logical request", "name logical requests"), f.noneEx, dial))
		}
		if f.fewer > 0 {
			out = append(out, fmt.Sprintf("%s of %s (file %s) %s than the recordings hold (such as %s: %d said, %d recorded): a stub's recording is missing from the merge or cut short?%s",
				count(f.fewer, "outcome", "outcomes"), who, s.name, verb(f.fewer, "says more attempts for its logical request", "say more attempts for their logical requests"),
				f.fewerEx, f.fewerSaid, f.fewerHeld, dial))
		}
	}
	return out
}

// count is "1 outcome", "2 outcomes".
func count(n int64, one, many string) string {
	return fmt.Sprintf("%d %s", n, verb(n, one, many))
}

// verb is one for n == 1, else many.
func verb(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
