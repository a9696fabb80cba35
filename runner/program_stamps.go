package runner

import (
	"strconv"
	"strings"
	"sync"

	"github.com/retrylab/retrylab/timeline"
)

// requestStamps is what the stub saw of each logical request of an exec
// fleet, from its attempts (stubserver.Options.OnAttempt): when the first
// attempt arrived, and when the latest was answered. programOutcomes
// stamps each outcome with them: an exec program reports only a result
// line, so the stub's records are the evidence of when its request began.
//
// A request is client K's number N when the stub keyed its attempts
// "K/N" (the path /c/K/r/N) or "K req:N" (X-Client-Id: K and
// X-Retrylab-Request: N, for a client that cannot vary its path). It
// holds 25 bytes per logical request of the fleet. Safe for concurrent
// use.
type requestStamps struct {
	clients, requests int

	mu sync.Mutex
	// first is 1 + the arrival (ns since time zero) of the request's
	// earliest attempt, 0 when none arrived.
	first []int64
	// last is the arrival of its latest attempt; answered is 1 + the
	// instant that attempt's answer left (a status, or a reset), 0 when
	// it got none (a hang, or its client left first).
	last, answered []int64
	// byHeader: the stub keyed it "K req:N", never "K/N".
	byHeader []bool
}

func newRequestStamps(clients, requests int) *requestStamps {
	n := clients * requests
	return &requestStamps{clients: clients, requests: requests,
		first: make([]int64, n), last: make([]int64, n), answered: make([]int64, n), byHeader: make([]bool, n)}
}

// index is the slot of key ("K/N" or "K req:N"), and whether the stub
// keyed it by the request header; ok is false for any other key, or one
// outside the fleet.
func (s *requestStamps) index(key string) (i int, byHeader, ok bool) {
	k, n, found := strings.Cut(key, "/")
	if !found {
		if k, n, found = strings.Cut(key, " req:"); !found {
			return 0, false, false
		}
		byHeader = true
	}
	c, q := canonicalID(k), canonicalID(n)
	if c < 0 || c >= s.clients || q < 0 || q >= s.requests {
		return 0, false, false
	}
	return c*s.requests + q, byHeader, true
}

// add notes one attempt the stub recorded.
func (s *requestStamps) add(a *timeline.Attempt) {
	i, byHeader, ok := s.index(a.Key)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.first[i]; f == 0 || a.At+1 < f {
		s.first[i] = a.At + 1
		s.byHeader[i] = byHeader
	}
	if !byHeader {
		s.byHeader[i] = false // the path's key wins: it is the fleet's own
	}
	if a.At >= s.last[i] {
		s.last[i] = a.At
		s.answered[i] = 0
		if a.Status != 0 || a.Fault == timeline.FaultReset {
			s.answered[i] = a.Done + 1
		}
	}
}

// seenRequest is what the stub saw of one logical request: its first
// arrival and its latest attempt's answer (has…: whether it saw them),
// and whether it keyed it "K req:N".
type seenRequest struct {
	first, answered       int64
	hasFirst, hasAnswered bool
	byHeader              bool
}

// key is the key the stub recorded request seq of client under.
func (r *seenRequest) key(client, seq int) string {
	sep := "/"
	if r.byHeader {
		sep = " req:"
	}
	return strconv.Itoa(client) + sep + strconv.Itoa(seq)
}

// fill sets dst[j*requests+seq] to what the stub saw of request seq of
// clients[j], for every request of each (nothing for a client outside
// the fleet; nothing at all when s is nil), under one lock.
func (s *requestStamps) fill(clients []int, dst []seenRequest) {
	clear(dst)
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for j, id := range clients {
		if id < 0 || id >= s.clients {
			continue
		}
		for seq := range s.requests {
			i, d := id*s.requests+seq, &dst[j*s.requests+seq]
			if f := s.first[i]; f > 0 {
				d.first, d.hasFirst, d.byHeader = f-1, true, s.byHeader[i]
			}
			if a := s.answered[i]; a > 0 {
				d.answered, d.hasAnswered = a-1, true
			}
		}
	}
}

// canonicalID parses an id as the fleet writes it (decimal, no sign, no
// leading zero but "0", below a billion), else -1: "+3" or "03" is
// another client's key to the stub, and to the analyzer.
func canonicalID(s string) int {
	if s == "" || len(s) > 9 || len(s) > 1 && s[0] == '0' {
		return -1
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return -1
		}
		n = n*10 + int(s[i]-'0')
	}
	return n
}
