package analyzer

import (
	"strings"

	"github.com/retrylab/retrylab/timeline"
)

// A ResponseClass is what a response asked of the client: the one rule by
// which every check — and the reports, through Retry.Class — tells a rate
// limit (retry, when the server says) from a refusal (do not retry).
// ClassifyResponse computes it.
type ResponseClass uint8

// Response classes.
const (
	// ResponseNone: the client saw no response (a fault: reset, hang,
	// abandoned; or no status recorded).
	ResponseNone ResponseClass = iota
	// ResponseSuccess: 1xx, 2xx or 3xx.
	ResponseSuccess
	// ResponseRateLimit: 429, or another error status the server marked
	// as a rate limit (see ClassifyResponse). Retrying it is correct;
	// when it carried a Retry-After naming a later instant, not before it.
	ResponseRateLimit
	// ResponseUnavailable: any other 5xx. Retrying it is correct.
	ResponseUnavailable
	// ResponseRefusal: any other status (4xx, or one outside 1xx–5xx): the
	// server refused the request, and the same request will be refused
	// again. The non-retryable check judges the ones in its set.
	ResponseRefusal
)

var classNames = [...]string{"none", "success", "rate-limit", "unavailable", "refusal"}

// String is the class's name: none, success, rate-limit, unavailable or
// refusal.
func (c ResponseClass) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "unknown"
}

// Retryable reports whether retrying after a response of class c is
// correct: a rate limit or an unavailable server. The instant-retry check
// judges retries after these; the non-retryable check never judges a rate
// limit.
func (c ResponseClass) Retryable() bool { return c == ResponseRateLimit || c == ResponseUnavailable }

// ClassifyResponse is the rule that decides, for every check, whether the
// response recorded in a was a rate limit. It is one when the client saw
// a status (no fault) and
//
//   - the status is 429; or
//   - the status is an error (≥ 400) and a quota limit rejected the request
//     (a.Limit set: the stub names the limit that refused, whatever the
//     status it answers with, such as 403 for a provider's secondary
//     limit; LimitCapacity, a full queue, is no quota's: the server could
//     not keep up); or
//   - the status is an error and its rate-limit headers say a limit is
//     exhausted (RateLimitExhausted(a.RateLimit): RateLimit with r=0,
//     X-RateLimit-Remaining: 0); or
//   - the status is a 4xx and it carried a Retry-After the server recorded
//     a not_before for (a.HasNotBefore: a value that parses, including one
//     that allows an immediate retry, a past date or 0). RFC 9110 defines
//     Retry-After for 503 and 3xx responses (RFC 6585 for 429); on another
//     4xx it can only mean "come back later". On a 5xx a Retry-After is
//     the outage's, not a rate limit's.
//
// A malformed Retry-After alone (no not_before) does not make a 4xx a rate
// limit: no client can read when to come back. Any error status may be
// one (403 as GitHub answers its secondary limits): the signal decides,
// not the status. Otherwise 1xx–3xx are ResponseSuccess, other 5xx
// ResponseUnavailable, and everything else ResponseRefusal.
func ClassifyResponse(a *timeline.Attempt) ResponseClass {
	st := a.Status
	switch {
	case a.Fault != "" || st == 0:
		return ResponseNone
	case st == 429:
		return ResponseRateLimit
	case st < 400 && st >= 100:
		return ResponseSuccess
	case st < 100:
		return ResponseRefusal
	}
	if (a.Limit != "" && a.Limit != LimitCapacity) || (st < 500 && a.HasNotBefore) || (a.RateLimit != "" && RateLimitExhausted(a.RateLimit)) {
		return ResponseRateLimit
	}
	if st < 600 && st >= 500 {
		return ResponseUnavailable
	}
	return ResponseRefusal
}

// RateLimitExhausted reports whether a recorded set of rate-limit headers
// (timeline.Attempt.RateLimit: "Name: value" fields joined by "; ") says
// that a limit has nothing left:
//
//   - RateLimit, the IETF httpapi draft's structured list: a member whose
//     r parameter is 0 (`"minute";r=0;t=12`), or remaining=0 in the
//     draft's older dictionary form (`limit=10, remaining=0, reset=3`);
//   - RateLimit-Remaining, X-RateLimit-Remaining or X-Rate-Limit-Remaining:
//     0 (its first value).
//
// Field names match without regard to case; other fields
// (RateLimit-Policy, X-RateLimit-Limit, -Reset) say nothing here, and
// neither does a value it cannot read. Quoted strings (the IETF limit
// names) are skipped whole, so a name that looks like "r=0" or "; X: 0" is
// not read as one.
func RateLimitExhausted(rec string) bool {
	for _, f := range splitFields(rec) {
		name, value, ok := strings.Cut(f, ":")
		if !ok || !isToken(name) {
			continue
		}
		switch strings.ToLower(name) {
		case "ratelimit":
			if sfExhausted(value) {
				return true
			}
		case "ratelimit-remaining", "x-ratelimit-remaining", "x-rate-limit-remaining":
			v, _, _ := strings.Cut(value, ",")
			v, _, _ = strings.Cut(v, ";")
			if isZero(v) {
				return true
			}
		}
	}
	return false
}

// splitFields splits a recorded header set into its "Name: value" fields:
// at each "; " outside a quoted string that is followed by a field name and
// a colon. Joined again with "; ", the fields are rec.
func splitFields(rec string) []string {
	var fields []string
	start := 0
	eachUnquoted(rec, func(i int) bool {
		if rec[i] == ';' && i+1 < len(rec) && rec[i+1] == ' ' && startsField(rec[i+2:]) {
			fields = append(fields, rec[start:i])
			start = i + 2
		}
		return true
	})
	return append(fields, rec[start:])
}

// eachUnquoted calls f with the index of each byte of s outside a quoted
// string (a backslash escapes the byte after it inside one) until f
// returns false, and reports whether s ends outside a quoted string.
func eachUnquoted(s string, f func(i int) bool) (closed bool) {
	inQuote := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inQuote {
			switch c {
			case '\\':
				i++
			case '"':
				inQuote = false
			}
			continue
		}
		if c == '"' {
			inQuote = true
			continue
		}
		if !f(i) {
			return true
		}
	}
	return !inQuote
}

// startsField reports whether s begins with a field name and a colon.
func startsField(s string) bool {
	name, _, ok := strings.Cut(s, ":")
	return ok && isToken(name)
}

// isToken reports whether s is a non-empty RFC 9110 token (a field name).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// sfExhausted reports whether a RateLimit field value has a member with
// r=0 (list form) or remaining=0 (dictionary form). Members are split at
// commas and parameters at semicolons outside quoted strings.
func sfExhausted(v string) bool {
	start, found := 0, false
	check := func(part string) bool {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		return ok && (k == "r" || k == "remaining") && isZero(val)
	}
	closed := eachUnquoted(v, func(i int) bool {
		if v[i] == ';' || v[i] == ',' {
			found = check(v[start:i])
			start = i + 1
		}
		return !found
	})
	return found || (closed && check(v[start:]))
}

// isZero reports whether s, less surrounding spaces, is an integer zero
// ("0", "00").
func isZero(s string) bool {
	s = strings.Trim(s, " \t")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// LimitCapacity is the Attempt.Limit of a request that a stub with finite
// capacity (timeline.Meta.Capacity) rejected because its queue was full:
// the phase's rejection, a 503. It is not a rate limit (ClassifyResponse):
// the server could not keep up; the client did not ask for too much.
const LimitCapacity = timeline.LimitCapacity
