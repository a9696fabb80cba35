package stubserver

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
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
	algorithmNames = []string{AlgTokenBucket, AlgFixedWindow, AlgSlidingWindow}
	keyNames       = []string{KeyGlobal, KeyClient, KeyAPIKey, KeyEndpoint}
	respondNames   = []string{RespondOK, RespondQuota, RespondStatus, RespondMix, RespondFault}
	faultNames     = []string{FaultReset, FaultHang}
	formNames      = []string{FormNone, FormDelta, FormDate, FormNegative, FormGarbage, FormPastDate, FormFractional, FormHuge}
	valueNames     = []string{ValueFixed, ValueLimiter, ValuePhaseEnd}
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
	if !oneOf(c.Headers, headerNames) {
		bad("headers", "unknown header family %q (want %s)", c.Headers, strings.Join(headerNames, ", "))
	}
	if q := c.Quota; q != nil {
		if !oneOf(q.Algorithm, algorithmNames) {
			bad("quota.algorithm", "unknown algorithm %q (want %s)", q.Algorithm, strings.Join(algorithmNames, ", "))
		}
		switch {
		case math.IsNaN(q.Limit) || math.IsInf(q.Limit, 0) || q.Limit <= 0:
			bad("quota.rate", "limit must be a positive number, got %v", q.Limit)
		case q.Algorithm != "" && q.Algorithm != AlgTokenBucket && q.Limit < 1:
			bad("quota.rate", "a %s quota needs a limit of at least 1 request per window, got %v", q.Algorithm, q.Limit)
		}
		if q.Per < 0 {
			bad("quota.rate", "negative window %v", q.Per)
		}
		if q.Burst < 0 {
			bad("quota.burst", "negative burst %d", q.Burst)
		}
		if !oneOf(q.Key, keyNames) {
			bad("quota.key", "unknown key %q (want %s)", q.Key, strings.Join(keyNames, ", "))
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
		case RespondMix:
			if len(r.Mix) == 0 {
				bad(at+"respond.mix", "empty mix")
			}
			for j, w := range r.Mix {
				wat := fmt.Sprintf("%srespond.mix[%d]", at, j)
				switch {
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
		case RespondFault:
			if r.Fault == "" || !oneOf(r.Fault, faultNames) {
				bad(at+"respond.fault", "unknown fault %q (want %s)", r.Fault, strings.Join(faultNames, ", "))
			}
		default:
			bad(at+"respond", "unknown behaviour %q (want %s)", r.Kind, strings.Join(respondNames, ", "))
		}
		ra := p.RetryAfter
		if !oneOf(ra.Form, formNames) {
			bad(at+"retry_after.form", "unknown form %q (want %s)", ra.Form, strings.Join(formNames, ", "))
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

// quotaPer is the quota's window, defaulting to one second.
func quotaPer(q *Quota) time.Duration {
	if q.Per <= 0 {
		return time.Second
	}
	return q.Per
}
