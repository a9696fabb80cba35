package stubserver

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// Upstream transport bounds: how long the stub waits to connect to its
// upstream and for the upstream's response header before it answers 502.
const (
	UpstreamDialTimeout   = 5 * time.Second
	UpstreamHeaderTimeout = 60 * time.Second
)

// ParseUpstream checks an upstream base URL (Config.Upstream): absolute,
// http or https, with a host, and no user info (credentials belong in the
// application's requests, not in a URL that is printed and recorded),
// query or fragment.
func ParseUpstream(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("stubserver: upstream: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("stubserver: upstream: %q is not an http or https URL (want e.g. http://127.0.0.1:9000)", raw)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("stubserver: upstream: %q has no host", raw)
	case u.User != nil:
		return nil, fmt.Errorf("stubserver: upstream: %q carries user info; put credentials in the application's requests", u.Redacted())
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("stubserver: upstream: %q has a query or fragment; want a base URL", raw)
	}
	return u, nil
}

// proxy forwards requests to the upstream with a ReverseProxy: the
// outbound URL is the upstream's base joined with the request's path, the
// Host header the upstream's, X-Forwarded-For/-Host/-Proto set;
// hop-by-hop headers are dropped by the ReverseProxy. Request bodies
// stream through unread (and unbounded by MaxBodyBytes). Responses of
// unknown length and event streams are flushed as they come (the
// ReverseProxy's rule); others are copied as they are read.
type proxy struct {
	rp *httputil.ReverseProxy
	tr *http.Transport
}

func newProxy(target *url.URL, dial func(ctx context.Context, network, addr string) (net.Conn, error), log func(msg string, args ...any)) *proxy {
	if dial == nil {
		dial = (&net.Dialer{Timeout: UpstreamDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	tr := &http.Transport{
		Proxy:                 nil, // the stub talks to the upstream itself, never through HTTP_PROXY
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: UpstreamHeaderTimeout,
		ExpectContinueTimeout: time.Second,
	}
	p := &proxy{tr: tr}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target) // also sets the outbound Host to the upstream's
			pr.SetXForwarded()
		},
		Transport: tr,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			pw := w.(*proxyWriter)
			if r.Context().Err() != nil {
				// The client went away while the upstream worked: it got
				// nothing, as for a client that leaves during the latency.
				pw.abandoned()
				return
			}
			log("stubserver: upstream failed", "method", r.Method, "path", pw.a.Path, "err", err)
			pw.failed()
		},
	}
	return p
}

// proxyWriter records the attempt when the upstream's response header is
// relayed (before it leaves, as for the stub's own answers), or when the
// upstream fails.
type proxyWriter struct {
	http.ResponseWriter
	s        *Server
	a        *timeline.Attempt
	pi       int
	recorded bool
}

// Unwrap lets http.ResponseController (the ReverseProxy's flushes) reach
// the connection.
func (pw *proxyWriter) Unwrap() http.ResponseWriter { return pw.ResponseWriter }

func (pw *proxyWriter) WriteHeader(code int) {
	// 1xx informational answers (103 Early Hints) pass through unrecorded;
	// the final status is recorded.
	if !pw.recorded && (code >= 200 || code == http.StatusSwitchingProtocols) {
		pw.record(code, timeline.UpstreamRelayed)
	}
	pw.ResponseWriter.WriteHeader(code)
}

func (pw *proxyWriter) Write(b []byte) (int, error) {
	if !pw.recorded {
		pw.record(http.StatusOK, timeline.UpstreamRelayed)
	}
	return pw.ResponseWriter.Write(b)
}

func (pw *proxyWriter) record(status int, src string) {
	pw.recorded = true
	a := pw.a
	a.Status, a.Upstream = status, src
	a.Done = int64(time.Since(pw.s.start))
	if src == timeline.UpstreamRelayed {
		pw.s.upstreamHeaders(a, pw.ResponseWriter.Header())
	}
	pw.s.count(pw.pi, status)
	pw.s.recordAttempt(a)
}

// upstreamHeaders records what the upstream's answer h (relayed at
// a.Done) says of when to come back, as the stub's own answers
// are recorded: the raw Retry-After and its not_before (see
// upstreamNotBefore), and, unless the stub's quota already recorded its
// own, the upstream's rate-limit headers (upstreamRateLimit).
func (s *Server) upstreamHeaders(a *timeline.Attempt, h http.Header) {
	if v := header(h, "Retry-After"); v != "" {
		a.RetryAfter = capID(v)
		a.NotBefore, a.HasNotBefore = s.upstreamNotBefore(v, a.Done)
	}
	if a.RateLimit == "" {
		a.RateLimit = upstreamRateLimit(h)
	}
}

// upstreamNotBefore is the not_before of an upstream's Retry-After v,
// relayed at run instant doneRun, by the rules of the stub's own
// values: delay-seconds (digits only) from the response; an HTTP-date
// (http.ParseTime: IMF-fixdate, RFC 850, asctime) as run time, whole
// seconds as sent, and a date already past as the response instant (an
// immediate retry is allowed, as for the stub's past-date). Anything else
// — negative, fractional, garbage, or a delay too long to represent — is
// unusable: ok is false.
func (s *Server) upstreamNotBefore(v string, doneRun int64) (notBefore int64, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if digits(v) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > (math.MaxInt64-doneRun)/int64(time.Second) {
			return 0, false
		}
		return doneRun + n*int64(time.Second), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(int64(t.Sub(s.startWall)), doneRun), true
}

// digits reports whether v is 1*DIGIT.
func digits(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return v != ""
}

// upstreamRateLimitHeaders are the rate-limit headers recorded from an
// upstream's answer, in this order, under these names: the IETF draft's
// (both forms), GitHub's and the other common X- families.
var upstreamRateLimitHeaders = []string{
	"RateLimit-Policy", "RateLimit",
	"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Used", "X-RateLimit-Resource",
	"X-Rate-Limit-Limit", "X-Rate-Limit-Remaining", "X-Rate-Limit-Reset",
}

// upstreamRateLimitKeys are their canonical forms, the header map's keys.
var upstreamRateLimitKeys = func() []string {
	ks := make([]string, len(upstreamRateLimitHeaders))
	for i, n := range upstreamRateLimitHeaders {
		ks[i] = http.CanonicalHeaderKey(n)
	}
	return ks
}()

// upstreamRateLimit is the record of the rate-limit headers in h, in the
// format of Attempt.RateLimit ("Name: value" joined by "; "; several
// values of one header joined by ", "), each value cut to MaxIDBytes; ""
// when there are none.
func upstreamRateLimit(h http.Header) string {
	var b strings.Builder
	for i, name := range upstreamRateLimitHeaders {
		vs := h[upstreamRateLimitKeys[i]]
		if len(vs) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(name)
		b.WriteString(": ")
		b.WriteString(capID(strings.Join(vs, ", ")))
	}
	return b.String()
}

// failed answers 502 for an upstream that gave no response, recorded as
// timeline.UpstreamFailed.
func (pw *proxyWriter) failed() {
	if pw.recorded {
		return // the header went out: the ReverseProxy aborts the body
	}
	pw.record(http.StatusBadGateway, timeline.UpstreamFailed)
	h := pw.ResponseWriter.Header()
	clear(h)
	h["Content-Type"] = contentTypeText
	pw.ResponseWriter.WriteHeader(http.StatusBadGateway)
	pw.ResponseWriter.Write(statusBodies[http.StatusBadGateway])
}

// abandoned records a client that left before the upstream answered.
func (pw *proxyWriter) abandoned() {
	if pw.recorded {
		return
	}
	// Nothing was decided: no status, and no upstream failure either.
	pw.recorded = true
	pw.s.fault(pw.ResponseWriter, pw.a, pw.pi, timeline.FaultAbandoned, false)
}

// forward hands r to the upstream and records a from its answer.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, a *timeline.Attempt, pi int) {
	pw := &proxyWriter{ResponseWriter: w, s: s, a: a, pi: pi}
	// An upstream that breaks off its body after the header was relayed
	// makes the ReverseProxy abort the handler (http.ErrAbortHandler): the
	// client gets a cut response, and the record keeps the status.
	s.proxy.rp.ServeHTTP(pw, r)
	if !pw.recorded {
		pw.record(http.StatusOK, timeline.UpstreamRelayed) // an empty 200 with no write
	}
}

// closeIdle drops the idle upstream connections (Shutdown and Close).
func (p *proxy) closeIdle() {
	if p != nil {
		p.tr.CloseIdleConnections()
	}
}
