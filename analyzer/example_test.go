package analyzer_test

import (
	"bytes"
	"fmt"
	"os"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/timeline"
)

// A client that retried a 503 one millisecond after it, and a POST without
// an Idempotency-Key: the timeline is built here; usually it comes from a
// file written by retrylab run or serve.
func Example() {
	var buf bytes.Buffer
	enc := timeline.NewEncoder(&buf)
	enc.EncodeMeta(&timeline.Meta{Format: timeline.Format, Recorder: "serve", Scenario: "demo",
		Expect: &timeline.Expect{Checks: []string{analyzer.CheckInstantRetry, analyzer.CheckIdempotency, analyzer.CheckBudget}}})
	ms := int64(1e6)
	for i := range 3 {
		enc.EncodeAttempt(&timeline.Attempt{Client: "1", Key: "1/0", Attempt: i + 1, Method: "POST", Path: "/c/1/r/0",
			At: int64(i) * 3 * ms, Done: int64(i)*3*ms + 2*ms, Status: 503})
	}
	enc.Flush()

	v, err := analyzer.Analyze(&buf, analyzer.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("pass:", v.Pass, "failed:", v.Failed())
	analyzer.WriteText(os.Stdout, v)
	// Output:
	// pass: false failed: [instant-retry idempotency]
	// retrylab verdict: FAIL  demo · seed 0 · 3 attempts, 1 requests, 2 retries, 0 outcomes
	//
	//   ↷ retry-after.......... skipped: not in the scenario's expect.checks
	//   ✗ instant-retry........ 100.0% > 50.0%
	//       ↳ client 1 · 1/0 · retry 1 came 1ms after a 503 without a usable Retry-After
	//   ↷ waves................ skipped: not in the scenario's expect.checks
	//   ↷ non-retryable........ skipped: not in the scenario's expect.checks
	//   ✗ idempotency.......... 2 offences > 0
	//       ↳ client 1 · 1/0 · POST /c/1/r/0 retried (attempt 2 at 3ms) without an Idempotency-Key
	//   ↷ attempts............. skipped: not in the scenario's expect.checks
	//   ↷ budget............... skipped: a serve recording has no client outcomes
	//   ↷ give-up.............. skipped: not in the scenario's expect.checks
	//   ↷ amplification........ skipped: not in the scenario's expect.checks
	//   ↷ pacing............... skipped: not in the scenario's expect.checks
	//   ↷ jitter-bounds........ skipped: not in the scenario's expect.checks
	//   ↷ recovery............. skipped: not in the scenario's expect.checks
	//   ↷ load-amplification... skipped: not in the scenario's expect.checks
	//   ↷ wasted-work.......... skipped: not in the scenario's expect.checks
}

// Which responses are rate limits: a 403 is one when the server said so
// (GitHub's secondary limit: Retry-After, or rate-limit headers at 0),
// and a refusal otherwise. A 503 from a full queue is no rate limit: the
// server could not keep up.
func ExampleClassifyResponse() {
	for _, x := range []struct {
		what string
		a    timeline.Attempt
	}{
		{"429", timeline.Attempt{Status: 429}},
		{"403 with Retry-After: 60", timeline.Attempt{Status: 403, RetryAfter: "60", NotBefore: 60e9, HasNotBefore: true}},
		{"403 with X-RateLimit-Remaining: 0", timeline.Attempt{Status: 403, RateLimit: "X-RateLimit-Limit: 5000; X-RateLimit-Remaining: 0"}},
		{"403 from the minute limit", timeline.Attempt{Status: 403, Limit: "minute"}},
		{"403", timeline.Attempt{Status: 403}},
		{"503 with Retry-After: 5", timeline.Attempt{Status: 503, RetryAfter: "5", NotBefore: 5e9, HasNotBefore: true}},
		{"503 with the stub's queue full", timeline.Attempt{Status: 503, Limit: analyzer.LimitCapacity}},
	} {
		c := analyzer.ClassifyResponse(&x.a)
		fmt.Printf("%s: %s (retry: %v)\n", x.what, c, c.Retryable())
	}
	// Output:
	// 429: rate-limit (retry: true)
	// 403 with Retry-After: 60: rate-limit (retry: true)
	// 403 with X-RateLimit-Remaining: 0: rate-limit (retry: true)
	// 403 from the minute limit: rate-limit (retry: true)
	// 403: refusal (retry: false)
	// 503 with Retry-After: 5: unavailable (retry: true)
	// 503 with the stub's queue full: unavailable (retry: true)
}
