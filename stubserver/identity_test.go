package stubserver

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

func TestRequestPath(t *testing.T) {
	tests := []struct {
		client, seq int
		want        string
	}{
		{17, 42, "/c/17/r/42"},
		{0, 0, "/c/0/r/0"},
	}
	for _, tt := range tests {
		if got := RequestPath(tt.client, tt.seq); got != tt.want {
			t.Errorf("RequestPath(%d, %d) = %q; want %q", tt.client, tt.seq, got, tt.want)
		}
	}
}

func TestIdentify(t *testing.T) {
	tests := []struct {
		method, path string
		hdr          []string
		remote       string
		client, key  string
	}{
		{"GET", "/c/17/r/42", nil, "10.0.0.1:5", "17", "17/42"},
		{"GET", "/c/17/r/42/search", nil, "", "17", "17/42"},
		{"GET", "/c/17/r/42", []string{"X-Client-Id", "other", "Idempotency-Key", "k"}, "", "17", "17/42"}, // the path wins
		{"POST", "/pay", []string{"X-Client-Id", "alice", "Idempotency-Key", "k1"}, "10.0.0.1:5", "alice", "idem:k1"},
		{"POST", "/pay", []string{"X-Client-Id", "alice"}, "10.0.0.1:5", "alice", "alice POST /pay"},
		{"GET", "/pay", nil, "10.0.0.1:5", "10.0.0.1", "10.0.0.1 GET /pay"},
		{"GET", "/pay", nil, "[::1]:80", "::1", "::1 GET /pay"},
		{"GET", "/pay", nil, "pipe", "pipe", "pipe GET /pay"},
		{"GET", "/c//r/1", nil, "1.2.3.4:1", "1.2.3.4", "1.2.3.4 GET /c//r/1"}, // empty client: not the shape
		{"GET", "/c/1/r/", nil, "1.2.3.4:1", "1.2.3.4", "1.2.3.4 GET /c/1/r/"},
		{"GET", "/c/1/x/2", nil, "1.2.3.4:1", "1.2.3.4", "1.2.3.4 GET /c/1/x/2"},
		{"GET", "/c/1", nil, "1.2.3.4:1", "1.2.3.4", "1.2.3.4 GET /c/1"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.path, nil)
		r.RemoteAddr = tt.remote
		for i := 0; i+1 < len(tt.hdr); i += 2 {
			r.Header.Set(tt.hdr[i], tt.hdr[i+1])
		}
		if c, k := Identify(r); c != tt.client || k != tt.key {
			t.Errorf("Identify(%s %s %v from %q) = %q, %q; want %q, %q", tt.method, tt.path, tt.hdr, tt.remote, c, k, tt.client, tt.key)
		}
	}
}

func TestQuotaKeyHelpers(t *testing.T) {
	tests := []struct {
		path, auth, apikey string
		key, endpoint      string
	}{
		{"/c/1/r/2/search", "Bearer tok", "", "tok", "GET /search"},
		{"/c/1/r/2", "bearer  tok2 ", "x", "tok2", "GET /"},
		{"/items", "Basic abc", "k9", "k9", "GET /items"},
		{"/items", "", "", "", "GET /items"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", tt.path, nil)
		if tt.auth != "" {
			r.Header.Set("Authorization", tt.auth)
		}
		if tt.apikey != "" {
			r.Header.Set("X-Api-Key", tt.apikey)
		}
		if got := apiKey(r); got != tt.key {
			t.Errorf("apiKey(%q, %q) = %q; want %q", tt.auth, tt.apikey, got, tt.key)
		}
		if got := endpoint(r); got != tt.endpoint {
			t.Errorf("endpoint(%q) = %q; want %q", tt.path, got, tt.endpoint)
		}
	}
}

func FuzzIdentify(f *testing.F) {
	f.Add("/c/17/r/42", "", "", "1.2.3.4:5", 3, 4)
	f.Add("/c//r/", "cid", "idem", "[::1]:1", 0, 0)
	f.Add("/c/1/r/2/x/y", "", "k", "", -1, 9)
	f.Add("/c/"+strings.Repeat("é", 200)+"/r/1", "", "", "", 1, 1)
	f.Add("/x", strings.Repeat("c", 300), strings.Repeat("k", 252), "", 1, 1)
	f.Fuzz(func(t *testing.T, path, clientID, idem, remote string, c, seq int) {
		r := &http.Request{Method: "GET", URL: &url.URL{Path: path}, Header: http.Header{}, RemoteAddr: remote}
		if clientID != "" {
			r.Header.Set("X-Client-Id", clientID)
		}
		if idem != "" {
			r.Header.Set("Idempotency-Key", idem)
		}
		client, key := Identify(r)
		if key == "" {
			t.Errorf("Identify(%q) key is empty", path)
		}
		if rest, ok := strings.CutPrefix(path, "/c/"); ok {
			if parts := strings.SplitN(rest, "/", 4); len(parts) >= 3 && parts[0] != "" && parts[1] == "r" && parts[2] != "" {
				if client != parts[0] || key != parts[0]+"/"+parts[2] {
					t.Errorf("Identify(%q) = %q, %q; want %q, %q", path, client, key, parts[0], parts[0]+"/"+parts[2])
				}
			}
		}
		// Capped, the identities fit in MaxIDBytes, and are unchanged
		// when they already fit.
		cc, ck := identifyCapped(r)
		if len(cc) > MaxIDBytes || len(ck) > MaxIDBytes {
			t.Errorf("identifyCapped(%q) = %d, %d bytes; want <= %d", path, len(cc), len(ck), MaxIDBytes)
		}
		if len(client) <= MaxIDBytes && cc != client || len(key) <= MaxIDBytes && ck != key {
			t.Errorf("identifyCapped(%q) = %q, %q; want Identify's %q, %q when they fit", path, cc, ck, client, key)
		}
		if len(key) > MaxIDBytes && (!strings.HasSuffix(ck, truncMarker) || !strings.HasPrefix(key, strings.TrimSuffix(ck, truncMarker))) {
			t.Errorf("identifyCapped key %q; want a prefix of %q ending in %q", ck, key, truncMarker)
		}
		if (len(client) > MaxIDBytes || len(key) > MaxIDBytes) && tooLong(r, false) == "" {
			t.Errorf("tooLong(%q) = \"\" with a %d-byte client and a %d-byte key", path, len(client), len(key))
		}
		r.URL.Path = RequestPath(c, seq)
		if client, key := Identify(r); client != strconv.Itoa(c) || key != strconv.Itoa(c)+"/"+strconv.Itoa(seq) {
			t.Errorf("Identify(RequestPath(%d, %d)) = %q, %q", c, seq, client, key)
		}
	})
}

// FuzzHandler sends arbitrary requests through a quota server: no panic,
// exactly one record per request, carrying the request's method and path.
func FuzzHandler(f *testing.F) {
	f.Add("GET", "/c/1/r/2", "Bearer x", "", "", "")
	f.Add("POST", "/metrics/x", "", "k", "idem", "c9")
	f.Add("DELETE", "/\x00\xff", "bearer ", "\n", "", "")
	f.Add("GET", "/c/"+strings.Repeat("1", 257)+"/r/2", "", "", "", "")
	f.Add("PUT", "/p", "Bearer "+strings.Repeat("k", 300), "", "", "")
	cfg := Config{Headers: HeadersIETF, Quota: &Quota{Limits: []Limit{{Limit: 1, Per: time.Hour, Key: KeyAPIKey}}},
		Phases: []Phase{{Respond: Respond{Kind: RespondQuota}, RetryAfter: RetryAfter{Form: FormDate, Value: ValueLimiter}}}}
	f.Fuzz(func(t *testing.T, method, path, auth, apikey, idem, clientID string) {
		var buf bytes.Buffer
		rec := timeline.NewRecorder(timeline.NewEncoder(&buf), 4)
		s, err := New(cfg, Options{Recorder: rec})
		if err != nil {
			t.Fatal(err)
		}
		r := &http.Request{Method: method, URL: &url.URL{Path: path}, Header: http.Header{}, RemoteAddr: "1.2.3.4:5", Body: http.NoBody}
		r.Header.Set("Authorization", auth)
		r.Header.Set("X-Api-Key", apikey)
		r.Header.Set("Idempotency-Key", idem)
		r.Header.Set("X-Client-Id", clientID)
		for range 2 {
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		as := decodeAttempts(t, &buf)
		want := 2
		if path == "/metrics" || path == "/healthz" {
			want = 0
		}
		if len(as) != want {
			t.Fatalf("records = %d; want %d", len(as), want)
		}
		for i, a := range as {
			if a.Attempt != i+1 {
				t.Errorf("record %d attempt = %d; want %d", i, a.Attempt, i+1)
			}
			if len(a.Client) > MaxIDBytes || len(a.Key) > MaxIDBytes || tooLong(r, false) != "" && len(a.Path) > MaxIDBytes {
				t.Errorf("record %d holds %d, %d, %d bytes of client, key, path; want at most %d", i, len(a.Client), len(a.Key), len(a.Path), MaxIDBytes)
			}
		}
		if want == 2 && tooLong(r, false) != "" {
			if as[0].Status != 400 || as[1].Status != 400 {
				t.Errorf("statuses = %d, %d; want 400, 400 (an identity longer than %d bytes)", as[0].Status, as[1].Status, MaxIDBytes)
			}
		} else if want == 2 && (as[0].Status != 200 || as[1].Status != 429) {
			t.Errorf("statuses = %d, %d; want 200, 429 (one per hour per key)", as[0].Status, as[1].Status)
		}
	})
}

// FuzzValidate builds configs from arbitrary values: Validate never
// panics, and a config it accepts builds a Server that answers a request.
func FuzzValidate(f *testing.F) {
	f.Add("quota", 503, "", 1.0, "delta", "limiter", int64(0), int64(0), int64(0), "token-bucket", "client", 10.0, 1, "ietf")
	f.Add("mix", 500, "reset", 0.0, "dat", "phase-end", int64(-1), int64(5), int64(-3), "leaky", "ip", -1.0, -2, "x")
	f.Add("status", 429, "", 2.0, "huge", "", int64(1e9), int64(1e9), int64(1e9), "sliding-window", "endpoint", 0.5, 0, "x-ratelimit")
	f.Fuzz(func(t *testing.T, kind string, status int, fault string, weight float64, form, value string,
		forNs, fixedNs, spreadNs int64, alg, key string, limit float64, burst int, headers string) {
		cfg := Config{
			Headers: headers,
			Quota:   &Quota{Limits: []Limit{{Algorithm: alg, Limit: limit, Per: time.Second, Burst: burst, Key: key}}},
			Phases: []Phase{
				{For: time.Duration(forNs), Respond: Respond{Kind: kind, Status: status, Fault: fault,
					Mix: []Weighted{{Status: status, Weight: weight}}},
					RetryAfter: RetryAfter{Form: form, Value: value, Fixed: time.Duration(fixedNs), Spread: time.Duration(spreadNs)}},
				{},
			},
		}
		err := cfg.Validate()
		s, nerr := New(cfg, Options{})
		if (err == nil) != (nerr == nil) {
			t.Fatalf("Validate() = %v but New() = %v", err, nerr)
		}
		if err != nil || kind == RespondFault || forNs > int64(time.Hour) {
			return
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "/c/1/r/1", nil))
		if w.Code < 200 || w.Code > 599 {
			t.Errorf("status = %d", w.Code)
		}
	})
}
