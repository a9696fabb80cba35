package thirdparty

import (
	"context"
	"net/http"
	"regexp"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/timeout"

	"github.com/retrylab/retrylab/subjects"
)

// failsafeSubject is failsafe-go at its defaults:
// failsafehttp.NewRoundTripper(harness, failsafehttp.NewRetryPolicyBuilder().Build()).
// Defaults: 3 attempts (2 retries), no delay between them unless a 429 or
// 503 carries a delay-seconds Retry-After (HTTP-dates are not read),
// retries 429, 5xx but 501, and transport errors, no jitter, no budget.
// It draws no random numbers, so runs replay. failsafehttp never closes
// the bodies of the responses it retries; the adapter closes them when the
// call returns (a user's connections would leak). A call that gives up
// returns an error wrapping retrypolicy.ExceededError, not the response.
type failsafeSubject struct{}

func init() { subjects.Register(failsafeSubject{}) }

func (failsafeSubject) Name() string { return "failsafe" }

func (failsafeSubject) Describe(p subjects.Params) subjects.Info {
	return subjects.Info{
		Version:    moduleVersion("github.com/failsafe-go/failsafe-go", "v0.9.8"),
		Stated:     &subjects.Stated{MaxAttempts: 3, Jitter: "none", Retryable: []int{429, 500, 502, 503, 504}},
		Summary:    withTimeout("failsafehttp.NewRoundTripper with NewRetryPolicyBuilder().Build() defaults", p),
		Replayable: true,
	}
}

func (failsafeSubject) New(next http.RoundTripper, p subjects.Params) subjects.Caller {
	policies := []failsafe.Policy[*http.Response]{failsafehttp.NewRetryPolicyBuilder().Build()}
	if d := attemptTimeout(p); d > 0 {
		policies = append(policies, timeout.New[*http.Response](d)) // inside the retries: per attempt
	}
	rt := failsafehttp.NewRoundTripper(subjects.Counting(next), policies...)
	return func(ctx context.Context, req *http.Request) (*http.Response, error) {
		ctx, c := subjects.WithCounter(ctx)
		resp, err := rt.RoundTrip(req.WithContext(ctx))
		if err != nil {
			resp = nil
		}
		c.Finish(resp)
		if err != nil {
			return nil, subjects.Failure(ctx, c, stableError{err})
		}
		return resp, nil
	}
}

// stableError is a failsafe-go error with the addresses its text holds
// (retrypolicy.ExceededError prints the last response with %v, pointers
// included) replaced by "0x…", so that the outcome's error, recorded in
// the timeline, is the same in every run of a seed.
type stableError struct{ err error }

var pointer = regexp.MustCompile(`0x[0-9a-f]+`)

func (e stableError) Error() string { return pointer.ReplaceAllString(e.err.Error(), "0x…") }
func (e stableError) Unwrap() error { return e.err }
