package clientcontrol_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientcontrol"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A control that retries a POST without an Idempotency-Key, where the
// client sends it once: the write may be applied twice.
func Example() {
	attempts := 0
	flaky := roundTripFunc(func(req *http.Request) (*http.Response, error) { // 503, then 200
		attempts++
		status := http.StatusServiceUnavailable
		if attempts > 1 {
			status = http.StatusOK
		}
		return &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	})
	noWait := func(*rand.Rand, int, time.Duration) time.Duration { return 0 }
	for _, v := range []clientcontrol.Variant{{Backoff: noWait}, {Backoff: noWait, RetryWithoutKey: true}} {
		attempts = 0
		tr := clientcontrol.New(flaky, client.Config{}, v)
		req, _ := http.NewRequest(http.MethodPost, "http://api.test/orders", strings.NewReader(`{"qty":1}`))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			fmt.Println(err)
			continue
		}
		resp.Body.Close()
		fmt.Printf("RetryWithoutKey %v: %d after %d attempt(s)\n", v.RetryWithoutKey, resp.StatusCode, attempts)
	}
	// Output:
	// RetryWithoutKey false: 503 after 1 attempt(s)
	// RetryWithoutKey true: 200 after 2 attempt(s)
}
