package client

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxDelaySeconds is the largest delay-seconds value a time.Duration holds.
const maxDelaySeconds = math.MaxInt64 / int64(time.Second)

// ParseRetryAfter parses a Retry-After field value (RFC 9110 section 10.2.3)
// into the wait it asks for, measured from now. It accepts delay-seconds (one
// or more ASCII digits) and an HTTP-date in the preferred IMF-fixdate form
// and the obsolete RFC 850 and asctime forms; surrounding spaces and tabs are
// ignored. A date in the past gives 0, true: retry at once. A delay-seconds
// too large for a time.Duration is clamped to the largest one, never wrapped.
//
// Values that say nothing usable give 0, false: the empty string, negative or
// fractional numbers, a leading '+', dates in other formats or zones than
// GMT, and garbage.
func ParseRetryAfter(value string, now time.Time) (wait time.Duration, ok bool) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		var n int64
		for i := 0; i < len(v); i++ {
			n = n*10 + int64(v[i]-'0')
			if n > maxDelaySeconds {
				return time.Duration(math.MaxInt64), true
			}
		}
		return time.Duration(n) * time.Second, true
	}
	// RFC 850 dates parse with a zone abbreviation that time.Parse does not
	// check; HTTP dates are always GMT, and IMF-fixdate has it literally.
	if strings.Contains(v, "-") && !strings.HasSuffix(v, " GMT") {
		return 0, false
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now) // saturates instead of overflowing
	if d < 0 {
		d = 0
	}
	return d, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}

// RateLimit is what a response's rate-limit headers say about the quota.
type RateLimit struct {
	Limit     int64         // requests allowed in the window; 0 when not sent
	Remaining int64         // requests left in the window
	Reset     time.Duration // time until the window resets, from the response; 0 when not sent
}

// ParseRateLimit reads the rate-limit headers of a response, opportunistically:
// the IETF httpapi draft's structured fields (`RateLimit: "default";r=5;t=30`
// with the limit from `RateLimit-Policy: "default";q=100;w=60`, and the older
// `RateLimit: limit=100, remaining=5, reset=30`), the separate
// RateLimit-Limit / -Remaining / -Reset fields, and the GitHub-style
// X-RateLimit-Limit / -Remaining / -Reset (reset in epoch seconds, or in
// seconds from now when nearer zero than the present's epoch second). ok is false when no remaining
// count is found or a value is malformed or negative.
func ParseRateLimit(h http.Header, now time.Time) (rl RateLimit, ok bool) {
	if v := h["Ratelimit"]; len(v) > 0 {
		return parseIETF(v[0], h.Get("RateLimit-Policy"))
	}
	if v := h["Ratelimit-Remaining"]; len(v) > 0 {
		return parseTriple(v[0], h.Get("RateLimit-Limit"), h.Get("RateLimit-Reset"), now, false)
	}
	if v := h["X-Ratelimit-Remaining"]; len(v) > 0 {
		return parseTriple(v[0], h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Reset"), now, true)
	}
	return RateLimit{}, false
}

func parseTriple(remaining, limit, reset string, now time.Time, epoch bool) (RateLimit, bool) {
	var rl RateLimit
	var ok bool
	if rl.Remaining, ok = parseCount(remaining); !ok {
		return RateLimit{}, false
	}
	if limit != "" {
		if rl.Limit, ok = parseCount(limit); !ok {
			return RateLimit{}, false
		}
	}
	if reset != "" {
		n, ok := parseCount(reset)
		if !ok {
			return RateLimit{}, false
		}
		rl.Reset = resetDuration(n, now, epoch)
	}
	return rl, true
}

// resetDuration turns a reset value into a wait: epoch seconds when epoch is
// set and the value is nearer now's epoch second than zero, else seconds
// from now.
func resetDuration(n int64, now time.Time, epoch bool) time.Duration {
	// An epoch second is nearer the present's than zero; delay-seconds
	// are small. (A fixed cut at 10^9 misreads epoch resets on a clock
	// before September 2001, such as a test's virtual one in 2000.)
	if epoch && n > now.Unix()/2 {
		if n > maxDelaySeconds {
			n = maxDelaySeconds
		}
		d := time.Unix(n, 0).Sub(now)
		return max(d, 0)
	}
	if n > maxDelaySeconds {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(n) * time.Second
}

// parseIETF reads the RateLimit field in either draft shape. With several
// policies listed, the first one wins.
func parseIETF(field, policy string) (RateLimit, bool) {
	var rl RateLimit
	item, _, _ := strings.Cut(field, ",")
	item = strings.Trim(item, " \t")
	if strings.Contains(item, "=") && !strings.Contains(item, ";") {
		// Older draft: "limit=100, remaining=5, reset=30".
		seen := false
		for p := range strings.SplitSeq(field, ",") {
			k, v, found := strings.Cut(strings.Trim(p, " \t"), "=")
			if !found {
				return RateLimit{}, false
			}
			n, ok := parseCount(v)
			if !ok {
				return RateLimit{}, false
			}
			switch strings.ToLower(k) {
			case "limit":
				rl.Limit = n
			case "remaining":
				rl.Remaining, seen = n, true
			case "reset":
				rl.Reset = resetDuration(n, time.Time{}, false)
			}
		}
		if !seen {
			return RateLimit{}, false
		}
		return rl, true
	}
	name, params, ok := splitItem(item)
	if !ok {
		return RateLimit{}, false
	}
	seen := false
	for k, v := range params {
		n, ok := parseCount(v)
		if !ok {
			return RateLimit{}, false
		}
		switch k {
		case "r":
			rl.Remaining, seen = n, true
		case "t":
			rl.Reset = resetDuration(n, time.Time{}, false)
		}
	}
	if !seen {
		return RateLimit{}, false
	}
	// The limit is the quota of the policy of the same name.
	for p := range strings.SplitSeq(policy, ",") {
		pname, pparams, ok := splitItem(strings.Trim(p, " \t"))
		if !ok || pname != name {
			continue
		}
		if q, found := pparams["q"]; found {
			if n, ok := parseCount(q); ok {
				rl.Limit = n
			}
		}
		break
	}
	return rl, true
}

// splitItem splits a structured-field item `"name";k=v;k=v` (the name may
// also be a token) into its name and parameters.
func splitItem(item string) (name string, params map[string]string, ok bool) {
	parts := strings.Split(item, ";")
	name = strings.Trim(parts[0], " \t")
	name = strings.TrimSuffix(strings.TrimPrefix(name, `"`), `"`)
	params = make(map[string]string, len(parts)-1)
	for _, p := range parts[1:] {
		k, v, found := strings.Cut(strings.Trim(p, " \t"), "=")
		if !found || k == "" {
			return "", nil, false
		}
		params[k] = v
	}
	return name, params, true
}

// parseCount parses a non-negative decimal integer of at most 18 digits.
func parseCount(s string) (int64, bool) {
	s = strings.Trim(s, " \t")
	if !isDigits(s) || len(s) > 18 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
