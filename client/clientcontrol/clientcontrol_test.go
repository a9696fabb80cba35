package clientcontrol_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientcontrol"
)

// trace sends one GET through the Transport mk builds over a server that
// answers 503 with Retry-After: 30 twice, then 200, and returns the
// instants of the attempts.
func trace(t *testing.T, mk func(http.RoundTripper, client.Config) *client.Transport) string {
	t.Helper()
	var out strings.Builder
	synctest.Test(t, func(t *testing.T) {
		start, n := time.Now(), 0
		srv := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			n++
			fmt.Fprintf(&out, "%v ", time.Since(start))
			if n > 2 {
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
			}
			return &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"30"}}, Body: http.NoBody, Request: req}, nil
		})
		tr := mk(srv, client.Config{Base: 100 * time.Millisecond, Budget: time.Hour, Rand: rand.New(rand.NewPCG(1, 2))})
		req, _ := http.NewRequest(http.MethodGet, "http://api.test/x", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	})
	return out.String()
}

// TestNew: the zero Variant is client.New, draw for draw; a field set
// reaches the Transport (the client's own tests check each field).
func TestNew(t *testing.T) {
	ref := trace(t, client.New)
	zero := trace(t, func(next http.RoundTripper, cfg client.Config) *client.Transport {
		return clientcontrol.New(next, cfg, clientcontrol.Variant{})
	})
	if zero != ref {
		t.Errorf("New with the zero Variant: attempts at %s; client.New: %s", zero, ref)
	}
	if !strings.HasPrefix(ref, "0s 30") {
		t.Errorf("client.New: attempts at %s; want the second after Retry-After's 30s", ref)
	}
	ignore := trace(t, func(next http.RoundTripper, cfg client.Config) *client.Transport {
		return clientcontrol.New(next, cfg, clientcontrol.Variant{IgnoreRetryAfter: true})
	})
	if ignore == ref || strings.HasPrefix(ignore, "0s 30") {
		t.Errorf("IgnoreRetryAfter: attempts at %s; want the second before Retry-After's 30s (client.New: %s)", ignore, ref)
	}
}
