package stubserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// liveServer runs s on a loopback listener and returns its base URL.
func liveServer(t testing.TB, s *Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("Serve() = %v; want nil after Shutdown", err)
		}
	})
	return "http://" + l.Addr().String()
}

// decodeAttempts reads the attempts of a timeline.
func decodeAttempts(t *testing.T, r io.Reader) []timeline.Attempt {
	t.Helper()
	dec := timeline.NewDecoder(r)
	var out []timeline.Attempt
	var rec timeline.Record
	for {
		err := dec.Decode(&rec)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Type == timeline.TypeAttempt {
			out = append(out, rec.Attempt)
		}
	}
}

// TestEndToEndNoRecordLost drives concurrent load over real loopback TCP
// and checks that every response a client got has its record in the file.
func TestEndToEndNoRecordLost(t *testing.T) {
	var buf bytes.Buffer
	enc := timeline.NewEncoder(&buf)
	enc.EncodeMeta(&timeline.Meta{Format: timeline.Format, Recorder: "serve"})
	rec := timeline.NewRecorder(enc, 8) // small: exercises backpressure
	cfg := Config{
		Headers: HeadersIETF,
		Quota:   &Quota{Limits: []Limit{{Limit: 50, Per: time.Second, Burst: 10}}},
		Phases: []Phase{{
			Respond:    Respond{Kind: RespondQuota},
			RetryAfter: RetryAfter{Form: FormDelta, Value: ValueLimiter},
		}},
	}
	s, err := New(cfg, Options{Recorder: rec, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	base := liveServer(t, s)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	const workers, each = 16, 40
	var got, ok429 atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				resp, err := client.Get(base + RequestPath(w, i%7))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				got.Add(1)
				if resp.StatusCode == http.StatusTooManyRequests {
					ok429.Add(1)
				}
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	as := decodeAttempts(t, &buf)
	if int64(len(as)) != got.Load() {
		t.Fatalf("records = %d; want %d (responses clients got)", len(as), got.Load())
	}
	if st := s.Stats(); st.Attempts != got.Load() || st.Throttled429 != ok429.Load() {
		t.Errorf("Stats() = %+v; want %d attempts, %d 429s", st, got.Load(), ok429.Load())
	}
	// Attempt numbers per key are 1..n, each once.
	per := map[string][]bool{}
	for _, a := range as {
		seen := per[a.Key]
		for len(seen) < a.Attempt {
			seen = append(seen, false)
		}
		if seen[a.Attempt-1] {
			t.Errorf("key %s attempt %d recorded twice", a.Key, a.Attempt)
		}
		seen[a.Attempt-1] = true
		per[a.Key] = seen
		if a.Status == 429 && (a.RetryAfter == "" || !a.HasNotBefore || a.RateLimit == "") {
			t.Errorf("429 record %+v: want retry_after, not_before and ratelimit", a)
		}
	}
	for k, seen := range per {
		for i, ok := range seen {
			if !ok {
				t.Errorf("key %s: attempt %d missing", k, i+1)
			}
		}
	}
}

func TestEndToEndFaults(t *testing.T) {
	var buf bytes.Buffer
	rec := timeline.NewRecorder(timeline.NewEncoder(&buf), 16)
	cfg := Config{Phases: []Phase{{Respond: Respond{Kind: RespondMix, Mix: []Weighted{
		{Fault: FaultReset, Weight: 1},
	}}}}}
	s, err := New(cfg, Options{Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	base := liveServer(t, s)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	_, err = (&http.Client{Transport: tr}).Get(base + "/c/1/r/1")
	if err == nil {
		t.Fatal("GET on a reset phase succeeded; want a connection error")
	}
	s.Shutdown(context.Background())
	rec.Close()
	as := decodeAttempts(t, &buf)
	if len(as) < 1 || as[0].Fault != timeline.FaultReset {
		t.Fatalf("records = %+v; want a reset", as)
	}
}

// TestEndToEndHangReleasedAtShutdown checks that Shutdown releases a
// hanging request without answering it and records it.
func TestEndToEndHangReleasedAtShutdown(t *testing.T) {
	var buf bytes.Buffer
	rec := timeline.NewRecorder(timeline.NewEncoder(&buf), 16)
	s, err := New(Config{Phases: []Phase{{Respond: Respond{Kind: RespondFault, Fault: FaultHang}}}}, Options{Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	errc := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get("http://" + l.Addr().String() + "/c/3/r/0")
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("got %s", resp.Status)
		}
		errc <- err
	}()
	// Real TCP: wait (bounded) for the request to reach the handler.
	for deadline := time.Now().Add(5 * time.Second); s.Stats().Attempts == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the request never arrived")
		}
		time.Sleep(time.Millisecond) // real TCP, no synctest bubble: a bounded poll
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown() = %v; want nil", err)
	}
	if err := <-errc; err == nil || strings.HasPrefix(err.Error(), "got") {
		t.Errorf("hanging GET = %v; want a connection error", err)
	}
	rec.Close()
	as := decodeAttempts(t, &buf)
	if len(as) != 1 || as[0].Fault != timeline.FaultHang {
		t.Fatalf("records = %+v; want one hang", as)
	}
}

func TestEndToEndMetricsAndHealth(t *testing.T) {
	// The exporter is a hook (stubprom.Handler in serve); here one that
	// prints the counts, so the stub's side of it is tested alone.
	metrics := func(s *Server) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "%+v", s.Counts()) })
	}
	s, err := New(Config{Phases: []Phase{{Name: "down", Respond: Respond{Kind: RespondStatus, Status: 429}}}}, Options{Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	base := liveServer(t, s)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for range 3 {
		get("/c/1/r/1")
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("GET /healthz = %d %q; want 200 ok", code, body)
	}
	code, body := get("/metrics")
	want := `{Name:down Codes:[{Code:429 N:3}]}`
	if code != 200 || !strings.Contains(body, want) {
		t.Errorf("GET /metrics = %d, body without %q:\n%s", code, want, body)
	}
	if n := s.Stats().Attempts; n != 3 {
		t.Errorf("Stats().Attempts = %d; want 3 (/metrics and /healthz excluded)", n)
	}
}

func TestServeReturnsListenerError(t *testing.T) {
	s, _ := New(Config{}, Options{})
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	l.Close()
	if err := s.Serve(l); err == nil || errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve(closed listener) = %v; want the accept error", err)
	}
}

func TestEndToEndHardening(t *testing.T) {
	s, err := New(Config{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := s.httpSrv
	if hs.ReadHeaderTimeout != ReadHeaderTimeout || hs.IdleTimeout != IdleTimeout || hs.MaxHeaderBytes != MaxHeaderBytes {
		t.Errorf("http.Server limits = %v, %v, %d; want %v, %v, %d", hs.ReadHeaderTimeout, hs.IdleTimeout, hs.MaxHeaderBytes,
			ReadHeaderTimeout, IdleTimeout, MaxHeaderBytes)
	}
	base := liveServer(t, s)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", base+"/c/1/r/1", nil)
	req.Header.Set("X-Big", strings.Repeat("x", 2*MaxHeaderBytes))
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("oversized headers: status %d; want 431", resp.StatusCode)
	}
	if n := s.Stats().Attempts; n != 0 {
		t.Errorf("Stats().Attempts = %d; want 0 (rejected before the handler)", n)
	}
}
