package thirdparty

import (
	"context"
	"net/http"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/subjects"
)

// goRetrySubject is sethvargo/go-retry as its README wires it: retry.Do
// with NewExponential(1s) — the library has no defaults, and its backoffs
// never stop by themselves — bounded by WithMaxRetries(4), around one
// http.Client call whose user code marks transport errors and
// 429/500/502/503/504 retryable. So: 5 attempts, waits 1s, 2s, 4s, 8s,
// no jitter, no cap, no budget, Retry-After never read. It draws no random
// numbers, so runs replay.
type goRetrySubject struct{}

func init() { subjects.Register(goRetrySubject{}) }

func (goRetrySubject) Name() string { return "go-retry" }

func (goRetrySubject) Describe(p subjects.Params) subjects.Info {
	return subjects.Info{
		Version: moduleVersion("github.com/sethvargo/go-retry", "v0.5.0"),
		Stated: &subjects.Stated{Base: time.Second, MaxAttempts: 5, Jitter: "none",
			Retryable: []int{429, 500, 502, 503, 504}},
		Summary:    withTimeout("retry.Do with WithMaxRetries(4, NewExponential(1s))", p),
		Replayable: true,
	}
}

func (goRetrySubject) New(next http.RoundTripper, p subjects.Params) subjects.Caller {
	hc := userCall(next, p)
	return func(ctx context.Context, req *http.Request) (*http.Response, error) {
		body, err := readBody(req)
		if err != nil {
			return nil, err
		}
		ctx, c := subjects.WithCounter(ctx)
		var final *http.Response
		b := retry.WithMaxRetries(4, retry.NewExponential(time.Second))
		err = retry.Do(ctx, b, func(ctx context.Context) error {
			resp, err := hc.Do(attemptOf(ctx, req, body))
			if err != nil {
				return retry.RetryableError(err)
			}
			if subjects.RetryableStatus(resp.StatusCode) {
				client.Drain(resp)
				return retry.RetryableError(statusError{resp.StatusCode})
			}
			final = resp
			return nil
		})
		c.Finish(final)
		if err != nil {
			return nil, subjects.Failure(ctx, c, err)
		}
		return final, nil
	}
}
