package timeline

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxShards bounds a shard's n: more processes than this for one fleet is
// a typo, not a deployment.
const MaxShards = 10_000

// A Shard is one share of a fleet split over Count processes: the clients
// whose ids are Index, Index+Count, Index+2·Count, … Ids stay global, so
// the shards' records never collide and their union is the whole fleet.
// The zero value is no sharding (the whole fleet), as is 0/1.
type Shard struct {
	Index, Count int
}

// Whole reports whether s is the whole fleet (the zero value or 0/1).
func (s Shard) Whole() bool { return s.Count <= 1 }

// String is "i/n", or "" for the whole fleet (Meta.Shard's form).
func (s Shard) String() string {
	if s.Whole() {
		return ""
	}
	return strconv.Itoa(s.Index) + "/" + strconv.Itoa(s.Count)
}

// Has reports whether client id belongs to the shard.
func (s Shard) Has(id int) bool {
	return s.Whole() || id%s.Count == s.Index
}

// Clients is how many of a fleet of n clients belong to the shard.
func (s Shard) Clients(n int) int {
	if s.Whole() {
		return n
	}
	if s.Index >= n {
		return 0
	}
	return (n-s.Index-1)/s.Count + 1
}

// ParseShard reads "i/n" (0 ≤ i < n ≤ MaxShards); "" is the whole fleet.
func ParseShard(v string) (Shard, error) {
	if v == "" {
		return Shard{}, nil
	}
	is, ns, ok := strings.Cut(v, "/")
	if !ok {
		return Shard{}, fmt.Errorf("timeline: shard %q: want i/n, such as 0/3", v)
	}
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if err := errors.Join(err1, err2); err != nil || strings.ContainsAny(v, "+- ") {
		return Shard{}, fmt.Errorf("timeline: shard %q: want i/n with whole numbers, such as 0/3", v)
	}
	switch {
	case n < 1 || n > MaxShards:
		return Shard{}, fmt.Errorf("timeline: shard %q: n must be between 1 and %d", v, MaxShards)
	case i < 0 || i >= n:
		return Shard{}, fmt.Errorf("timeline: shard %q: i must be between 0 and n-1 (%d)", v, n-1)
	}
	return Shard{Index: i, Count: n}, nil
}
