package thirdparty

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/retrylab/retrylab/subjects"
)

// restySubject is go-resty/resty v2 as a user enabling retries wires it:
// resty.New() with the harness transport, SetRetryCount(3) (retries are
// off by default) and one retry condition for transport errors and
// 429/500/502/503/504 (by default resty retries transport errors only),
// its logger silenced. Defaults otherwise: 4 attempts, waits drawn in
// [w/2, w) with w = min(2s, 100ms·2^(n-1)) and at least 100ms, Retry-After
// never read (no RetryAfter func), no budget. Its jitter draws from a
// package-global source seeded with the time: runs cannot be replayed.
// resty reads each response body into memory; the subjects.Caller returns the
// final response with that body.
type restySubject struct{}

func init() { subjects.Register(restySubject{}) }

func (restySubject) Name() string { return "resty" }

func (restySubject) Describe(p subjects.Params) subjects.Info {
	return subjects.Info{
		Version: moduleVersion("github.com/go-resty/resty/v2", "v2.17.2"),
		Stated: &subjects.Stated{Base: 100 * time.Millisecond, Cap: 2 * time.Second, MaxAttempts: 4, Jitter: "equal",
			Retryable: []int{429, 500, 502, 503, 504}},
		Summary: withTimeout("resty.New().SetRetryCount(3) + retry condition for errors and 429/5xx", p),
	}
}

type quietLogger struct{}

func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Warnf(string, ...any)  {}
func (quietLogger) Debugf(string, ...any) {}

func (restySubject) New(next http.RoundTripper, p subjects.Params) subjects.Caller {
	rc := resty.New().
		SetTransport(subjects.Counting(next)).
		SetLogger(quietLogger{}).
		SetRetryCount(3).
		SetTimeout(attemptTimeout(p)).
		AddRetryCondition(func(r *resty.Response, err error) bool {
			return err != nil || r != nil && subjects.RetryableStatus(r.StatusCode())
		})
	return func(ctx context.Context, req *http.Request) (*http.Response, error) {
		body, err := readBody(req)
		if err != nil {
			return nil, err
		}
		ctx, c := subjects.WithCounter(ctx)
		r := rc.R().SetContext(ctx).SetHeaderMultiValues(req.Header)
		if body != nil {
			r.SetBody(body)
		}
		resp, err := r.Execute(req.Method, req.URL.String())
		var out *http.Response
		if err == nil && resp != nil && resp.RawResponse != nil {
			out = resp.RawResponse
			out.Body = io.NopCloser(bytes.NewReader(resp.Body()))
		}
		c.Finish(out)
		if err != nil {
			return nil, subjects.Failure(ctx, c, err)
		}
		if out == nil {
			return nil, subjects.Failure(ctx, c, errNoResponse)
		}
		return out, nil
	}
}
