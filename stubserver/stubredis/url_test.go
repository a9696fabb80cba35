package stubredis

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

var urlCases = []struct {
	url     string
	addr    string
	db      int
	timeout time.Duration
	tls     bool
	err     string // "" when it parses
}{
	{url: "redis://127.0.0.1:6379/0", addr: "127.0.0.1:6379"},
	{url: "redis://127.0.0.1/3", addr: "127.0.0.1:6379", db: 3},
	{url: "redis://localhost:7000?timeout=20ms&pool_size=5", addr: "localhost:7000", timeout: 20 * time.Millisecond},
	{url: "rediss://user:secret@cache.internal:6380/2?timeout=1s", addr: "cache.internal:6380", db: 2, timeout: time.Second, tls: true},
	{url: "redis://:secret@h/0?timeout=abc", err: `timeout="abc": want a duration above 0`},
	{url: "redis://:secret@h/0?timeout=0s", err: `timeout="0s": want a duration above 0`},
	{url: "redis://:secret@h/0?timeout=-1s", err: `want a duration above 0`},
	{url: "redis://h/0?timeout=1s&timeout=2s", err: "timeout given 2 times"},
	{url: "redis://u:secret@h/0?bogus=1", err: "unexpected option: bogus"},
	{url: "redis://u:secret@h/x", err: "invalid database number"},
	{url: "unix:///tmp/redis.sock", err: "want a redis:// or rediss:// URL"},
	{url: "memory", err: "want a redis:// or rediss:// URL"},
	{url: "redis:h", err: "want redis://HOST:PORT/DB"},
	{url: "redis://u:secret@h:port/0", err: "not a URL"},
	{url: "redis://h/0?a=%zz", err: "query"},
}

// TestParseURL: a backend URL gives the client's address, database, TLS
// and this package's timeout; a bad one is an error that names what is
// wrong and never shows the password.
func TestParseURL(t *testing.T) {
	for _, tt := range urlCases {
		ro, o, err := ParseURL(tt.url)
		if tt.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), "stubredis: ") || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseURL(%q) = %v; want a stubredis error with %q", tt.url, err, tt.err)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("ParseURL(%q): error %q shows the password", tt.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseURL(%q) = %v", tt.url, err)
			continue
		}
		if ro.Addr != tt.addr || ro.DB != tt.db || o.Timeout != tt.timeout || (ro.TLSConfig != nil) != tt.tls || !ro.ContextTimeoutEnabled {
			t.Errorf("ParseURL(%q) = addr %q db %d timeout %v TLS %v ContextTimeoutEnabled %v; want %q %d %v %v true",
				tt.url, ro.Addr, ro.DB, o.Timeout, ro.TLSConfig != nil, ro.ContextTimeoutEnabled, tt.addr, tt.db, tt.timeout, tt.tls)
		}
	}
	if ro, _, err := ParseURL("redis://u:p%40ss@h:1/0?timeout=5ms"); err != nil || ro.Username != "u" || ro.Password != "p@ss" {
		t.Errorf("credentials: %+v, %v; want user u, password p@ss", ro, err)
	}
	if ro, _, err := ParseURL("redis://h/0"); err != nil || ro.MaxRetries != -1 || ro.DialerRetries != 1 {
		t.Errorf("retries: %+v, %v; want MaxRetries -1 (none), DialerRetries 1", ro, err)
	}
	if ro, _, err := ParseURL("redis://h/0?max_retries=2"); err != nil || ro.MaxRetries != 2 {
		t.Errorf("max_retries=2: %+v, %v; want MaxRetries 2", ro, err)
	}
}

// FuzzParseURL: ParseURL never panics; what it accepts is a redis:// or
// rediss:// URL with an address and a timeout not below 0, on a client
// that heeds contexts; what it refuses is a stubredis error that does not
// repeat the URL's password.
func FuzzParseURL(f *testing.F) {
	for _, tt := range urlCases {
		f.Add(tt.url)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		ro, o, err := ParseURL(raw)
		u, uerr := url.Parse(raw)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "stubredis: ") {
				t.Errorf("ParseURL(%q) = %v; want a stubredis error", raw, err)
			}
			if uerr == nil && u.User != nil {
				if p, ok := u.User.Password(); ok && len(p) >= 4 && strings.Count(raw, p) == 1 && strings.Contains(err.Error(), p) {
					t.Errorf("ParseURL(%q): error %q shows the password %q", raw, err, p)
				}
			}
			return
		}
		if uerr != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			t.Errorf("ParseURL(%q) accepted a URL whose scheme is not redis(s) (url.Parse: %v)", raw, uerr)
		}
		if ro.Addr == "" || o.Timeout < 0 || !ro.ContextTimeoutEnabled {
			t.Errorf("ParseURL(%q) = addr %q, timeout %v, ContextTimeoutEnabled %v", raw, ro.Addr, o.Timeout, ro.ContextTimeoutEnabled)
		}
	})
}
