package stubserver

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// quotaState is a Server's quota laid out for the request path: one
// Limiter per tier (one in all without tiers), the tier lookup, the costs,
// and the header values that do not change.
type quotaState struct {
	q        *Quota
	tiers    []tierState // without tiers, one unnamed
	exact    map[string]int
	prefixes []tierPrefix // longest first
	dflt     int          // tier of unknown keys, -1: 401
	anon     int          // tier of requests without a key, -1: 401
	endpoint bool         // some limit keys by endpoint
	costs    []Cost

	lastLog atomic.Int64 // unix ns of the last backend error logged
	backend string       // q.Backend as logged: its password redacted
}

type tierPrefix struct {
	prefix string
	tier   int
}

type tierState struct {
	name   string
	lim    Limiter
	limits []Limit // Named
	policy []string
	// limitValue[i] is X-RateLimit-Limit for limit i; names[i] its
	// recorded name ("tier/limit" with tiers).
	limitValue [][]string
	names      []string
	quoted     []string // limit names as sf-strings, for RateLimit
}

// newQuotaState builds the limiters of q through newLim.
func newQuotaState(q *Quota, newLim func(LimiterSpec) (Limiter, error)) (*quotaState, error) {
	qs := &quotaState{q: q, exact: map[string]int{}, dflt: -1, anon: -1, costs: q.Costs, backend: redactURL(q.Backend)}
	if newLim == nil {
		newLim = NewMemoryLimiter
	}
	add := func(tier string, limits []Limit) error {
		named := Named(limits)
		lim, err := newLim(LimiterSpec{Tier: tier, Limits: named, Backend: q.Backend})
		if err != nil {
			return err
		}
		ts := tierState{name: tier, lim: lim, limits: named}
		var pol strings.Builder
		for i, l := range named {
			if i > 0 {
				pol.WriteString(", ")
			}
			pol.WriteString(policyItem(l.Name, max(1, int(l.Limit)), l.per()))
			ts.limitValue = append(ts.limitValue, []string{strconv.Itoa(max(1, int(l.Limit)))})
			n := l.Name
			if tier != "" {
				n = tier + "/" + n
			}
			ts.names = append(ts.names, n)
			ts.quoted = append(ts.quoted, strconv.Quote(l.Name))
			if l.Key == KeyEndpoint {
				qs.endpoint = true
			}
		}
		ts.policy = []string{pol.String()}
		qs.tiers = append(qs.tiers, ts)
		return nil
	}
	if len(q.Tiers) == 0 {
		return qs, add("", q.Limits)
	}
	for i, t := range q.Tiers {
		if err := add(t.Name, t.Limits); err != nil {
			return nil, err
		}
		for _, k := range t.Keys {
			if p, ok := strings.CutSuffix(k, "*"); ok {
				qs.prefixes = append(qs.prefixes, tierPrefix{p, i})
			} else {
				qs.exact[k] = i
			}
		}
		if t.Default {
			qs.dflt = i
		}
		if t.Anonymous {
			qs.anon = i
		}
	}
	sort.SliceStable(qs.prefixes, func(a, b int) bool { return len(qs.prefixes[a].prefix) > len(qs.prefixes[b].prefix) })
	return qs, nil
}

// tier picks r's tier; nil when r must be answered 401 (no key, or a key
// no tier takes).
func (qs *quotaState) tier(r *http.Request) *tierState {
	if len(qs.q.Tiers) == 0 {
		return &qs.tiers[0]
	}
	key := apiKey(r)
	i := qs.anon
	if key != "" {
		var ok bool
		if i, ok = qs.exact[key]; !ok {
			i = qs.dflt
			for _, p := range qs.prefixes {
				if strings.HasPrefix(key, p.prefix) {
					i = p.tier
					break
				}
			}
		}
	}
	if i < 0 {
		return nil
	}
	return &qs.tiers[i]
}

// cost is r's cost in units: the first matching Cost's, else 1.
func (qs *quotaState) cost(r *http.Request) int {
	if len(qs.costs) == 0 {
		return 1
	}
	p := r.URL.Path
	if _, _, rest, ok := splitPath(p); ok {
		p = rest // "/search" of /c/1/r/2/search; "" for /c/1/r/2
	}
	for _, c := range qs.costs {
		if c.Method != "" && c.Method != r.Method {
			continue
		}
		if c.Path != "" {
			if ok, _ := path.Match(c.Path, p); !ok {
				continue
			}
		}
		return c.Cost
	}
	return 1
}

// charge is r's Charge under ts.
func (ts *tierState) charge(r *http.Request, client string, cost int) Charge {
	c := Charge{Cost: cost}
	for i := range ts.limits {
		switch ts.limits[i].Key {
		case KeyClient:
			c.Keys[i] = client
		case KeyAPIKey:
			c.Keys[i] = apiKey(r)
		case KeyEndpoint:
			c.Keys[i] = endpoint(r)
		}
	}
	return c
}

// status is the answer of a request limit i rejected.
func (ts *tierState) status(i int) int {
	if s := ts.limits[i].Status; s != 0 {
		return s
	}
	return http.StatusTooManyRequests
}

// logBackend logs a backend error at most once a second.
func (qs *quotaState) logBackend(s *Server, err error) {
	now := time.Now().UnixNano()
	last := qs.lastLog.Load()
	if now-last < int64(time.Second) || !qs.lastLog.CompareAndSwap(last, now) {
		return
	}
	open := qs.q.OnError == OnErrorOpen
	s.log.Error("stubserver: quota backend failed", "backend", qs.backend, "err", err, "fail_open", open)
}

// redactURL is a backend URL with its password, if any, replaced by "xxxxx".
func redactURL(b string) string {
	u, err := url.Parse(b)
	if err != nil {
		return "(not a URL)"
	}
	return u.Redacted()
}

// takeQuota decides r under the quota: it sets the rate-limit headers (and
// a's record of them and of the limit that rejected), holds the request
// while a shaping limit says so (held), and returns the status and the
// limiter's wait, the value of Retry-After: limiter.
func (s *Server) takeQuota(ctx context.Context, r *http.Request, h http.Header, a *timeline.Attempt, client string, now time.Time) (status int, retryIn time.Duration, held bool) {
	qs := s.quota
	ts := qs.tier(r)
	if ts == nil {
		return http.StatusUnauthorized, 0, false
	}
	dec, err := ts.lim.Take(ctx, ts.charge(r, client, qs.cost(r)), now)
	if err != nil {
		s.metrics.backendErrors.Add(1)
		qs.logBackend(s, err)
		// The stub failed, not the client: the record says so.
		if qs.q.OnError == OnErrorOpen {
			a.Backend = timeline.BackendOpen
			return http.StatusOK, 0, false
		}
		a.Backend = timeline.BackendClosed
		return http.StatusServiceUnavailable, time.Second, false
	}
	status = http.StatusOK
	if !dec.Allowed {
		s.metrics.quotaRejected.Add(1)
		a.Limit = ts.names[dec.Rejected]
		status = ts.status(dec.Rejected)
	} else {
		for i := range dec.N {
			if dec.Limits[i].Remaining == 0 {
				s.metrics.quotaExhausted.Add(1)
				break
			}
		}
	}
	a.RateLimit = s.rateHeaders(h, ts, &dec, now)
	if dec.Delay > 0 {
		t := time.NewTimer(dec.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
		case <-s.stopping:
		}
		t.Stop()
		held = true
	}
	return status, dec.RetryIn, held
}

// A HealthChecker is a Limiter whose backend can be asked whether it
// answers, cheaply (stubredis: a PING). /healthz asks every such Limiter of
// the quota on each call.
type HealthChecker interface {
	// Health returns nil when the backend answers before ctx ends.
	Health(ctx context.Context) error
}

// HealthTimeout bounds /healthz's check of the quota backend.
const HealthTimeout = time.Second

// health checks the quota's backends: nil when every Limiter that can be
// asked (HealthChecker) answers within HealthTimeout, else an error naming
// the backend (its password hidden).
func (qs *quotaState) health(ctx context.Context) error {
	if qs == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, HealthTimeout)
	defer cancel()
	for i := range qs.tiers {
		if hc, ok := qs.tiers[i].lim.(HealthChecker); ok {
			if err := hc.Health(ctx); err != nil {
				if qs.backend == "" {
					return fmt.Errorf("quota backend: %w", err)
				}
				return fmt.Errorf("quota backend %s: %w", qs.backend, err)
			}
		}
	}
	return nil
}
