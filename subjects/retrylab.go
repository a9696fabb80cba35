package subjects

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/retrylab/retrylab/client"
)

// retrylabSubject is the project's own client package: client.New over the
// harness transport, configured from Params.Policy (zero fields: the
// client's defaults) with Params.Rand as its jitter source, so runs replay.
// AddIdempotencyKey is on, so POSTs are retried safely, and ClaimWaits,
// so each retry says the wait it meant (timeline.WaitHeader).
//
// Each simulated client gets a Transport of its own (New is called once
// per client), so it has its own retry budget (client.Config.RetryBudget,
// on by default): one simulated client stands for one process of the
// user's application, whose Transport all its calls share. The default
// budget (500 tokens, 5 a retry, 10 after a timeout) lets a client make
// 100 retries more than its calls' successes pay back before it refuses
// one; it never comes near that in the built-in scenarios but metastable,
// whose sustained overload it is there for.
type retrylabSubject struct {
	name string
}

func init() { register(retrylabSubject{name: "retrylab"}) }

func (s retrylabSubject) Name() string { return s.name }

// clientConfig maps a Policy onto the client's Config. An unknown jitter
// name means the default (Policy.Validate rejects it earlier).
func (s retrylabSubject) clientConfig(p Params) client.Config {
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
		ClaimWaits:        true,
		Rand:              p.Rand,
	}
}

func (s retrylabSubject) Describe(p Params) Info {
	cfg := s.clientConfig(p)
	cfg.Rand = nil
	e := cfg.Effective()
	rb := "no retry budget"
	if b := e.RetryBudget; !b.Off() {
		rb = fmt.Sprintf("retry budget %d (%d a retry, %d after a timeout)", b.Capacity, b.RetryCost, b.TimeoutCost)
	}
	summary := fmt.Sprintf("client.New: %s jitter, base %v, cap %v, %d attempts, budget %v, %s, Idempotency-Key added",
		e.Jitter, e.Base, e.Cap, e.MaxAttempts, e.Budget, rb)
	return Info{
		Version: "(devel)",
		Stated: &Stated{Base: e.Base, Cap: e.Cap, MaxAttempts: e.MaxAttempts, Budget: e.Budget,
			Jitter: e.Jitter.String(), Retryable: e.Retryable},
		Summary:    summary,
		Replayable: true,
	}
}

func (s retrylabSubject) New(next http.RoundTripper, p Params) Caller {
	return callerOf(client.New(counting{next}, s.clientConfig(p)))
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
	case errors.Is(re.Reason, client.ErrAttemptsExhausted), errors.Is(re.Reason, client.ErrRetryBudgetExhausted):
		result = ResultGaveUp
	default:
		result = ResultError // the caller's context ended, or an error not worth retrying
	}
	return result, re.Status, re.Attempts, true
}
