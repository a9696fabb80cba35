package stubserver

import (
	"bytes"
	"io"
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
		{"GET", "/c/17/r/42", []string{"X-Client-Id", "other", "Idempotency-Key", "k"}, "", "17", "17/42"},                    // the path wins
		{"POST", "/pay", []string{"X-Client-Id", "alice", "Idempotency-Key", "k1"}, "10.0.0.1:5", "alice", "alice POST /pay"}, // the key is evidence, not identity
		{"POST", "/pay", []string{"X-Client-Id", "alice", RequestHeader, "order-7"}, "10.0.0.1:5", "alice", "alice req:order-7"},
		{"GET", "/c/1/r/2", []string{RequestHeader, "order-7"}, "10.0.0.1:5", "1", "1/2"}, // the path wins
		{"GET", "/pay?page=2&_=1712", nil, "10.0.0.1:5", "10.0.0.1", "10.0.0.1 GET /pay"}, // no query
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
		if c := IdentifyClient(r); c != tt.client {
			t.Errorf("IdentifyClient(%s %s %v from %q) = %q; want %q, Identify's", tt.method, tt.path, tt.hdr, tt.remote, c, tt.client)
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
		if got := APIKey(r); got != tt.key {
			t.Errorf("APIKey(%q, %q) = %q; want %q", tt.auth, tt.apikey, got, tt.key)
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
		if c := IdentifyClient(r); c != client {
			t.Errorf("IdentifyClient(%q) = %q; want Identify's %q", path, c, client)
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

// TestIdentifyWrites: a write is keyed by client, method, path and a
// digest of its body, never by its Idempotency-Key; the body reaches the
// handler whole; a body past BodyDigestBytes is told apart by its length.
func TestIdentifyWrites(t *testing.T) {
	key := func(method, body string, chunked bool, hdr ...string) string {
		t.Helper()
		var rd io.Reader = strings.NewReader(body)
		if chunked {
			rd = io.MultiReader(rd) // no declared length
		}
		r := httptest.NewRequest(method, "/v1/orders", rd)
		if chunked {
			r.ContentLength = -1
		}
		r.RemoteAddr = "10.0.0.1:5"
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		// Each reads the body and puts it back: the same digest twice.
		c2, k2 := identifyCapped(r)
		c, k := Identify(r)
		if c != "10.0.0.1" || c2 != c || k2 != k {
			t.Errorf("Identify = %q, %q, identifyCapped %q, %q; want client 10.0.0.1 and one key", c, k, c2, k2)
		}
		if b, err := io.ReadAll(r.Body); string(b) != body || err != nil || r.Body.Close() != nil {
			t.Errorf("%s body after Identify: %d bytes, %v; want the %d bytes sent", method, len(b), err, len(body))
		}
		return k
	}
	order := `{"item":"book","qty":1}`
	k1 := key("POST", order, false, "Idempotency-Key", "a")
	if !strings.HasPrefix(k1, "10.0.0.1 POST /v1/orders body:") || len(k1) != len("10.0.0.1 POST /v1/orders body:")+16 {
		t.Errorf("POST key %q; want client, method, path and a 16-digit body digest", k1)
	}
	if k := key("POST", order, false, "Idempotency-Key", "b"); k != k1 {
		t.Errorf("a fresh Idempotency-Key gave key %q; want %q (one logical request)", k, k1)
	}
	if k := key("POST", order, true); k != k1 {
		t.Errorf("the same body chunked gave key %q; want %q", k, k1)
	}
	if k := key("POST", `{"item":"pen","qty":1}`, false); k == k1 {
		t.Errorf("another body gave the same key %q", k)
	}
	if k := key("PUT", order, false); k == k1 || !strings.HasPrefix(k, "10.0.0.1 PUT /v1/orders body:") {
		t.Errorf("PUT key %q; want its own, with a body digest", k)
	}
	for _, m := range []string{"GET", "HEAD", "OPTIONS"} {
		if k := key(m, order, false); k != "10.0.0.1 "+m+" /v1/orders" {
			t.Errorf("%s key %q; want no body digest", m, k)
		}
	}
	if k := key("DELETE", "", false); k != "10.0.0.1 DELETE /v1/orders" {
		t.Errorf("DELETE without a body: key %q; want no digest", k)
	}
	// Past the bound: the first BodyDigestBytes and the declared length.
	big := strings.Repeat("x", BodyDigestBytes)
	exact, longer, longer2 := key("POST", big, false), key("POST", big+"y", false), key("POST", big+"yz", false)
	if exact == longer || longer == longer2 {
		t.Errorf("bodies of %d, %d and %d bytes with one prefix: keys %q, %q, %q; want three", len(big), len(big)+1, len(big)+2, exact, longer, longer2)
	}
	if a, b := key("POST", big+"y", false), key("POST", big+"z", false); a != b {
		t.Errorf("bodies differing past the bound with one length: %q, %q; want one key", a, b)
	}
	if a, b := key("POST", big+"y", true), key("POST", big+"yz", true); a != b || a == longer {
		t.Errorf("chunked bodies past the bound: %q, %q; want one key (length unknown), not %q", a, b, longer)
	}
}

// FuzzBodyDigest: any write body gives one key for one body, passes
// through Identify intact, and keeps the key within its bound.
func FuzzBodyDigest(f *testing.F) {
	f.Add("POST", `{"a":1}`, false, int64(0))
	f.Add("PATCH", "", true, int64(0))
	f.Add("PUT", strings.Repeat("z", BodyDigestBytes+3), false, int64(0))
	f.Add("DELETE", "x", true, int64(BodyDigestBytes))
	f.Fuzz(func(t *testing.T, method, body string, chunked bool, pad int64) {
		if pad > 0 {
			body += strings.Repeat("p", int(pad%(2*BodyDigestBytes)))
		}
		mk := func() *http.Request {
			r := &http.Request{Method: method, URL: &url.URL{Path: "/o"}, Header: http.Header{}, RemoteAddr: "1.2.3.4:5",
				Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}
			if chunked {
				r.ContentLength = -1
			}
			return r
		}
		r1, r2 := mk(), mk()
		_, k1 := Identify(r1)
		_, k2 := Identify(r2)
		if k1 != k2 {
			t.Errorf("one body, two keys: %q, %q", k1, k2)
		}
		if b, err := io.ReadAll(r1.Body); string(b) != body || err != nil {
			t.Errorf("body after Identify: %d bytes, %v; want %d", len(b), err, len(body))
		}
		if tooLong(r2, false) == "" && len(k1) > MaxIDBytes {
			t.Errorf("key of %d bytes passed tooLong", len(k1))
		}
	})
}
