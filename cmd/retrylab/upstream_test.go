package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/scenarios"
)

// app is a stand-in application: it calls its API at base and retries
// 5xx answers up to 5 attempts (no wait: its timing is not what the tests
// look at), and returns the bodies of its successful calls.
func app(t *testing.T, base string, paths ...string) []string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	var bodies []string
	for _, p := range paths {
		for try := 1; try <= 5; try++ {
			resp, err := c.Get(base + p)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 500 {
				bodies = append(bodies, fmt.Sprint(resp.StatusCode, " ", string(b)))
				break
			}
		}
	}
	return bodies
}

func writeScenario(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkStatuses is the verdict's check statuses and its figures, as JSON.
func checkStatuses(t *testing.T, record string) (code int, summary string, stdout string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "v.json")
	code, stdout, _ = runCmd(t, "analyze", record, "--json", out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("analyze %s: %v\n%s", record, err, stdout)
	}
	var v struct {
		Status string `json:"verdict"`
		Checks []struct{ ID, Status string }
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return code, fmt.Sprint(v.Status, v.Checks), stdout
}

// TestServeUpstreamAnalyzesLikeTheStub: the same application run against
// a mix of injected 503s and answers gets the upstream's real bodies
// through `serve --upstream`, and its timeline gets the same verdict as
// the run against the stub alone (the same seed draws the same 503s).
func TestServeUpstreamAnalyzesLikeTheStub(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
	}))
	defer up.Close()
	paths := []string{"/v1/users/1", "/v1/users/2", "/v1/orders/7", "/v1/users/1", "/v1/orders/8", "/v1/orders/9"}

	verdicts := map[string]string{}
	for _, tc := range []struct{ name, mix, flag string }{
		{"stub", "{200: 1, 503: 1}", ""},
		{"proxied", "{passthrough: 1, 503: 1}", up.URL},
	} {
		sc := writeScenario(t, "name: app\nserver:\n  upstream: http://127.0.0.1:1\n  phases:\n    - respond: {mix: "+tc.mix+"}\n")
		if tc.flag == "" {
			sc = writeScenario(t, "name: app\nserver:\n  phases:\n    - respond: {mix: "+tc.mix+"}\n")
		}
		record := filepath.Join(t.TempDir(), "t.ndjson")
		args := []string{"--addr", "127.0.0.1:0", "--scenario", sc, "--record", record, "--seed", "3"}
		if tc.flag != "" {
			args = append(args, "--upstream", tc.flag) // replaces the file's dead upstream
		}
		base, stop := serveUntilURL(t, args...)
		bodies := app(t, base, paths...)
		if err := stop(); err != nil {
			t.Fatalf("%s: serve: %v", tc.name, err)
		}
		for i, b := range bodies {
			want := "200 200 OK\n"
			if tc.flag != "" {
				want = fmt.Sprintf(`200 {"path":%q}`, paths[i])
			}
			if b != want {
				t.Errorf("%s: body %d = %q; want %q", tc.name, i, b, want)
			}
		}
		if len(bodies) != len(paths) {
			t.Errorf("%s: %d calls succeeded; want %d", tc.name, len(bodies), len(paths))
		}
		_, v, _ := checkStatuses(t, record)
		verdicts[tc.name] = v
	}
	if verdicts["stub"] != verdicts["proxied"] {
		t.Errorf("verdicts differ:\n stub    %s\n proxied %s", verdicts["stub"], verdicts["proxied"])
	}
	if !strings.Contains(verdicts["stub"], "{instant-retry fail}") {
		t.Errorf("verdict %s; want instant-retry to fail for an application that retries at once (the control)", verdicts["stub"])
	}
}

// TestServeUpstreamDownIsNotTheClients: an upstream that closes every
// connection gets the application 502s, recorded as upstream failures;
// the verdict is INCONCLUSIVE (exit 3) and blames the application for
// nothing, although it retried those 502s at once.
func TestServeUpstreamDownIsNotTheClients(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
	}))
	defer up.Close()
	record := filepath.Join(t.TempDir(), "t.ndjson")
	base, stop := serveUntilURL(t, "--addr", "127.0.0.1:0", "--scenario", writeScenario(t, "name: down\nserver:\n  phases:\n    - respond: ok\n"), "--upstream", up.URL, "--record", record)
	if got := app(t, base, "/v1/users/1", "/v1/users/2"); len(got) != 0 {
		t.Errorf("bodies %q; want none (the upstream is down)", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(record)
	if n := strings.Count(string(b), `"status":502`); n != 10 || strings.Count(string(b), `"upstream":"failed"`) != 10 {
		t.Errorf("recording holds %d 502s; want 10, each upstream failed:\n%s", n, b)
	}
	code, v, stdout := checkStatuses(t, record)
	if code != exitError || strings.Contains(v, "fail}") || !strings.HasPrefix(v, "inconclusive") {
		t.Errorf("analyze: exit %d, verdict %s; want exit 3, inconclusive, no check failed\n%s", code, v, stdout)
	}
	if !strings.Contains(stdout, "upstream that gave no response") {
		t.Errorf("stdout does not say the upstream failed:\n%s", stdout)
	}
}

// TestRunRefusesAnUpstream: a simulated fleet never loads a real API.
func TestRunRefusesAnUpstream(t *testing.T) {
	sc := writeScenario(t, "name: up\nserver:\n  upstream: http://127.0.0.1:1\n  phases:\n    - respond: passthrough\n")
	code, _, stderr := runCmd(t, "run", sc, "--out", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, "a simulated fleet does not run against an upstream") {
		t.Errorf("run with server.upstream: exit %d, stderr %q; want 2 and why", code, stderr)
	}
}

// TestReadmeAppScenario: the end-to-end scenario of docs/end-to-end.md
// (moved out of the README) loads, and
// forwards to its upstream with a passthrough share.
func TestReadmeAppScenario(t *testing.T) {
	readme, err := os.ReadFile("../../docs/end-to-end.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "```yaml\nname: app-outage\n")
	if !ok {
		t.Fatal("docs/end-to-end.md has no app-outage scenario")
	}
	block, _, _ := strings.Cut(after, "```")
	sc, err := scenarios.Parse("docs/end-to-end.md", []byte("name: app-outage\n"+block))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Server.Upstream != "https://api.staging.example.com" || len(sc.Server.Phases) != 3 || !sc.Server.Phases[1].Respond.Mix[0].Passthrough {
		t.Errorf("server %+v; want the upstream and a passthrough mix", sc.Server)
	}
}

// verdictFigures is the verdict's figures of a recording: attempts,
// logical requests, retries.
func verdictFigures(t *testing.T, record string) (attempts, requests, retries int64) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "v.json")
	runCmd(t, "analyze", record, "--json", out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Figures struct{ Attempts, Requests, Retries int64 }
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v.Figures.Attempts, v.Figures.Requests, v.Figures.Retries
}

// TestServeIdentityOfRetries: behind `serve --upstream`, an application
// that makes a fresh Idempotency-Key for every attempt of a POST has its
// retries seen as retries (its attempts share a key: client, method, path
// and body), not as new logical requests; one that keeps its key, and
// GETs, are paired as before.
func TestServeIdentityOfRetries(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	defer up.Close()
	sc := writeScenario(t, "name: ids\nserver:\n  upstream: http://127.0.0.1:1\n  phases:\n    - respond: {mix: {passthrough: 1, 503: 1}}\n")
	const orders = 8
	for _, tc := range []struct {
		name   string
		method string
		key    func(order, try int) string // "" for none
		fresh  bool                        // a digest per attempt
	}{
		{"fresh key per attempt", "POST", func(o, try int) string { return fmt.Sprint("k-", o, "-", try) }, true},
		{"one key per order", "POST", func(o, _ int) string { return fmt.Sprint("k-", o) }, false},
		{"GET", "GET", func(int, int) string { return "" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			record := filepath.Join(t.TempDir(), "t.ndjson")
			base, stop := serveUntilURL(t, "--addr", "127.0.0.1:0", "--scenario", sc, "--upstream", up.URL, "--record", record, "--seed", "5")
			c := &http.Client{Timeout: 10 * time.Second}
			sent := 0
			for o := range orders {
				for try := 1; try <= 8; try++ { // retries 503s at once, at most 8 attempts
					// POSTs share two paths, their bodies differ; GETs
					// have a path each.
					var body io.Reader
					path := fmt.Sprintf("/v1/orders/%d", o)
					if tc.method == "POST" {
						body = strings.NewReader(fmt.Sprintf(`{"order":%d}`, o))
						path = fmt.Sprintf("/v1/carts/%d/orders", o%2)
					}
					req, _ := http.NewRequest(tc.method, base+path, body)
					if k := tc.key(o, try); k != "" {
						req.Header.Set("Idempotency-Key", k)
					}
					resp, err := c.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					sent++
					if resp.StatusCode < 500 {
						break
					}
				}
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			attempts, requests, retries := verdictFigures(t, record)
			if attempts != int64(sent) || requests != orders || retries != attempts-orders || retries == 0 {
				t.Errorf("%d attempts, %d requests, %d retries; want %d attempts, %d requests, the %d others retries (seed 5 draws some 503s)",
					attempts, requests, retries, sent, orders, sent-orders)
			}
			_, as := readTimeline(t, record)
			keys := map[string]map[string]bool{} // key → idem digests
			for _, a := range as {
				if keys[a.Key] == nil {
					keys[a.Key] = map[string]bool{}
				}
				keys[a.Key][a.IdemKey] = true
				if strings.Contains(a.Key, "k-") {
					t.Errorf("key %q holds the Idempotency-Key", a.Key)
				}
			}
			if len(keys) != orders {
				t.Errorf("%d keys; want one per order (%d): %v", len(keys), orders, keys)
			}
			digests := 0
			for _, d := range keys {
				digests += len(d)
			}
			if want := map[bool]int{true: sent, false: orders}[tc.fresh]; digests != want {
				t.Errorf("%d Idempotency-Key digests over the keys; want %d (the evidence of each attempt's key)", digests, want)
			}
		})
	}
}
