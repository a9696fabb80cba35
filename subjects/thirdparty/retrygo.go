package thirdparty

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/avast/retry-go/v4"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/subjects"
)

// retryGoSubject is avast/retry-go v4 at its defaults: retry.Do with only
// retry.Context(ctx), around one http.Client call whose user code retries
// transport errors and 429/500/502/503/504. Defaults: 10 attempts, wait n
// = 100ms·2^(n-1) plus a random 0-100ms, no cap, no budget, Retry-After
// never read. Its jitter draws from the global math/rand: runs cannot be
// replayed.
type retryGoSubject struct{}

func init() { subjects.Register(retryGoSubject{}) }

func (retryGoSubject) Name() string { return "retry-go" }

// Describe states an envelope of the waits in the analyzer's terms: wait
// n < 100ms·2^(n-1) + 100ms ≤ 200ms·2^(n-1).
func (retryGoSubject) Describe(p subjects.Params) subjects.Info {
	return subjects.Info{
		Version: moduleVersion("github.com/avast/retry-go/v4", "v4.7.0"),
		Stated: &subjects.Stated{Base: 200 * time.Millisecond, MaxAttempts: 10, Jitter: "exponential + 0-100ms",
			Retryable: []int{429, 500, 502, 503, 504}},
		Summary: withTimeout("retry.Do defaults with retry.Context", p),
	}
}

func (retryGoSubject) New(next http.RoundTripper, p subjects.Params) subjects.Caller {
	hc := userCall(next, p)
	return func(ctx context.Context, req *http.Request) (*http.Response, error) {
		body, err := readBody(req)
		if err != nil {
			return nil, err
		}
		ctx, c := subjects.WithCounter(ctx)
		var final *http.Response
		err = retry.Do(func() error {
			resp, err := hc.Do(attemptOf(ctx, req, body))
			if err != nil {
				return err
			}
			if subjects.RetryableStatus(resp.StatusCode) {
				client.Drain(resp)
				return statusError{resp.StatusCode}
			}
			final = resp
			return nil
		}, retry.Context(ctx))
		c.Finish(final)
		if err != nil {
			return nil, subjects.Failure(ctx, c, err)
		}
		return final, nil
	}
}

var errNoResponse = errors.New("subjects: library returned neither a response nor an error")
