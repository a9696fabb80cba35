package stubserver

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// Metric codes beyond HTTP statuses.
const (
	codeReset = 600 + iota
	codeHang
	codeAbandoned
	numCodes
)

// metrics counts with plain atomics on the request path; an exporter
// (package stubprom for Prometheus) reads them through Server.Counts only
// when scraped, so a request pays one atomic add and the stub itself
// depends on no metrics library.
type metrics struct {
	byCode         [][numCodes]atomic.Uint64 // per phase
	quotaRejected  atomic.Uint64
	quotaExhausted atomic.Uint64
	backendErrors  atomic.Uint64
	handler        http.Handler // Options.Metrics' handler; nil: /metrics is 404
}

func (m *metrics) count(phase, code int) {
	if code >= 0 && code < numCodes {
		m.byCode[phase][code].Add(1)
	}
}

// Counts is a snapshot of what the stub answered: requests by phase and
// code, and the quota's events. /metrics and /healthz are not counted.
type Counts struct {
	Phases         []PhaseCounts // in schedule order; phases may share a name
	QuotaRejected  uint64        // requests the quota denied (answered 429, or a limit's Status)
	QuotaExhausted uint64        // times an allowed request left a limit empty
	BackendErrors  uint64        // quota decisions the backend failed (Redis down or slow)
	// Capacity is the capacity model's state and totals; nil without
	// Config.Capacity.
	Capacity *CapacityCounts
}

// CapacityCounts is the state of a stub with finite capacity, and what
// its workers did.
type CapacityCounts struct {
	Workers int // workers now: the current phase's share of Concurrency
	Busy    int // workers serving a request now (may exceed Workers just after a phase scales them down)
	Queued  int // requests waiting for a worker now
	// Rejected counts requests rejected with the queue full (503);
	// Dropped, requests dropped unserved because their client had gone
	// (CancelOnDisconnect).
	Rejected uint64
	Dropped  uint64
	// Service is the service time given, in all; Wasted the part of it
	// given to requests whose client went away before the response.
	Service time.Duration
	Wasted  time.Duration
}

// PhaseCounts is one phase's requests by code: the status ("200", "429")
// or the fault ("reset", "hang", "abandoned").
type PhaseCounts struct {
	Name  string
	Codes []CodeCount // codes with at least one request, in code order
}

// CodeCount is how many requests got one code.
type CodeCount struct {
	Code string
	N    uint64
}

// Counts returns the stub's counts so far; safe to call while it serves.
func (s *Server) Counts() Counts {
	m := s.metrics
	c := Counts{QuotaRejected: m.quotaRejected.Load(), QuotaExhausted: m.quotaExhausted.Load(), BackendErrors: m.backendErrors.Load()}
	if p := s.pool; p != nil {
		var now int64
		if _, ok := s.Started(); ok {
			now = int64(time.Since(s.start))
		}
		c.Capacity = &CapacityCounts{
			Workers:  s.workersAt(now),
			Busy:     int(p.nBusy.Load()),
			Queued:   int(p.nQueued.Load()),
			Rejected: p.rejected.Load(),
			Dropped:  p.dropped.Load(),
			Service:  time.Duration(p.serviceNs.Load()),
			Wasted:   time.Duration(p.wastedNs.Load()),
		}
	}
	for pi := range m.byCode {
		pc := PhaseCounts{Name: s.phases[pi].Name}
		for code := range m.byCode[pi] {
			n := m.byCode[pi][code].Load()
			if n == 0 {
				continue
			}
			pc.Codes = append(pc.Codes, CodeCount{codeLabel(code), n})
		}
		c.Phases = append(c.Phases, pc)
	}
	return c
}

func codeLabel(code int) string {
	switch code {
	case codeReset:
		return FaultReset
	case codeHang:
		return FaultHang
	case codeAbandoned:
		return timeline.FaultAbandoned
	}
	return strconv.Itoa(code)
}
