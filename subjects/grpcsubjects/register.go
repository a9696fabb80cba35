package grpcsubjects

import (
	_ "github.com/retrylab/retrylab/stubserver/stubgrpc" // a gRPC subject needs the stub to speak gRPC
	"time"

	retry "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"

	"github.com/retrylab/retrylab/client/grpcretry"
	"github.com/retrylab/retrylab/subjects"
)

// retryable is what the policies below retry, as statuses: UNAVAILABLE
// (503, and 502, which the stub also answers UNAVAILABLE) and
// RESOURCE_EXHAUSTED (429).
var retryable = []int{429, 502, 503}

// A6 is the retryPolicy the grpc-retrypolicy subjects state: gRPC A6's
// example shape with its cap of 5 attempts.
const a6Policy = `"retryPolicy": {
	"maxAttempts": 5,
	"initialBackoff": "0.1s",
	"maxBackoff": "5s",
	"backoffMultiplier": 2,
	"retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]
}`

func serviceConfig(method, extra string) string {
	s := `{"methodConfig": [{"name": [{"service": "` + Service + `"}]`
	if method != "" {
		s += ", " + method
	}
	s += "}]"
	if extra != "" {
		s += ", " + extra
	}
	return s + "}"
}

func withConfig(cfg string) func(subjects.Params) []grpc.DialOption {
	return func(subjects.Params) []grpc.DialOption {
		return []grpc.DialOption{grpc.WithDefaultServiceConfig(cfg)}
	}
}

// a6Stated is the policy an A6 retryPolicy states: full jitter in
// [0, min(maxBackoff, initialBackoff·multiplier^(n-1))), 5 attempts.
func a6Stated(subjects.Params) *subjects.Stated {
	return &subjects.Stated{Base: 100 * time.Millisecond, Cap: 5 * time.Second, MaxAttempts: 5, Jitter: "full", Retryable: retryable}
}

// Subjects are the gRPC subjects, registered by init.
var Subjects = []subjects.Subject{
	subject{
		name: "grpc-default", module: "google.golang.org/grpc", callDeadline: true,
		summary: "grpc-go with no service config: no retries beyond transparent ones (an RPC that never left the client)",
		stated: func(subjects.Params) *subjects.Stated {
			return &subjects.Stated{MaxAttempts: 1}
		},
		replayable: true,
	},
	subject{
		name: "grpc-retrypolicy", module: "google.golang.org/grpc", callDeadline: true,
		summary: "grpc-go with an A6 retryPolicy: 5 attempts, backoff 0.1s×2^n to 5s (full jitter), UNAVAILABLE and RESOURCE_EXHAUSTED, pushback honoured",
		stated:  a6Stated, options: withConfig(serviceConfig(a6Policy, "")),
	},
	subject{
		name: "grpc-throttling", module: "google.golang.org/grpc", callDeadline: true,
		summary: "grpc-go with the A6 retryPolicy and retryThrottling {maxTokens: 10, tokenRatio: 0.1}: retries stop while a channel's tokens are at or below 5",
		stated:  a6Stated, options: withConfig(serviceConfig(a6Policy, `"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}`)),
	},
	subject{
		name: "grpc-hedging", module: "google.golang.org/grpc", callDeadline: true,
		summary: "grpc-go with a hedgingPolicy {maxAttempts: 3, hedgingDelay: 0.5s}: grpc-go does not implement hedging and ignores it, so no retries either",
		stated: func(subjects.Params) *subjects.Stated {
			return &subjects.Stated{MaxAttempts: 3, Retryable: retryable}
		},
		replayable: true,
		options:    withConfig(serviceConfig(`"hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.5s", "nonFatalStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]}`, "")),
	},
	subject{
		name: "grpc-middleware", module: "github.com/grpc-ecosystem/go-grpc-middleware/v2", callDeadline: true,
		summary: "go-grpc-middleware/v2 retry.UnaryClientInterceptor() at its defaults: WithMax 0, so no retries",
		stated: func(subjects.Params) *subjects.Stated {
			return &subjects.Stated{MaxAttempts: 1}
		},
		replayable: true,
		options: func(subjects.Params) []grpc.DialOption {
			return []grpc.DialOption{grpc.WithUnaryInterceptor(retry.UnaryClientInterceptor())}
		},
	},
	subject{
		name: "grpc-middleware-backoff", module: "github.com/grpc-ecosystem/go-grpc-middleware/v2",
		summary: "go-grpc-middleware/v2 retry with WithMax(5) and BackoffExponentialWithJitter(100ms, 0.1): 100ms·2^(n-1) ±10%, no cap, pushback and RetryInfo not read",
		stated: func(subjects.Params) *subjects.Stated {
			return &subjects.Stated{Base: 110 * time.Millisecond, MaxAttempts: 5, Jitter: "exponential ±10%", Retryable: retryable}
		},
		options: func(p subjects.Params) []grpc.DialOption {
			return []grpc.DialOption{grpc.WithUnaryInterceptor(retry.UnaryClientInterceptor(
				retry.WithMax(5), retry.WithBackoff(retry.BackoffExponentialWithJitter(100*time.Millisecond, 0.1)),
				retry.WithPerRetryTimeout(p.AttemptTimeout)))}
		},
	},
	reference,
	noRetryBudget,
}

// noRetryBudget is the control: the reference interceptor with one
// mistake, no retry budget (MaxTokens < 0).
var noRetryBudget = subject{
	name: "grpcretry-no-budget", module: "",
	summary: "the reference interceptor (client/grpcretry) without its retry budget: the control for the metastable scenario",
	stated:  reference.stated, replayable: true,
	options: func(p subjects.Params) []grpc.DialOption {
		cfg := refConfig(p)
		cfg.MaxTokens = -1
		return []grpc.DialOption{grpc.WithUnaryInterceptor(grpcretry.New(cfg).Unary)}
	},
}

// reference is retrylab's reference interceptor (client/grpcretry),
// configured by the scenario's policy: base, cap, max_attempts, budget.
var reference = subject{
	name: "grpcretry", module: "",
	summary: "retrylab's reference interceptor (client/grpcretry): full jitter, pushback and RetryInfo honoured, attempts and time capped, a retry budget per channel",
	stated: func(p subjects.Params) *subjects.Stated {
		e := grpcretry.New(refConfig(p)).Effective()
		return &subjects.Stated{Base: e.Base, Cap: e.Cap, MaxAttempts: e.MaxAttempts, Budget: e.Budget, Jitter: "full", Retryable: retryable}
	},
	replayable: true,
	options: func(p subjects.Params) []grpc.DialOption {
		return []grpc.DialOption{grpc.WithUnaryInterceptor(grpcretry.New(refConfig(p)).Unary)}
	},
}

func refConfig(p subjects.Params) grpcretry.Config {
	return grpcretry.Config{Base: p.Policy.Base, Cap: p.Policy.Cap, MaxAttempts: p.Policy.MaxAttempts, Budget: p.Policy.Budget,
		AttemptTimeout: p.Policy.Timeout, Rand: p.Rand}
}

func init() {
	for _, s := range Subjects {
		subjects.Register(s)
	}
}
