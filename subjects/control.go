package subjects

import (
	"context"
	"net/http"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientcontrol"
)

// controlNames lists the negative controls, in registration order.
var controlNames []string

// controlBase is what every negative control is built on: the reference
// client itself (the retrylab subject: client.New, configured from the
// Policy), retry budget included. Each control is controlBase with one
// mistake, made of the client's own parts (a Config field the client lets
// one set, or one clientcontrol.Variant field), so it keeps everything of
// the reference but its mistake and can differ from it only where it says.
// Only the controls whose mistake is a missing bound (no-retry-budget,
// unbounded) have no retry budget.
var controlBase = retrylabSubject{name: "retrylab"}

// control is a negative control: controlBase with one mistake.
type control struct {
	name    string
	mistake string // one line, for Info.Summary

	// config sets a mistake the client's Config can express (the
	// retryable set, the attempt cap, the time budget, the pacing rate) on
	// the configuration the control claims; nil: none.
	config func(cfg *client.Config)
	// variant returns a mistake only a clientcontrol.Variant can express,
	// given the effective configuration; nil: none.
	variant func(e client.Config) clientcontrol.Variant
	// attempts derives a zero MaxAttempts for a control whose backoff is
	// not the client's, so that its cap is as coherent with its budget as
	// the client's (nil: client.AttemptsFor); the mistake stays its
	// backoff.
	attempts func(e client.Config) int
}

func registerControl(c *control) {
	controlNames = append(controlNames, c.name)
	register(c)
}

func (c *control) Name() string { return c.name }

// claimed is the configuration the control claims: controlBase's, with
// the attempt cap its backoff needs.
func (c *control) claimed(p Params) client.Config {
	cfg := controlBase.clientConfig(p)
	if cfg.MaxAttempts <= 0 && c.attempts != nil {
		cfg.MaxAttempts = c.attempts(cfg.Effective())
	}
	return cfg
}

// Describe states the policy the control claims, the client's (which its
// mistake then breaks: a fixed delay claims the policy's jitter, retry-4xx
// the client's retryable set, unbounded the policy's bounds).
func (c *control) Describe(p Params) Info {
	cfg := c.claimed(p)
	cfg.Rand = nil
	e := cfg.Effective()
	return Info{
		Version: "(devel)",
		Stated: &Stated{Base: e.Base, Cap: e.Cap, MaxAttempts: e.MaxAttempts, Budget: e.Budget,
			Jitter: e.Jitter.String(), Retryable: e.Retryable},
		Summary:    "negative control: " + c.mistake,
		Replayable: true,
	}
}

// New returns the control's caller: clientcontrol.New over the harness
// transport, with the claimed configuration and the control's mistake.
func (c *control) New(next http.RoundTripper, p Params) Caller {
	cfg := c.claimed(p)
	if c.config != nil {
		c.config(&cfg)
	}
	var v clientcontrol.Variant
	if c.variant != nil {
		v = c.variant(cfg.Effective())
	}
	return callerOf(clientcontrol.New(counting{next}, cfg, v))
}

// callerOf is the Caller of a client Transport: each call counted.
func callerOf(t *client.Transport) Caller {
	return func(ctx context.Context, req *http.Request) (*http.Response, error) {
		ctx, c := WithCounter(ctx)
		resp, err := t.RoundTrip(req.WithContext(ctx))
		c.Finish(resp)
		return resp, err
	}
}
