package stubserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/internal/memnet"
	"github.com/retrylab/retrylab/timeline"
)

// recordingServer runs s on loopback with its records in memory; records
// closes the recorder (after Shutdown) and returns them.
func recordingServer(t *testing.T, cfg Config, seed int64) (base string, records func() []timeline.Attempt) {
	t.Helper()
	var buf bytes.Buffer
	rec := timeline.NewRecorder(timeline.NewEncoder(&buf), 64)
	s, err := New(cfg, Options{Recorder: rec, Seed: seed})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}
	t.Cleanup(stop)
	return "http://" + l.Addr().String(), func() []timeline.Attempt {
		stop()
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		return decodeAttempts(t, &buf)
	}
}

// TestProxyRelays: an ok phase in front of an upstream forwards the
// request as a reverse proxy should (the upstream's Host, its base path
// joined, X-Forwarded-*, hop-by-hop headers dropped, the query kept) and
// relays the upstream's status, headers and body, recorded as relayed.
func TestProxyRelays(t *testing.T) {
	type seen struct {
		host, path, query, xff, xfh, xfp, conn, hop, custom string
	}
	got := make(chan seen, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Host, r.URL.Path, r.URL.RawQuery, r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Host"),
			r.Header.Get("X-Forwarded-Proto"), r.Header.Get("Connection"), r.Header.Get("X-Hop"), r.Header.Get("X-Custom")}
		w.Header().Set("X-Upstream", "yes")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":42}`)
	}))
	defer up.Close()
	base, records := recordingServer(t, Config{Upstream: up.URL + "/api"}, 1)

	req, _ := http.NewRequest(http.MethodGet, base+"/v1/users/42?fields=name", nil)
	req.Host = "app.example"
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "drop me")
	req.Header.Set("X-Custom", "keep me")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || string(body) != `{"id":42}` || resp.Header.Get("X-Upstream") != "yes" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("response %d %q %v; want the upstream's 201 {\"id\":42} with its headers", resp.StatusCode, body, resp.Header)
	}
	s := <-got
	want := seen{host: strings.TrimPrefix(up.URL, "http://"), path: "/api/v1/users/42", query: "fields=name", xff: "127.0.0.1", xfh: "app.example", xfp: "http", custom: "keep me"}
	if s != want {
		t.Errorf("upstream saw %+v;\nwant %+v", s, want)
	}
	as := records()
	if len(as) != 1 {
		t.Fatalf("%d records; want 1", len(as))
	}
	if a := as[0]; a.Status != 201 || a.Upstream != timeline.UpstreamRelayed || a.Path != "/v1/users/42" || a.Method != "GET" || a.Done < a.At {
		t.Errorf("record %+v; want status 201, upstream relayed, path /v1/users/42", a)
	}
}

// TestProxyPOSTBodiesOnRetries: a client retrying a POST through a mix of
// injected 503s and passthrough answers gets every body to the upstream
// intact (one per passthrough attempt), even past MaxBodyBytes: the stub
// reads only the first BodyDigestBytes of each, for its identity, and
// sends them on; every attempt of one order shares its key.
func TestProxyPOSTBodiesOnRetries(t *testing.T) {
	payload := bytes.Repeat([]byte("order-line;"), (MaxBodyBytes+1000)/11) // longer than MaxBodyBytes
	sum := sha256.Sum256(payload)
	var mu sync.Mutex
	var got []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		h := sha256.Sum256(b)
		mu.Lock()
		got = append(got, fmt.Sprintf("%s %d %v %v", r.Method, len(b), h == sum, err))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "created\n")
	}))
	defer up.Close()
	cfg := Config{Upstream: up.URL, Phases: []Phase{{Respond: Respond{Kind: RespondMix, Mix: []Weighted{{Status: 503, Weight: 1}, {Passthrough: true, Weight: 1}}}}}}
	base, records := recordingServer(t, cfg, 7)

	const orders = 6
	created := 0
	for i := range orders {
		for try := 0; try < 30; try++ { // bounded: 30 draws of a coin
			resp, err := http.Post(fmt.Sprintf("%s/v1/orders/%d", base, i), "text/plain", bytes.NewReader(payload))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 201 {
				if string(b) != "created\n" {
					t.Errorf("body %q; want the upstream's", b)
				}
				created++
				break
			}
			if resp.StatusCode != 503 {
				t.Fatalf("status %d; want 503 or 201", resp.StatusCode)
			}
		}
	}
	if created != orders {
		t.Fatalf("%d orders created; want %d", created, orders)
	}
	want := fmt.Sprintf("POST %d true <nil>", len(payload))
	mu.Lock()
	defer mu.Unlock()
	if len(got) != orders {
		t.Errorf("upstream got %d requests; want %d (one per passthrough answer)", len(got), orders)
	}
	for _, g := range got {
		if g != want {
			t.Errorf("upstream got %q; want %q", g, want)
		}
	}
	retried, relayed := 0, 0
	keys := map[string]bool{}
	for _, a := range records() {
		keys[a.Key] = true
		switch {
		case a.Status == 503 && a.Upstream == "":
			retried++
		case a.Status == 201 && a.Upstream == timeline.UpstreamRelayed:
			relayed++
		default:
			t.Errorf("record %+v; want a stub 503 or a relayed 201", a)
		}
	}
	if len(keys) != orders {
		t.Errorf("%d keys; want one per order (%d): one path and body each", len(keys), orders)
	}
	if relayed != orders || retried == 0 {
		t.Errorf("%d relayed, %d injected 503s; want %d relayed and some 503s (seed 7)", relayed, retried, orders)
	}
}

// TestProxyUpstreamDown: an upstream that refuses connections, or accepts
// and closes them unanswered, gets the client a 502 from the stub,
// recorded as an upstream failure.
func TestProxyUpstreamDown(t *testing.T) {
	closer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	defer closer.Close()
	refused := httptest.NewServer(http.NotFoundHandler())
	refused.Close() // nothing listens there now
	for name, upstream := range map[string]string{"closes": closer.URL, "refuses": refused.URL} {
		t.Run(name, func(t *testing.T) {
			base, records := recordingServer(t, Config{Upstream: upstream}, 1)
			for range 3 {
				resp, err := http.Get(base + "/v1/users/42")
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 502 || string(b) != "502 Bad Gateway\n" {
					t.Errorf("response %d %q; want the stub's 502", resp.StatusCode, b)
				}
			}
			as := records()
			if len(as) != 3 {
				t.Fatalf("%d records; want 3", len(as))
			}
			for i, a := range as {
				if a.Status != 502 || a.Upstream != timeline.UpstreamFailed || a.Attempt != i+1 || a.Fault != "" {
					t.Errorf("record %d = %+v; want 502, upstream failed, attempt %d", i, a, i+1)
				}
			}
		})
	}
}

// TestProxyStreams: a streamed response reaches the client as the upstream
// writes it, not when it ends.
func TestProxyStreams(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		io.WriteString(w, "data: second\n\n")
	}))
	defer up.Close()
	base, records := recordingServer(t, Config{Upstream: up.URL}, 1)
	resp, err := http.Get(base + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n') // blocks until the first event is relayed
	if err != nil || line != "data: first\n" {
		t.Fatalf("first line %q, %v; want data: first", line, err)
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: second\n\n" {
		t.Errorf("rest %q; want the second event", rest)
	}
	resp.Body.Close()
	if as := records(); len(as) != 1 || as[0].Status != 200 || as[0].Upstream != timeline.UpstreamRelayed {
		t.Errorf("records %+v; want one relayed 200", as)
	}
}

// TestProxyOutageThenRecovery drives the retrying client through the stub
// in virtual time (an in-memory network): the outage answers 503 from the
// stub without calling the upstream, and once it ends the client gets the
// upstream's real bodies; a quota's rejections never reach the upstream
// either, its admissions do.
func TestProxyOutageThenRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := memnet.New()
		var mu sync.Mutex
		var upstreamAt []time.Duration
		start := time.Now()
		upL := network.Listen()
		up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			upstreamAt = append(upstreamAt, time.Since(start))
			mu.Unlock()
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, b)
		})}
		go up.Serve(upL)

		var buf bytes.Buffer
		rec := timeline.NewRecorder(timeline.NewEncoder(&buf), 64)
		cfg := Config{
			Upstream: "http://" + upL.Addr().String(),
			Quota:    &Quota{Limits: []Limit{{Limit: 4, Per: time.Hour, Key: KeyGlobal}}},
			Phases: []Phase{
				{Name: "outage", For: 3 * time.Second, Respond: Respond{Kind: RespondStatus, Status: 503}, RetryAfter: RetryAfter{Form: FormDelta, Value: ValuePhaseEnd}},
				{Name: "quota", Respond: Respond{Kind: RespondQuota}, RetryAfter: RetryAfter{Form: FormDelta, Value: ValueLimiter}},
			},
		}
		s, err := New(cfg, Options{Recorder: rec, Start: start, UpstreamDial: network.DialContext})
		if err != nil {
			t.Fatal(err)
		}
		l := network.Listen()
		go s.Serve(l)

		base := &http.Transport{DialContext: network.DialContext}
		tr := client.New(base, client.Config{Rand: rand.New(rand.NewPCG(1, 2)), Budget: 20 * time.Second})
		var bodies []string
		for i := range 3 {
			req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s/v1/orders/%d", l.Addr(), i), strings.NewReader("item=book"))
			req.Header.Set("Idempotency-Key", fmt.Sprint("order-", i))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("order %d: %v", i, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			bodies = append(bodies, fmt.Sprint(resp.StatusCode, " ", string(b)))
		}
		// The quota admits 4 an hour: one more than the orders, then 429.
		for i := range 2 {
			resp, err := base.RoundTrip(must(http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/v1/users/%d", l.Addr(), i), nil)))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			bodies = append(bodies, fmt.Sprint(resp.StatusCode, " ", string(b)))
		}
		want := []string{"200 POST /v1/orders/0 item=book", "200 POST /v1/orders/1 item=book", "200 POST /v1/orders/2 item=book", "200 GET /v1/users/0 ", "429 429 Too Many Requests\n"}
		if fmt.Sprint(bodies) != fmt.Sprint(want) {
			t.Errorf("bodies %q;\nwant %q", bodies, want)
		}
		base.CloseIdleConnections()
		s.Shutdown(context.Background())
		up.Shutdown(context.Background())
		rec.Close()
		mu.Lock()
		if len(upstreamAt) != 4 || upstreamAt[0] < 3*time.Second {
			t.Errorf("upstream called at %v; want 4 calls, none before the outage ends at 3s", upstreamAt)
		}
		mu.Unlock()
		var outage, relayed, limited int
		for _, a := range decodeAttempts(t, &buf) {
			switch {
			case a.Phase == "outage" && a.Status == 503 && a.Upstream == "":
				outage++
			case a.Phase == "quota" && a.Status == 200 && a.Upstream == timeline.UpstreamRelayed:
				relayed++
			case a.Phase == "quota" && a.Status == 429 && a.Upstream == "" && a.HasNotBefore:
				limited++
			default:
				t.Errorf("record %+v; want an outage 503, a relayed 200 or a paced 429", a)
			}
		}
		if outage == 0 || relayed != 4 || limited != 1 {
			t.Errorf("%d outage, %d relayed, %d limited; want some, 4, 1", outage, relayed, limited)
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestProxyRecordsUpstreamRetryAfter: the upstream's own 429 with
// Retry-After: 2 and rate-limit headers reaches the client, and its
// record holds the raw value, not_before = done + 2 s, and the headers.
func TestProxyRecordsUpstreamRetryAfter(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Retry-After", "2")
		h.Set("X-RateLimit-Limit", "60")
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", "1700000000")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer up.Close()
	base, records := recordingServer(t, Config{Upstream: up.URL}, 1)
	resp, err := http.Get(base + "/v1/search")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || resp.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("client got %d, Retry-After %q, remaining %q; want the upstream's 429, 2, 0", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("X-RateLimit-Remaining"))
	}
	as := records()
	if len(as) != 1 {
		t.Fatalf("%d records; want 1", len(as))
	}
	a := as[0]
	if a.Status != 429 || a.Upstream != timeline.UpstreamRelayed || a.RetryAfter != "2" || !a.HasNotBefore || a.NotBefore != a.Done+2*int64(time.Second) {
		t.Errorf("record %+v; want the relayed 429 with Retry-After 2 and not_before = done + 2s", a)
	}
	if want := "X-RateLimit-Limit: 60; X-RateLimit-Remaining: 0; X-RateLimit-Reset: 1700000000"; a.RateLimit != want {
		t.Errorf("RateLimit %q; want %q", a.RateLimit, want)
	}
}

// TestProxyUpstreamRetryAfterForms: the upstream's Retry-After is read by
// the stub's rules, in virtual time (the bubble's clock starts at
// 2000-01-01 00:00:00 UTC, the run at once): delay-seconds from the
// response, an HTTP-date (any of its three forms) as run time, a past date
// as the response instant, anything else no not_before; IETF headers are
// recorded too, and a quota's own headers take precedence.
func TestProxyUpstreamRetryAfterForms(t *testing.T) {
	const sec = int64(time.Second)
	for _, tt := range []struct {
		ra      string
		hdr     []string // more upstream headers
		nb      int64
		ok      bool
		rateRec string
	}{
		{"7", nil, 7 * sec, true, ""},
		{" 3 ", nil, 3 * sec, true, ""},
		{"0", nil, 0, true, ""},
		{"31536000", nil, 31536000 * sec, true, ""},
		{"Sat, 01 Jan 2000 00:00:05 GMT", nil, 5 * sec, true, ""},
		{"Saturday, 01-Jan-00 00:00:09 GMT", nil, 9 * sec, true, ""},
		{"Sat Jan  1 00:00:04 2000", nil, 4 * sec, true, ""},
		{"Fri, 31 Dec 1999 23:00:00 GMT", nil, 0, true, ""}, // past: the response instant
		{"-5", nil, 0, false, ""},
		{"1.5", nil, 0, false, ""},
		{"soon, maybe", nil, 0, false, ""},
		{"99999999999999999999", nil, 0, false, ""},
		{"", []string{"RateLimit-Policy", `"hour";q=100;w=3600`, "RateLimit", `"hour";r=0;t=30`}, 0, false,
			`RateLimit-Policy: "hour";q=100;w=3600; RateLimit: "hour";r=0;t=30`},
	} {
		synctest.Test(t, func(t *testing.T) {
			network := memnet.New()
			upL := network.Listen()
			up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.ra != "" {
					w.Header().Set("Retry-After", tt.ra)
				}
				for i := 0; i+1 < len(tt.hdr); i += 2 {
					w.Header().Set(tt.hdr[i], tt.hdr[i+1])
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			})}
			go up.Serve(upL)
			var buf bytes.Buffer
			rec := timeline.NewRecorder(timeline.NewEncoder(&buf), 4)
			s, err := New(Config{Upstream: "http://" + upL.Addr().String()}, Options{Recorder: rec, UpstreamDial: network.DialContext})
			if err != nil {
				t.Fatal(err)
			}
			l := network.Listen()
			go s.Serve(l)
			tr := &http.Transport{DialContext: network.DialContext}
			resp, err := tr.RoundTrip(must(http.NewRequest("GET", "http://"+l.Addr().String()+"/x", nil)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			tr.CloseIdleConnections()
			s.Shutdown(context.Background())
			up.Shutdown(context.Background())
			rec.Close()
			as := decodeAttempts(t, &buf)
			if len(as) != 1 {
				t.Fatalf("%d records; want 1", len(as))
			}
			a := as[0]
			if a.Status != 503 || a.RetryAfter != strings.TrimSpace(tt.ra) && a.RetryAfter != tt.ra || a.HasNotBefore != tt.ok || a.HasNotBefore && a.NotBefore != a.Done+tt.nb || a.RateLimit != tt.rateRec {
				t.Errorf("Retry-After %q: record status %d, retry_after %q, not_before %v (%d, done %d), ratelimit %q; want 503, not_before %v at done + %d, ratelimit %q",
					tt.ra, a.Status, a.RetryAfter, a.HasNotBefore, a.NotBefore, a.Done, a.RateLimit, tt.ok, tt.nb, tt.rateRec)
			}
		})
	}
}

// FuzzUpstreamRetryAfter: any upstream Retry-After parses without panic;
// a not_before is never before the response, and delay-seconds give
// exactly the response plus the seconds.
func FuzzUpstreamRetryAfter(f *testing.F) {
	for _, v := range []string{"2", "Sat, 01 Jan 2000 00:00:05 GMT", "-1", "1.5", "", " 9 ", "99999999999"} {
		f.Add(v, int64(1e9))
	}
	s := &Server{startWall: epoch2000}
	f.Fuzz(func(t *testing.T, v string, done int64) {
		done = max(0, done)
		nb, ok := s.upstreamNotBefore(v, done)
		if ok && nb < done {
			t.Errorf("%q: not_before %d before the response %d", v, nb, done)
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= 0 && digits(strings.TrimSpace(v)) && n < 1<<32 {
			if !ok || nb != done+n*int64(time.Second) {
				t.Errorf("%q: not_before %d, %v; want %d", v, nb, ok, done+n*int64(time.Second))
			}
		}
	})
}
