package subjects

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/retrylab/retrylab/client"
)

// retrylabSubject is the project's own client package: client.New over the
// harness transport, configured from Params.Policy (zero fields: the
// client's defaults) with Params.Rand as its jitter source, so runs replay.
// AddIdempotencyKey is on, so POSTs are retried safely.
type retrylabSubject struct{}

func init() { register(retrylabSubject{}) }

func (retrylabSubject) Name() string { return "retrylab" }

// clientConfig maps a Policy onto the client's Config. An unknown jitter
// name means the default (Policy.Validate rejects it earlier).
func clientConfig(p Params) client.Config {
	j, _ := client.ParseJitter(p.Policy.Jitter)
	return client.Config{
		Base:              p.Policy.Base,
		Cap:               p.Policy.Cap,
		Jitter:            j,
		MaxAttempts:       p.Policy.MaxAttempts,
		Budget:            p.Policy.Budget,
		AttemptTimeout:    p.Policy.Timeout,
		Rate:              p.Policy.Rate,
		Burst:             p.Policy.Burst,
		AddIdempotencyKey: true,
		Rand:              p.Rand,
	}
}

func (retrylabSubject) Describe(p Params) Info {
	cfg := clientConfig(p)
	cfg.Rand = nil
	e := cfg.Effective()
	return Info{
		Version: "(devel)",
		Stated: &Stated{Base: e.Base, Cap: e.Cap, MaxAttempts: e.MaxAttempts, Budget: e.Budget,
			Jitter: e.Jitter.String(), Retryable: e.Retryable},
		Summary: fmt.Sprintf("client.New: %s jitter, base %v, cap %v, %d attempts, budget %v, Idempotency-Key added",
			e.Jitter, e.Base, e.Cap, e.MaxAttempts, e.Budget),
		Replayable: true,
	}
}

func (retrylabSubject) New(next http.RoundTripper, p Params) Caller {
	t := client.New(counting{next}, clientConfig(p))
	return func(ctx context.Context, req *http.Request) (*http.Response, error) {
		ctx, c := WithCounter(ctx)
		resp, err := t.RoundTrip(req.WithContext(ctx))
		c.Finish(resp)
		return resp, err
	}
}

// classifyClient maps the client package's *RetryError; see Classify.
func classifyClient(err error) (result string, status, attempts int, ok bool) {
	var re *client.RetryError
	if !errors.As(err, &re) {
		return "", 0, 0, false
	}
	switch {
	case errors.Is(re.Reason, client.ErrBudgetExhausted):
		result = ResultBudget
	case errors.Is(re.Reason, client.ErrAttemptsExhausted):
		result = ResultGaveUp
	default:
		result = ResultError // the caller's context ended, or an error not worth retrying
	}
	return result, re.Status, re.Attempts, true
}
