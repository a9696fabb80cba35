package client

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

var raNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	const maxDur = time.Duration(math.MaxInt64)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		// delay-seconds
		{"0", 0, true},
		{"1", time.Second, true},
		{"120", 2 * time.Minute, true},
		{"007", 7 * time.Second, true},
		{" 5\t", 5 * time.Second, true},
		{"9223372036", 9223372036 * time.Second, true},
		{"9223372037", maxDur, true},                       // just over: clamped
		{"99999999999999999999999999999999", maxDur, true}, // would wrap int64
		// IMF-fixdate
		{"Mon, 30 Nov 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Mon, 30 Nov 2026 12:00:00 GMT", 0, true},
		{"Mon, 30 Nov 2026 13:00:00 GMT", time.Hour, true},
		// obsolete RFC 850
		{"Monday, 30-Nov-26 12:01:00 GMT", time.Minute, true},
		// obsolete asctime, with the day space-padded
		{"Mon Nov 30 12:00:10 2026", 10 * time.Second, true},
		{"Tue Dec  1 12:00:00 2026", 24 * time.Hour, true},
		// past dates clamp at zero
		{"Sun, 29 Nov 2026 12:00:00 GMT", 0, true},
		{"Thu, 01 Jan 1970 00:00:00 GMT", 0, true},
		{"Sunday, 06-Nov-94 08:49:37 GMT", 0, true},
		{"Sun Nov  6 08:49:37 1994", 0, true},
		// far future dates saturate instead of overflowing
		{"Fri, 31 Dec 9999 23:59:59 GMT", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Sub(raNow), true},
		// malformed
		{"", 0, false},
		{"   ", 0, false},
		{"-1", 0, false},
		{"-0", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"0.0", 0, false},
		{"1e3", 0, false},
		{"5s", 0, false},
		{"0x10", 0, false},
		{"1 2", 0, false},
		{"soon", 0, false},
		{"garbage!", 0, false},
		{"١٢", 0, false}, // non-ASCII digits
		{"Mon, 30 Nov 2026 12:00:30 PST", 0, false},
		{"Monday, 30-Nov-26 12:01:00 PST", 0, false},
		{"Mon, 30 Nov 2026 12:00:30", 0, false},
		{"2026-11-30T12:00:30Z", 0, false},
		{"Mon, 31 Nov 2026 12:00:30 GMT", 0, false},
		{"Mon, 30 Nov 2026 25:00:30 GMT", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.in, raNow)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "-1", "1.5", "", "Mon, 30 Nov 2026 12:00:30 GMT",
		"Monday, 30-Nov-26 12:01:00 GMT", "Mon Nov 30 12:00:10 2026", "99999999999999999999", "garbage"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseRetryAfter(s, raNow)
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; want a wait >= 0", s, d, ok)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false; want 0 when not ok", s, d)
		}
		v := strings.Trim(s, " \t")
		if isDigits(v) && !ok {
			t.Fatalf("ParseRetryAfter(%q) not ok; want every delay-seconds accepted", s)
		}
		if ok && !isDigits(v) {
			if _, err := http.ParseTime(v); err != nil {
				t.Fatalf("ParseRetryAfter(%q) ok; want only delay-seconds and HTTP-dates accepted", s)
			}
		}
	})
}

func TestParseRateLimit(t *testing.T) {
	epoch := func(d time.Duration) string { return strconv.FormatInt(raNow.Add(d).Unix(), 10) }
	tests := []struct {
		name string
		h    map[string]string
		want RateLimit
		ok   bool
	}{
		{"none", nil, RateLimit{}, false},
		{"ietf", map[string]string{"RateLimit": `"default";r=5;t=30`, "RateLimit-Policy": `"default";q=100;w=60`},
			RateLimit{Limit: 100, Remaining: 5, Reset: 30 * time.Second}, true},
		{"ietf token name, no policy", map[string]string{"RateLimit": `burst;r=0;t=2`},
			RateLimit{Remaining: 0, Reset: 2 * time.Second}, true},
		{"ietf other policy", map[string]string{"RateLimit": `"a";r=5;t=30`, "RateLimit-Policy": `"b";q=100;w=60`},
			RateLimit{Remaining: 5, Reset: 30 * time.Second}, true},
		{"ietf first of two", map[string]string{"RateLimit": `"a";r=5;t=30, "b";r=1;t=1`, "RateLimit-Policy": `"b";q=9, "a";q=50`},
			RateLimit{Limit: 50, Remaining: 5, Reset: 30 * time.Second}, true},
		{"ietf no remaining", map[string]string{"RateLimit": `"a";t=30`}, RateLimit{}, false},
		{"ietf negative", map[string]string{"RateLimit": `"a";r=-5;t=30`}, RateLimit{}, false},
		{"ietf bad param", map[string]string{"RateLimit": `"a";r`}, RateLimit{}, false},
		{"old draft", map[string]string{"RateLimit": "limit=100, remaining=7, reset=12"},
			RateLimit{Limit: 100, Remaining: 7, Reset: 12 * time.Second}, true},
		{"old draft garbage", map[string]string{"RateLimit": "limit=100, remaining=x"}, RateLimit{}, false},
		{"triple", map[string]string{"RateLimit-Limit": "60", "RateLimit-Remaining": "3", "RateLimit-Reset": "20"},
			RateLimit{Limit: 60, Remaining: 3, Reset: 20 * time.Second}, true},
		{"x epoch", map[string]string{"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "12", "X-RateLimit-Reset": epoch(90 * time.Second)},
			RateLimit{Limit: 5000, Remaining: 12, Reset: 90 * time.Second}, true},
		{"x epoch past", map[string]string{"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": epoch(-time.Hour)},
			RateLimit{Limit: 5000, Remaining: 0, Reset: 0}, true},
		{"x delta", map[string]string{"X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "15"},
			RateLimit{Remaining: 1, Reset: 15 * time.Second}, true},
		{"x fractional", map[string]string{"X-RateLimit-Remaining": "1.5"}, RateLimit{}, false},
		{"x bad limit", map[string]string{"X-RateLimit-Remaining": "1", "X-RateLimit-Limit": "many"}, RateLimit{}, false},
		{"x bad reset", map[string]string{"X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "-3"}, RateLimit{}, false},
		{"x huge", map[string]string{"X-RateLimit-Remaining": "99999999999999999999999"}, RateLimit{}, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.h {
			h.Set(k, v)
		}
		got, ok := ParseRateLimit(h, raNow)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: ParseRateLimit(%v) = %+v, %v; want %+v, %v", tt.name, tt.h, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParseRateLimit(f *testing.F) {
	f.Add(`"default";r=5;t=30`, `"default";q=100;w=60`, "", "", "")
	f.Add("limit=100, remaining=7, reset=12", "", "", "", "")
	f.Add("", "", "5000", "12", "1780000000")
	f.Add("", "", "5000", "-1", "x")
	f.Fuzz(func(t *testing.T, ietf, policy, xlimit, xremaining, xreset string) {
		h := http.Header{}
		if ietf != "" {
			h.Set("RateLimit", ietf)
			h.Set("RateLimit-Policy", policy)
		}
		if xremaining != "" {
			h.Set("X-RateLimit-Limit", xlimit)
			h.Set("X-RateLimit-Remaining", xremaining)
			h.Set("X-RateLimit-Reset", xreset)
		}
		rl, ok := ParseRateLimit(h, raNow)
		if !ok && rl != (RateLimit{}) {
			t.Fatalf("ParseRateLimit = %+v, false; want the zero RateLimit when not ok", rl)
		}
		if rl.Limit < 0 || rl.Remaining < 0 || rl.Reset < 0 {
			t.Fatalf("ParseRateLimit = %+v; want no negative field", rl)
		}
	})
}
