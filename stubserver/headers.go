package stubserver

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// HugeSeconds is the delay the `huge` Retry-After form sends: one year
// (365 days) of valid delay-seconds, which a robust client caps rather than
// honours.
const HugeSeconds = 365 * 24 * 60 * 60

// garbageValue is what the `garbage` form sends: neither delay-seconds nor
// an HTTP-date.
const garbageValue = "soon, maybe"

// cachedSeconds holds the decimal strings of small delays, so the common
// Retry-After values cost no allocation.
var cachedSeconds = func() [][]string {
	c := make([][]string, 3601)
	for i := range c {
		c[i] = []string{strconv.Itoa(i)}
	}
	return c
}()

// secondsValue returns a one-element header value holding n.
func secondsValue(n int64) []string {
	if n >= 0 && n < int64(len(cachedSeconds)) {
		return cachedSeconds[n]
	}
	return []string{strconv.FormatInt(n, 10)}
}

// ceilSeconds rounds d up to whole seconds (0 for d <= 0).
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// retryAfter is the Retry-After header for a delay of d from now (the
// response instant; nowRun is the same instant in run time), plus extra
// whole seconds (the spread of delta and date, added after rounding). It
// returns the header value (nil: none) and the not_before to record.
func (s *Server) retryAfter(form string, d time.Duration, extra int64, now time.Time, nowRun int64) (v []string, notBefore int64, ok bool) {
	d = max(d, 0) // a phase end already passed (latency) is "now"
	switch form {
	case FormDelta:
		n := ceilSeconds(d) + extra
		return secondsValue(n), nowRun + n*int64(time.Second), true
	case FormDate:
		t := now.Round(0).Add(d)
		if t.Nanosecond() != 0 {
			t = t.Truncate(time.Second).Add(time.Second)
		}
		t = t.Add(time.Duration(extra) * time.Second)
		return []string{t.UTC().Format(http.TimeFormat)}, int64(t.Sub(s.startWall)), true
	case FormPastDate:
		t := now.Round(0).Truncate(time.Second).Add(-time.Hour)
		return []string{t.UTC().Format(http.TimeFormat)}, nowRun, true
	case FormNegative:
		return []string{"-" + strconv.FormatInt(max(1, ceilSeconds(d)), 10)}, 0, false
	case FormGarbage:
		return []string{garbageValue}, 0, false
	case FormFractional:
		f := strconv.FormatFloat(d.Seconds(), 'f', 1, 64)
		if f[len(f)-1] == '0' {
			f = f[:len(f)-1] + "5"
		}
		return []string{f}, 0, false
	case FormHuge:
		return secondsValue(HugeSeconds), nowRun + HugeSeconds*int64(time.Second), true
	}
	return nil, 0, false
}

// rateHeaders sets the rate-limit headers of the family for dec (a
// decision of ts's limiter) at now and returns them as recorded in
// timeline.Attempt.RateLimit. RateLimit-Policy lists every limit; RateLimit
// and X-RateLimit-* report the binding one (Decision.Binding). The header
// values are substrings of the record, so the two cost one string.
func (s *Server) rateHeaders(h http.Header, ts *tierState, dec *Decision, now time.Time) string {
	bi := dec.Binding()
	st := &dec.Limits[bi]
	var b []byte
	switch s.cfg.Headers {
	case HeadersIETF:
		b = make([]byte, 0, 96)
		b = append(b, "RateLimit-Policy: "...)
		b = append(b, ts.policy[0]...)
		b = append(b, "; RateLimit: "...)
		v := len(b)
		b = append(b, ts.quoted[bi]...)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, int64(st.Remaining), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, ceilSeconds(max(st.Reset, st.RetryIn)), 10)
		rec := string(b)
		h["Ratelimit-Policy"] = ts.policy
		h["Ratelimit"] = []string{rec[v:]}
		return rec
	case HeadersXRateLimit:
		return s.xRateLimit(h, ts.limitValue[bi], st.Remaining, now.Add(max(st.Reset, st.RetryIn)))
	}
	return ""
}

// xRateLimit sets X-RateLimit-Limit (limit, nil: not sent), -Remaining and
// -Reset (reset as epoch seconds, rounded up) and returns their record.
func (s *Server) xRateLimit(h http.Header, limit []string, remaining int, reset time.Time) string {
	epoch := reset.Unix()
	if reset.Nanosecond() != 0 {
		epoch++
	}
	b := make([]byte, 0, 96)
	if limit != nil {
		b = append(b, "X-RateLimit-Limit: "...)
		b = append(b, limit[0]...)
		b = append(b, "; "...)
	}
	b = append(b, "X-RateLimit-Remaining: "...)
	r0 := len(b)
	b = strconv.AppendInt(b, int64(remaining), 10)
	r1 := len(b)
	b = append(b, "; X-RateLimit-Reset: "...)
	e0 := len(b)
	b = strconv.AppendInt(b, epoch, 10)
	rec := string(b)
	vals := []string{rec[r0:r1], rec[e0:]}
	if limit != nil {
		h["X-Ratelimit-Limit"] = limit
	}
	h["X-Ratelimit-Remaining"] = vals[0:1:1]
	h["X-Ratelimit-Reset"] = vals[1:2:2]
	return rec
}

// exhaustedHeaders sets the family's headers for a rate limit the stub
// answers without a quota's decision — a status phase's or a mix's 429,
// or a status phase marked rate_limit (respond: {status: 403, rate_limit:
// true}) — and returns their record: nothing remains until reset from now
// (see exhaustedReset). When the server has a quota (other phases use it),
// the request's tier publishes its policy as a quota phase does:
// RateLimit-Policy and RateLimit naming its first limit (ietf), or that
// limit's X-RateLimit-Limit (x-ratelimit). Without one, only RateLimit
// `"default";r=0;t=N`, or X-RateLimit-Remaining 0 and -Reset, are sent.
func (s *Server) exhaustedHeaders(h http.Header, r *http.Request, now time.Time, reset time.Duration) string {
	var ts *tierState
	if s.quota != nil {
		ts = s.quota.tier(r)
	}
	switch s.cfg.Headers {
	case HeadersIETF:
		name := `"default"`
		if ts != nil {
			name = ts.quoted[0]
		}
		v := name + ";r=0;t=" + strconv.FormatInt(ceilSeconds(reset), 10)
		h["Ratelimit"] = []string{v}
		if ts != nil {
			h["Ratelimit-Policy"] = ts.policy
			return "RateLimit-Policy: " + ts.policy[0] + "; RateLimit: " + v
		}
		return "RateLimit: " + v
	case HeadersXRateLimit:
		var limit []string
		if ts != nil {
			limit = ts.limitValue[0]
		}
		return s.xRateLimit(h, limit, 0, now.Add(reset))
	}
	return ""
}

// exhaustedReset is how long from the response (run instant nowRun) the
// exhausted headers of a rate limit without a quota's decision say the
// allowance stays spent: until the not_before the answer recorded (the
// instant its Retry-After names; 0 for a past date), else — no Retry-After,
// or an unusable one — until the phase ends, else (the last phase) one
// second, the headers' resolution: a 429 never says the allowance is whole
// already.
func exhaustedReset(ph *phase, notBefore int64, hasNotBefore bool, nowRun int64) time.Duration {
	switch {
	case hasNotBefore:
		return time.Duration(max(0, notBefore-nowRun))
	case ph.end > nowRun:
		return time.Duration(ph.end - nowRun)
	}
	return time.Second
}

// policyItem is one RateLimit-Policy item: limit units per window seconds
// (a window shorter than a second is published as w=1, the field's
// resolution).
func policyItem(name string, limit int, window time.Duration) string {
	w := max(1, int64(math.Ceil(window.Seconds())))
	return strconv.Quote(name) + ";q=" + strconv.Itoa(limit) + ";w=" + strconv.FormatInt(w, 10)
}
