package subjects_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/retrylab/retrylab/subjects"
)

// A harness builds one caller per simulated client from a subject, sends
// logical requests through it, and names the outcome with Classify.
func Example() {
	attempts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts++
		if attempts == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	s, err := subjects.Lookup("retrylab")
	if err != nil {
		fmt.Println(err)
		return
	}
	call := s.New(srv.Client().Transport, subjects.Params{Client: 1})
	req, _ := http.NewRequest("GET", srv.URL+"/c/1/r/0", nil)
	resp, err := call(context.Background(), req)
	if err == nil {
		defer resp.Body.Close()
	}
	result, status, n := subjects.Classify(resp, err)
	fmt.Println(result, status, n, "attempts; server saw", attempts)
	// Output: ok 200 2 attempts; server saw 2
}
