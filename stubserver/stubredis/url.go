package stubredis

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"
)

// ParseURL reads a quota's Backend,
// redis://[USER:PASSWORD@]HOST[:PORT][/DB][?OPTION=VALUE&...] (rediss://
// for TLS), into the go-redis options of a client for it and the Options
// of its Limiters. The options are go-redis's (dial_timeout, read_timeout,
// pool_size, ...: see redis.ParseURL) and this package's timeout, a Go
// duration above 0 (Options.Timeout; default DefaultTimeout). The client
// options have ContextTimeoutEnabled set, so that go-redis heeds the
// Timeout itself, and DialerRetries 1, so that a Redis that refuses
// connections fails a call at once; without max_retries in the URL,
// MaxRetries is -1: no call is retried (a retried script may charge
// twice). An error names the URL with its
// password redacted.
func ParseURL(raw string) (*redis.Options, Options, error) {
	var o Options
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // ue.Error() would repeat the URL, password and all
		}
		return nil, o, fmt.Errorf("stubredis: the backend is not a URL: %w", err)
	}
	shown := u.Redacted()
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, o, fmt.Errorf("stubredis: backend %s: want a redis:// or rediss:// URL", shown)
	}
	if u.Opaque != "" {
		return nil, o, fmt.Errorf("stubredis: backend %s: want redis://HOST:PORT/DB", shown)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, o, fmt.Errorf("stubredis: backend %s: query: %w", shown, err)
	}
	if ts, ok := q["timeout"]; ok {
		if len(ts) != 1 {
			return nil, o, fmt.Errorf("stubredis: backend %s: timeout given %d times", shown, len(ts))
		}
		d, err := time.ParseDuration(ts[0])
		if err != nil || d <= 0 {
			return nil, o, fmt.Errorf("stubredis: backend %s: timeout=%q: want a duration above 0 (e.g. 50ms)", shown, ts[0])
		}
		o.Timeout = d
		q.Del("timeout")
		u.RawQuery = q.Encode()
	}
	ro, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, o, fmt.Errorf("stubredis: backend %s: %w", shown, err)
	}
	ro.ContextTimeoutEnabled = true
	if !q.Has("max_retries") {
		// No retry: within a Timeout of milliseconds go-redis's backoff
		// (8-512 ms) mostly waits, and a script retried after Redis ran
		// it would charge twice.
		ro.MaxRetries = -1
	}
	// One dial per attempt, not go-redis's five 100 ms apart: a Redis that
	// refuses connections fails the call at once rather than at the
	// Timeout.
	ro.DialerRetries = 1
	return ro, o, nil
}
