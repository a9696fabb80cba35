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

// rateHeaders sets the rate-limit headers of family for dec at now and
// returns them as recorded in timeline.Attempt.RateLimit. The header values
// are substrings of the record, so the two cost one string.
func (s *Server) rateHeaders(h http.Header, dec *Decision, now time.Time) string {
	var b []byte
	switch s.cfg.Headers {
	case HeadersIETF:
		b = make([]byte, 0, 96)
		b = append(b, "RateLimit-Policy: "...)
		b = append(b, s.policyValue[0]...)
		b = append(b, "; RateLimit: "...)
		v := len(b)
		b = append(b, `"default";r=`...)
		b = strconv.AppendInt(b, int64(dec.Remaining), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, ceilSeconds(dec.Reset), 10)
		rec := string(b)
		h["Ratelimit-Policy"] = s.policyValue
		h["Ratelimit"] = []string{rec[v:]}
		return rec
	case HeadersXRateLimit:
		reset := now.Add(dec.Reset)
		epoch := reset.Unix()
		if reset.Nanosecond() != 0 {
			epoch++
		}
		b = make([]byte, 0, 96)
		b = append(b, "X-RateLimit-Limit: "...)
		b = append(b, s.limitValue[0]...)
		b = append(b, "; X-RateLimit-Remaining: "...)
		r0 := len(b)
		b = strconv.AppendInt(b, int64(dec.Remaining), 10)
		r1 := len(b)
		b = append(b, "; X-RateLimit-Reset: "...)
		e0 := len(b)
		b = strconv.AppendInt(b, epoch, 10)
		rec := string(b)
		vals := []string{rec[r0:r1], rec[e0:]}
		h["X-Ratelimit-Limit"] = s.limitValue
		h["X-Ratelimit-Remaining"] = vals[0:1:1]
		h["X-Ratelimit-Reset"] = vals[1:2:2]
		return rec
	}
	return ""
}

// policyHeader is the RateLimit-Policy value of a quota: one policy named
// "default" of q units per w seconds (a window shorter than a second is
// published as w=1, the field's resolution).
func policyHeader(limit int, window time.Duration) string {
	w := max(1, int64(math.Ceil(window.Seconds())))
	return `"default";q=` + strconv.Itoa(limit) + ";w=" + strconv.FormatInt(w, 10)
}
