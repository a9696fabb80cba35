package thirdparty

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/subjects"
)

// backoffSubject is cenkalti/backoff/v5 at its defaults: backoff.Retry
// with no options around one http.Client call, the user code following the
// library's own HTTP example: a 429 with delay-seconds Retry-After returns
// backoff.RetryAfter(seconds) (so a negative value means no wait, and an
// HTTP-date or a 503's Retry-After is not read), a 429/5xx or transport
// error is retried, anything else ends the call. Defaults: exponential
// backoff from 500ms, ×1.5 per retry, randomized ±50%, each interval
// capped at 60s, no attempt cap, and a 15-minute MaxElapsedTime budget.
// Its jitter draws from the global math/rand/v2: runs cannot be replayed.
type backoffSubject struct{}

func init() { subjects.Register(backoffSubject{}) }

func (backoffSubject) Name() string { return "backoff" }

// Describe states an envelope of the library's waits in the analyzer's
// terms: wait n ≤ 750ms·1.5^(n-1) ≤ 750ms·2^(n-1), each ≤ 90s.
func (backoffSubject) Describe(p subjects.Params) subjects.Info {
	return subjects.Info{
		Version: moduleVersion("github.com/cenkalti/backoff/v5", "v5.0.3"),
		Stated: &subjects.Stated{Base: 750 * time.Millisecond, Cap: 90 * time.Second, Budget: backoff.DefaultMaxElapsedTime,
			Jitter: "randomized ±50%, ×1.5", Retryable: []int{429, 500, 502, 503, 504}},
		Summary: withTimeout("backoff.Retry defaults; RetryAfter on 429 delay-seconds, as the library's example", p),
	}
}

func (backoffSubject) New(next http.RoundTripper, p subjects.Params) subjects.Caller {
	hc := userCall(next, p)
	return func(ctx context.Context, req *http.Request) (*http.Response, error) {
		body, err := readBody(req)
		if err != nil {
			return nil, err
		}
		ctx, c := subjects.WithCounter(ctx)
		resp, err := backoff.Retry(ctx, func() (*http.Response, error) {
			resp, err := hc.Do(attemptOf(ctx, req, body))
			if err != nil {
				return nil, err
			}
			if !subjects.RetryableStatus(resp.StatusCode) {
				return resp, nil
			}
			client.Drain(resp)
			if resp.StatusCode == http.StatusTooManyRequests {
				if s, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64); err == nil {
					return nil, backoff.RetryAfter(int(s))
				}
			}
			return nil, statusError{resp.StatusCode}
		})
		c.Finish(resp)
		if err != nil {
			e := subjects.Failure(ctx, c, err).(*subjects.Error)
			if e.Result == subjects.ResultGaveUp && !errors.Is(err, context.Canceled) {
				e.Result = subjects.ResultBudget // with no attempt cap, only MaxElapsedTime stops it
			}
			return nil, e
		}
		return resp, nil
	}
}
