package thirdparty

import (
	"context"
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/retrylab/retrylab/subjects"
)

// retryablehttp is hashicorp/go-retryablehttp at its defaults:
// retryablehttp.NewClient() with HTTPClient's transport set to the
// harness's and Logger nil (its default logger writes to stderr). Defaults:
// 5 attempts (RetryMax 4), waits 1s·2^(n-1) capped at 30s without jitter,
// Retry-After (delay-seconds or date) obeyed on 429 and 503 without a cap,
// retries 429, 5xx but 501, and transport errors, no time budget. It draws
// no random numbers, so runs replay. A call that gives up returns an
// error, not the response, and calls CloseIdleConnections on its
// http.Client; the adapter's transport wrapper does not pass that on, so
// one client giving up does not drop the whole fleet's idle connections.
type retryablehttpSubject struct{}

func init() { subjects.Register(retryablehttpSubject{}) }

func (retryablehttpSubject) Name() string { return "retryablehttp" }

func (retryablehttpSubject) Describe(p subjects.Params) subjects.Info {
	return subjects.Info{
		Version: moduleVersion("github.com/hashicorp/go-retryablehttp", "v0.7.8"),
		Stated: &subjects.Stated{Base: time.Second, Cap: 30 * time.Second, MaxAttempts: 5, Jitter: "none",
			Retryable: []int{429, 500, 502, 503, 504}},
		Summary:    withTimeout("retryablehttp.NewClient() defaults, Logger nil", p),
		Replayable: true,
	}
}

func (retryablehttpSubject) New(next http.RoundTripper, p subjects.Params) subjects.Caller {
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: subjects.Counting(next), Timeout: attemptTimeout(p)}
	rc.Logger = nil
	return func(ctx context.Context, req *http.Request) (*http.Response, error) {
		ctx, c := subjects.WithCounter(ctx)
		rreq, err := retryablehttp.FromRequest(req.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		resp, err := rc.Do(rreq)
		c.Finish(resp)
		if err != nil {
			return nil, subjects.Failure(ctx, c, err)
		}
		return resp, nil
	}
}
