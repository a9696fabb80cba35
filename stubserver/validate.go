package stubserver

import (
	"errors"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// A FieldError is one impossible value in a Config. Field is the path of the
// value in the scenario's `server:` section, e.g. "phases[1].retry_after.form",
// so a loader can point at the line that holds it.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return "stubserver: " + e.Field + ": " + e.Msg }

// ErrInvalidConfig is wrapped by every error New returns for a Config that
// fails Validate.
var ErrInvalidConfig = errors.New("stubserver: invalid config")

var (
	headerNames    = []string{HeadersNone, HeadersIETF, HeadersXRateLimit}
	algorithmNames = []string{AlgTokenBucket, AlgFixedWindow, AlgSlidingWindow, AlgSlidingWindowLog, AlgLeakyBucket}
	modeNames      = []string{ModeMeter, ModeShape}
	onErrorNames   = []string{OnErrorClosed, OnErrorOpen}
	keyNames       = []string{KeyGlobal, KeyClient, KeyAPIKey, KeyEndpoint}
	respondNames   = []string{RespondOK, RespondQuota, RespondStatus, RespondMix, RespondFault, RespondPassthrough}
	faultNames     = []string{FaultReset, FaultHang}
	formNames      = []string{FormNone, FormDelta, FormDate, FormNegative, FormGarbage, FormPastDate, FormFractional, FormHuge}
	grpcFormNames  = []string{FormNone, FormPushback, FormPushbackNegative, FormPushbackGarbage, FormRetryInfo}
	protocolNames  = []string{ProtocolHTTP, ProtocolGRPC}
	valueNames     = []string{ValueFixed, ValueLimiter, ValuePhaseEnd}
	distNames      = []string{DistFixed, DistExponential, DistUniform}
	disciplines    = []string{DisciplineFIFO, DisciplineLIFO}
)

// Validate reports the impossible values of c, all of them, joined
// (errors.Join); each is a *FieldError naming its field. Empty strings and
// zero values mean the documented defaults and are valid. It returns nil for
// a valid Config.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if c.Latency < 0 {
		bad("latency", "negative duration %v", c.Latency)
	}
	if !oneOf(c.Protocol, protocolNames) {
		bad("protocol", "unknown protocol %q (want %s)", c.Protocol, strings.Join(protocolNames, ", "))
	}
	switch {
	case c.ProxyTimeout < 0:
		bad("proxy_timeout", "negative duration %v", c.ProxyTimeout)
	case c.ProxyTimeout > 0 && c.Protocol != ProtocolGRPC:
		bad("proxy_timeout", "a proxy timeout needs protocol: grpc (an HTTP client's own per-attempt timeout plays it)")
	}
	if c.Protocol == ProtocolGRPC && c.Upstream != "" {
		bad("upstream", "a gRPC stub has no upstream: it answers every call itself")
	}
	if !oneOf(c.Headers, headerNames) {
		bad("headers", "unknown header family %q (want %s)", c.Headers, strings.Join(headerNames, ", "))
	}
	if q := c.Quota; q != nil {
		errs = append(errs, q.validate()...)
	}
	if c.Upstream != "" {
		if _, err := ParseUpstream(c.Upstream); err != nil {
			bad("upstream", "%s", strings.TrimPrefix(err.Error(), "stubserver: upstream: "))
		}
	}
	if k := c.Capacity; k != nil {
		errs = append(errs, k.validate()...)
		if c.Upstream != "" {
			bad("capacity", "capacity models the stub's own work, and with an upstream the upstream does it; set capacity or upstream, not both")
		}
		if q := c.Quota; q != nil {
			for i, l := range Named(q.Limits) {
				if l.Name == timeline.LimitCapacity {
					bad(fmt.Sprintf("quota.limits[%d].name", i), "the name %q is the capacity model's, which records its rejections under it; rename the limit", l.Name)
				}
			}
		}
	}
	for i, p := range c.Phases {
		at := fmt.Sprintf("phases[%d].", i)
		last := i == len(c.Phases)-1
		switch {
		case p.For < 0:
			bad(at+"for", "negative duration %v", p.For)
		case p.For == 0 && !last:
			bad(at+"for", "missing or zero; only the last phase may last forever")
		}
		if p.Latency < 0 {
			bad(at+"latency", "negative duration %v", p.Latency)
		}
		switch {
		case math.IsNaN(p.Capacity) || p.Capacity < 0 || p.Capacity > 1:
			bad(at+"capacity", "share %v outside (0, 1] (e.g. 0.3 or 30%%)", p.Capacity)
		case p.Capacity > 0 && c.Capacity == nil:
			bad(at+"capacity", "a phase's capacity scales the server's; set server capacity: {concurrency: N, ...}")
		}
		r := p.Respond
		switch r.Kind {
		case "", RespondOK:
		case RespondQuota:
			if c.Quota == nil {
				bad(at+"respond", "quota needs a server quota (quota: {...})")
			}
		case RespondStatus:
			if msg := checkStatus(r.Status); msg != "" {
				bad(at+"respond.status", "%s", msg)
			}
			if r.RateLimit && r.Status < 400 {
				bad(at+"respond.rate_limit", "status %d is not an error; a rate limit answers 4xx or 5xx", r.Status)
			}
		case RespondMix:
			if len(r.Mix) == 0 {
				bad(at+"respond.mix", "empty mix")
			}
			for j, w := range r.Mix {
				wat := fmt.Sprintf("%srespond.mix[%d]", at, j)
				switch {
				case w.Passthrough && (w.Status != 0 || w.Fault != ""):
					bad(wat, "passthrough with status %d or fault %q; want one", w.Status, w.Fault)
				case w.Passthrough:
					if c.Upstream == "" {
						bad(wat, "passthrough needs an upstream (server.upstream, or serve --upstream)")
					}
				case w.Status != 0 && w.Fault != "":
					bad(wat, "both status %d and fault %q; want one", w.Status, w.Fault)
				case w.Fault != "":
					if !oneOf(w.Fault, faultNames) || w.Fault == "" {
						bad(wat+".fault", "unknown fault %q (want %s)", w.Fault, strings.Join(faultNames, ", "))
					}
				default:
					if msg := checkStatus(w.Status); msg != "" {
						bad(wat+".status", "%s", msg)
					}
				}
				if math.IsNaN(w.Weight) || math.IsInf(w.Weight, 0) || w.Weight <= 0 {
					bad(wat+".weight", "weight must be a positive number, got %v", w.Weight)
				}
			}
		case RespondPassthrough:
			if c.Upstream == "" {
				bad(at+"respond", "passthrough needs an upstream (server.upstream, or serve --upstream)")
			}
		case RespondFault:
			if r.Fault == "" || !oneOf(r.Fault, faultNames) {
				bad(at+"respond.fault", "unknown fault %q (want %s)", r.Fault, strings.Join(faultNames, ", "))
			}
		default:
			bad(at+"respond", "unknown behaviour %q (want %s)", r.Kind, strings.Join(respondNames, ", "))
		}
		ra := p.RetryAfter
		forms := formNames
		if c.Protocol == ProtocolGRPC {
			forms = grpcFormNames
		}
		switch {
		case c.Protocol == ProtocolGRPC && ra.Form != "" && ra.Form != FormNone && oneOf(ra.Form, formNames):
			bad(at+"retry_after.form", "form %s is an HTTP Retry-After; a gRPC stub sends %s", ra.Form, strings.Join(grpcFormNames, ", "))
		case c.Protocol != ProtocolGRPC && grpcForm(ra.Form):
			bad(at+"retry_after.form", "form %s is gRPC's: it needs protocol grpc", ra.Form)
		case !oneOf(ra.Form, forms):
			bad(at+"retry_after.form", "unknown form %q (want %s)", ra.Form, strings.Join(forms, ", "))
		}
		switch ra.Value {
		case "", ValueFixed:
			if ra.Fixed < 0 {
				bad(at+"retry_after.value", "negative duration %v", ra.Fixed)
			}
		case ValueLimiter:
			if r.Kind != RespondQuota {
				bad(at+"retry_after.value", "limiter needs respond: quota")
			}
		case ValuePhaseEnd:
			if last {
				bad(at+"retry_after.value", "phase-end on the last phase, which never ends")
			}
		default:
			bad(at+"retry_after.value", "unknown value %q (want seconds, %s, %s)", ra.Value, ValueLimiter, ValuePhaseEnd)
		}
		switch {
		case ra.Spread < 0:
			bad(at+"retry_after.spread", "negative duration %v", ra.Spread)
		case ra.Spread%time.Second != 0 && (ra.Form == FormDelta || ra.Form == FormDate):
			bad(at+"retry_after.spread", "spread %v is not whole seconds: form %s sends whole seconds, so its spread is drawn in whole seconds (use e.g. %v)",
				ra.Spread, ra.Form, max(time.Second, ra.Spread.Truncate(time.Second)))
		}
	}
	return errors.Join(errs...)
}

func checkStatus(s int) string {
	if s < 200 || s > 599 {
		return fmt.Sprintf("status %d outside 200-599 (1xx is not a final response)", s)
	}
	return ""
}

// oneOf reports whether s is "" (the default) or one of names.
func oneOf(s string, names []string) bool {
	if s == "" {
		return true
	}
	for _, n := range names {
		if s == n {
			return true
		}
	}
	return false
}

// validate reports k's impossible values, each a *FieldError under
// "capacity.".
func (k *Capacity) validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: "capacity." + field, Msg: fmt.Sprintf(format, args...)})
	}
	if k.Concurrency < 1 || k.Concurrency > MaxConcurrency {
		bad("concurrency", "%d workers; want 1 to %d", k.Concurrency, MaxConcurrency)
	}
	if k.Queue < 0 || k.Queue > MaxQueue {
		bad("queue", "%d places; want 0 to %d", k.Queue, MaxQueue)
	}
	if k.Service < 0 {
		bad("service", "negative duration %v", k.Service)
	}
	if !oneOf(k.Dist, distNames) {
		bad("dist", "unknown distribution %q (want %s)", k.Dist, strings.Join(distNames, ", "))
	}
	if !oneOf(k.Discipline, disciplines) {
		bad("discipline", "unknown discipline %q (want %s)", k.Discipline, strings.Join(disciplines, ", "))
	}
	return errs
}

// validate reports q's impossible values, each a *FieldError under
// "quota.".
func (q *Quota) validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: "quota." + field, Msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case len(q.Tiers) == 0 && len(q.Limits) == 0:
		bad("limits", "a quota needs at least one limit (e.g. rate: 100/s)")
	case len(q.Tiers) > 0 && len(q.Limits) > 0:
		bad("limits", "limits and tiers both set; with tiers, each tier has its own limits")
	}
	errs = append(errs, validateLimits("quota.limits", q.Limits)...)
	names := map[string]bool{}
	keys := map[string]string{}
	var dflt, anon string
	for i, t := range q.Tiers {
		at := fmt.Sprintf("tiers[%d].", i)
		switch {
		case t.Name == "":
			bad(at+"name", "a tier needs a name")
		case names[t.Name]:
			bad(at+"name", "tier %q named twice", t.Name)
		case strings.ContainsAny(t.Name, "/\"\x00"):
			bad(at+"name", "tier name %q holds a '/', '\"' or NUL", t.Name)
		}
		names[t.Name] = true
		if len(t.Limits) == 0 {
			bad(at+"limits", "tier %q has no limits", t.Name)
		}
		errs = append(errs, validateLimits("quota."+at+"limits", t.Limits)...)
		for j, k := range t.Keys {
			switch prev, dup := keys[k]; {
			case k == "" || k == "*":
				bad(fmt.Sprintf("%skeys[%d]", at, j), "empty key or bare \"*\"; use default: true for every other key")
			case strings.Contains(strings.TrimSuffix(k, "*"), "*"):
				bad(fmt.Sprintf("%skeys[%d]", at, j), "key %q: \"*\" may only end a prefix", k)
			case dup:
				bad(fmt.Sprintf("%skeys[%d]", at, j), "key %q already in tier %q", k, prev)
			}
			keys[k] = t.Name
		}
		switch {
		case t.Default && dflt != "":
			bad(at+"default", "tier %q is default, and so is tier %q; at most one may be", t.Name, dflt)
		case t.Default:
			dflt = t.Name
		}
		switch {
		case t.Anonymous && anon != "":
			bad(at+"anonymous", "tier %q is anonymous, and so is tier %q; at most one may be", t.Name, anon)
		case t.Anonymous:
			anon = t.Name
		}
	}
	for i, c := range q.Costs {
		at := fmt.Sprintf("costs[%d].", i)
		if c.Cost < 1 {
			bad(at+"cost", "cost %d; want a whole number of units, at least 1", c.Cost)
		}
		if _, err := path.Match(c.Path, ""); err != nil {
			bad(at+"path", "bad path pattern %q: %v", c.Path, err)
		}
		all := [][]Limit{q.Limits}
		for _, t := range q.Tiers {
			all = append(all, t.Limits)
		}
		for _, ls := range all {
			for j, l := range Named(ls) {
				if n := l.capacity(); l.Limit > 0 && c.Cost > n {
					bad(at+"cost", "cost %d exceeds limit %q's capacity of %d: such requests could never be allowed", c.Cost, ls[j].name(len(ls), j), n)
				}
			}
		}
	}
	if q.Backend != "" && q.Backend != BackendMemory && !strings.HasPrefix(q.Backend, "redis://") && !strings.HasPrefix(q.Backend, "rediss://") {
		bad("backend", "unknown backend %q (want memory or a redis://HOST:PORT/DB URL)", q.Backend)
	}
	if !oneOf(q.OnError, onErrorNames) {
		bad("on_error", "unknown %q (want %s)", q.OnError, strings.Join(onErrorNames, ", "))
	}
	return errs
}

// validateLimits reports the impossible values of one layered list, under
// field prefix at (e.g. "quota.limits").
func validateLimits(at string, ls []Limit) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if len(ls) > MaxLimits {
		bad(at, "%d limits; at most %d may be layered", len(ls), MaxLimits)
	}
	names := map[string]int{}
	for i, l := range ls {
		f := fmt.Sprintf("%s[%d].", at, i)
		if !oneOf(l.Algorithm, algorithmNames) {
			bad(f+"algorithm", "unknown algorithm %q (want %s)", l.Algorithm, strings.Join(algorithmNames, ", "))
		}
		switch {
		case math.IsNaN(l.Limit) || math.IsInf(l.Limit, 0) || l.Limit <= 0:
			bad(f+"rate", "limit must be a positive number, got %v", l.Limit)
		case l.Algorithm != "" && l.Algorithm != AlgTokenBucket && l.Algorithm != AlgLeakyBucket && l.Limit < 1:
			bad(f+"rate", "a %s limit needs at least 1 request per window, got %v", l.Algorithm, l.Limit)
		case l.Algorithm == AlgSlidingWindowLog && l.Limit > 1<<16:
			bad(f+"rate", "a sliding-window-log keeps one timestamp per request: at most %d per window, got %v", 1<<16, l.Limit)
		}
		if l.Per < 0 {
			bad(f+"rate", "negative window %v", l.Per)
		}
		if l.Burst < 0 {
			bad(f+"burst", "negative burst %d", l.Burst)
		}
		if !oneOf(l.Key, keyNames) {
			bad(f+"key", "unknown key %q (want %s)", l.Key, strings.Join(keyNames, ", "))
		}
		if !oneOf(l.Mode, modeNames) {
			bad(f+"mode", "unknown mode %q (want %s)", l.Mode, strings.Join(modeNames, ", "))
		} else if l.Mode != "" && l.Algorithm != AlgLeakyBucket {
			bad(f+"mode", "mode is the leaky bucket's; this limit is %s", l.algorithm())
		}
		if l.MaxDelay < 0 {
			bad(f+"max_delay", "negative duration %v", l.MaxDelay)
		} else if l.MaxDelay > 0 && l.Mode != ModeShape {
			bad(f+"max_delay", "max_delay bounds a shaper's hold; set mode: shape")
		}
		if l.Status != 0 && l.Status != 429 && l.Status != 403 && l.Status != 503 {
			bad(f+"status", "a limit answers 429, 403 or 503, not %d", l.Status)
		}
		n := l.name(len(ls), i)
		if j, dup := names[n]; dup {
			bad(f+"name", "limits[%d] and limits[%d] are both named %q; name them", j, i, n)
		}
		if strings.ContainsAny(n, "/\"\\\x00") {
			bad(f+"name", "limit name %q holds a '/', '\"', '\\' or NUL", n)
		}
		names[n] = i
	}
	return errs
}

// per is the limit's window, defaulting to one second.
func (l *Limit) per() time.Duration {
	if l.Per <= 0 {
		return time.Second
	}
	return l.Per
}

func (l *Limit) algorithm() string {
	if l.Algorithm == "" {
		return AlgTokenBucket
	}
	return l.Algorithm
}

// capacity is the most units one request may cost and still fit.
func (l *Limit) capacity() int {
	switch l.algorithm() {
	case AlgTokenBucket, AlgLeakyBucket:
		return l.burst()
	}
	return max(1, int(l.Limit))
}

// burst is the token bucket's capacity or the leaky bucket's queue.
func (l *Limit) burst() int {
	if l.Burst > 0 {
		return l.Burst
	}
	return max(1, int(l.Limit))
}

// name is the limit's name, the i-th of n: its own, or "default" when it
// is alone, else its window's.
func (l *Limit) name(n, i int) string {
	switch {
	case l.Name != "":
		return l.Name
	case n == 1:
		return "default"
	}
	switch l.per() {
	case time.Second:
		return "second"
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	case 24 * time.Hour:
		return "day"
	}
	return "limit-" + strconv.Itoa(i+1)
}

// Named returns ls with every Name set to the one headers and the timeline
// use.
func Named(ls []Limit) []Limit {
	out := make([]Limit, len(ls))
	for i, l := range ls {
		l.Name = l.name(len(ls), i)
		out[i] = l
	}
	return out
}

// Resolved returns l with its defaults spelled out: Algorithm, Per, Burst
// (a bucket's capacity: Burst, else Limit at least 1; a window's: its whole
// Limit, at least 1, whatever Burst says, since no window reads it) and
// Key; for a leaky bucket its Mode, and for a shaper MaxDelay. A Limiter
// other than the memory one reads its limits through it, so the defaults
// are decided in one place.
func (l Limit) Resolved() Limit {
	l.Algorithm = l.algorithm()
	l.Per = l.per()
	l.Burst = l.burst()
	if l.Algorithm != AlgTokenBucket && l.Algorithm != AlgLeakyBucket {
		l.Burst = max(1, int(l.Limit))
	}
	if l.Key == "" {
		l.Key = KeyGlobal
	}
	if l.Algorithm == AlgLeakyBucket && l.Mode == "" {
		l.Mode = ModeMeter
	}
	if l.Mode == ModeShape && l.MaxDelay == 0 {
		l.MaxDelay = l.Per
	}
	return l
}
