package retrylabtest_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/subjects"
)

// myClient stands for the retry logic a library author ships: at most six
// attempts, Retry-After honoured in both forms, full-jitter backoff
// otherwise, a 20-second budget. As a subjects.Subject it is handed the
// harness's transport (which it must use for every attempt) and a seeded
// random source (so a run replays).
type myClient struct{}

func (myClient) Name() string { return "my-client" }

func (myClient) New(next http.RoundTripper, p subjects.Params) subjects.Caller {
	rnd := p.Rand
	if rnd == nil {
		rnd = rand.New(rand.NewPCG(1, 2))
	}
	return func(ctx context.Context, req *http.Request) (*http.Response, error) {
		start := time.Now()
		for attempt := 1; ; attempt++ {
			resp, err := next.RoundTrip(req)
			if err != nil {
				return nil, err
			}
			if resp.StatusCode != 429 && resp.StatusCode < 500 || attempt == 6 {
				return resp, nil
			}
			wait := retryAfter(resp.Header.Get("Retry-After"))
			if wait < 0 { // none or unusable: full jitter, base 100ms, cap 5s
				wait = time.Duration(rnd.Int64N(int64(min(5*time.Second, 100*time.Millisecond<<attempt))))
			}
			if time.Since(start)+wait > 20*time.Second {
				return resp, nil // the budget: hand back the last answer
			}
			resp.Body.Close()
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
		}
	}
}

// retryAfter parses delay-seconds or an HTTP-date; -1 when unusable.
func retryAfter(v string) time.Duration {
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, time.Until(t))
	}
	return -1
}

// gateMyClient is what the author's own test calls:
//
//	func TestRetriesAreSafe(t *testing.T) { gateMyClient(t) }
//
// It runs the built-in outage-date scenario — 503s with an HTTP-date
// Retry-After for five seconds — with 100 simulated clients in virtual
// time, so it takes well under a second, and fails the test with the
// analyzer's findings if the client retries early, instantly or in waves.
func gateMyClient(t *testing.T) {
	res := retrylabtest.Run(t, retrylabtest.Builtin("outage-date"), retrylabtest.Client(myClient{}), retrylabtest.WithClients(100))
	res.AssertPass(t)
	if n := res.Summary.Results["ok"]; n != res.Summary.Planned {
		t.Errorf("%d of %d requests succeeded; want all once the outage ends", n, res.Summary.Planned)
	}
}

// Gate a library's retry logic in `go test`: adapt the client to
// subjects.Subject, run a scenario against it in virtual time, and assert
// the verdict.
func Example_gateInGoTest() {
	// In the library's _test.go file:
	//
	//	func TestRetriesAreSafe(t *testing.T) { gateMyClient(t) }
	//
	// A negative control proves the scenario can fail:
	//
	//	res := retrylabtest.Run(t, retrylabtest.Builtin("outage-date"), retrylabtest.Registered("ignore-retry-after"))
	//	res.AssertFails(t, "retry-after")
}
