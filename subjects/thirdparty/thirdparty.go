package thirdparty

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/retrylab/retrylab/subjects"
)

// moduleVersion returns the version of module path linked into the binary,
// or fallback (the version go.mod pins) when build info is unavailable.
func moduleVersion(path, fallback string) string {
	versions := buildVersions()
	if v, ok := versions[path]; ok && v != "" {
		return v
	}
	return fallback
}

var buildVersions = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return m
	}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		m[d.Path] = d.Version
	}
	return m
})

// readBody reads and closes req's body so each attempt can resend it; nil
// for a request without one.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, fmt.Errorf("subjects: reading request body: %w", err)
	}
	return b, nil
}

// attemptOf returns a copy of req bound to ctx with a fresh body, as user
// code around a generic retry library builds each attempt: Body,
// GetBody and ContentLength all read body; nil gives a request without one.
func attemptOf(ctx context.Context, req *http.Request, body []byte) *http.Request {
	r := req.Clone(ctx)
	if body == nil {
		r.Body, r.GetBody, r.ContentLength = http.NoBody, nil, 0
		return r
	}
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.Body, _ = r.GetBody()
	r.ContentLength = int64(len(body))
	return r
}

// statusError is what the user code around a generic retry library
// (cenkalti/backoff, avast/retry-go, sethvargo/go-retry) returns to make
// the library retry a 429 or 5xx.
type statusError struct{ status int }

func (e statusError) Error() string { return fmt.Sprintf("unexpected status %d", e.status) }

// userCall is the shape of the adapters built on a generic retry library:
// each attempt is a plain http.Client call through the counting harness
// transport, with the application's per-attempt timeout (see
// attemptTimeout), and the user code around it decides: a transport error
// or a 429/500/502/503/504 is retried (the response drained and closed);
// any other response ends the call and is returned as is.
func userCall(next http.RoundTripper, p subjects.Params) *http.Client {
	return &http.Client{Transport: subjects.Counting(next), Timeout: attemptTimeout(p)}
}

// attemptTimeout is the per-attempt timeout the scenario gives the
// application (fleet.attempt_timeout; 0: none). It is not a retry
// setting but the application's own HTTP client timeout, which every
// library leaves to it, so the libraries, tested at their retry defaults,
// get it too, set where each one's documentation puts it: http.Client's
// Timeout for the clients that make one call per attempt (retryablehttp's
// HTTPClient, resty's SetTimeout, the http.Client of the user code around
// backoff, retry-go and go-retry), and failsafe-go's timeout policy inside
// its retry policy. Without it a client waits for the slowest response
// and never retries one: a server that is merely slow cannot make it
// storm, and metastable would judge nothing of its retries.
func attemptTimeout(p subjects.Params) time.Duration { return p.AttemptTimeout }

// withTimeout appends the per-attempt timeout to a summary, when there is one.
func withTimeout(summary string, p subjects.Params) string {
	if d := attemptTimeout(p); d > 0 {
		return summary + "; per-attempt timeout " + d.String()
	}
	return summary
}
