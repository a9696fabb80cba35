package main

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
)

// The status line shows the phase and its time left, requests by status,
// and the retries the analyzer's rule judges early (one here: the retry
// came at once after a Retry-After of 10 s) on a terminal, and nothing
// otherwise.
func TestServeStatus(t *testing.T) {
	cfg := stubserver.Config{Phases: []stubserver.Phase{
		{Name: "outage", For: time.Hour, Respond: stubserver.Respond{Kind: stubserver.RespondStatus, Status: 503},
			RetryAfter: stubserver.RetryAfter{Form: stubserver.FormDelta, Fixed: 10 * time.Second}},
		{Name: "ok"},
	}}
	for _, tty := range []bool{true, false} {
		var buf bytes.Buffer
		st := newServeStatus(&env{stderr: &buf, tty: tty}, &timeline.Meta{Recorder: "serve"})
		srv, err := stubserver.New(cfg, stubserver.Options{OnAttempt: st.onAttempt})
		if err != nil {
			t.Fatal(err)
		}
		st.srv.Store(srv)
		for range 2 { // the same logical request twice: a retry 10 s early
			srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/users/42", nil))
		}
		srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/users/43", nil))
		if tty {
			st.finish()
			if out := buf.String(); !strings.Contains(out, "early 1") {
				t.Fatalf("status %q; want early 1", out)
			}
			// A reset of the control API: a new stub and recording, whose
			// first request on the same path is no retry.
			buf.Reset()
			st = newServeStatus(&env{stderr: &buf, tty: tty}, &timeline.Meta{Recorder: "serve"})
			srv1, err := stubserver.New(cfg, stubserver.Options{OnAttempt: st.onAttempt})
			if err != nil {
				t.Fatal(err)
			}
			st.srv.Store(srv1)
			srv1.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/users/42", nil))
			srv2, err := stubserver.New(cfg, stubserver.Options{OnAttempt: st.onAttempt})
			if err != nil {
				t.Fatal(err)
			}
			st.reset(srv2, &timeline.Meta{Recorder: "serve"})
			srv2.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/users/42", nil))
			st.finish()
			if out := buf.String(); !strings.Contains(out, "1 req · 2xx 0 · 429 0 · 503 1 · other 0 · fault 0 · early 0") {
				t.Errorf("status after a reset %q; want the new stub's 1 request, none early", out)
			}
			continue
		}
		st.finish()
		out := buf.String()
		if !tty {
			if out != "" {
				t.Errorf("status drawn %q without a terminal; want nothing", out)
			}
			continue
		}
		for _, want := range []string{"outage 1h0m0s left", "3 req · 2xx 0 · 429 0 · 503 3 · other 0 · fault 0 · early 1"} {
			if !strings.Contains(out, want) {
				t.Errorf("status %q; want %q in it", out, want)
			}
		}
	}
}
