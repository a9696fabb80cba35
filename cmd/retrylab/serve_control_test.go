package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/stubserver"
)

// ctlCall sends one request to serve's control API and returns the status
// and the body.
func ctlCall(t *testing.T, c *http.Client, method, url, contentType, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// `retrylab serve -o t.ndjson` answers its control API on loopback: the
// verdict is what `analyze --json` writes for the recording the API
// returns, a reset moves on to t.2.ndjson (never over an existing file),
// a bad posted scenario is refused with its place, and every recording
// ends whole, without a control request in it.
func TestServeControlAPI(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "t.ndjson")
	if err := os.WriteFile(filepath.Join(dir, "t.3.ndjson"), []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base, stop := serveUntilURL(t, "--addr", "127.0.0.1:0", "--scenario", "outage-date", "-o", out)
	c := &http.Client{Timeout: 10 * time.Second}
	for i := range 4 {
		if code, _ := ctlCall(t, c, "GET", base+"/c/"+string(rune('0'+i))+"/r/0", "", ""); code != 503 && code != 200 {
			t.Fatalf("client request: %d", code)
		}
	}

	if _, body := ctlCall(t, c, "GET", base+"/_retrylab/status", "", ""); !strings.Contains(string(body), `"output":`+strconv.Quote(out)) {
		t.Errorf("status %s; want the output %s", body, out)
	}
	code, rec := ctlCall(t, c, "GET", base+"/_retrylab/recording", "", "")
	if code != 200 {
		t.Fatalf("GET recording: %d %s", code, rec)
	}
	code, verdict := ctlCall(t, c, "GET", base+"/_retrylab/verdict", "", "")
	if code != 200 {
		t.Fatalf("GET verdict: %d %s", code, verdict)
	}
	snap, vjson := filepath.Join(dir, "snap.ndjson"), filepath.Join(dir, "v.json")
	if err := os.WriteFile(snap, rec, 0o644); err != nil {
		t.Fatal(err)
	}
	var so, se bytes.Buffer
	run(t.Context(), []string{"analyze", snap, "--json", vjson}, &so, &se)
	want, err := os.ReadFile(vjson)
	if err != nil {
		t.Fatalf("analyze --json wrote nothing: %v (%s)", err, se.String())
	}
	// Each call ends the recording as of its own now: the span (time zero
	// to the end record) is all that may differ between the two.
	// runner's TestControlStatusRecordingVerdict compares them whole on a
	// fixed clock.
	span := regexp.MustCompile(`"span": [0-9]+`)
	if !bytes.Equal(span.ReplaceAll(verdict, nil), span.ReplaceAll(want, nil)) {
		t.Errorf("GET verdict:\n%s\nwant what analyze --json writes for GET recording:\n%s", verdict, want)
	}

	code, body := ctlCall(t, c, "POST", base+"/_retrylab/reset?scenario=outage-bare", "", "")
	if code != 200 || string(body) != `{"recording":2,"scenario":"outage-bare"}`+"\n" {
		t.Errorf("reset: %d %s", code, body)
	}
	code, body = ctlCall(t, c, "POST", base+"/_retrylab/reset", "application/yaml", "name: x\nserver:\n  phases:\n    - name: a\n      respond: {statuz: 503}\n")
	if code != 400 || !strings.Contains(string(body), "posted.yaml:5:") {
		t.Errorf("reset with bad YAML: %d %s; want 400 naming posted.yaml:5:", code, body)
	}
	if code, _ := ctlCall(t, c, "GET", base+"/c/9/r/0", "", ""); code != 503 {
		t.Errorf("outage-bare answered %d; want 503", code)
	}
	code, body = ctlCall(t, c, "POST", base+"/_retrylab/reset", "", "")
	if code != 409 || !strings.Contains(string(body), "t.3.ndjson exists") {
		t.Errorf("reset onto an existing t.3.ndjson: %d %s; want 409 naming it", code, body)
	}
	var st struct {
		Scenario  string
		Recording int
		Requests  int
		Output    string
	}
	code, body = ctlCall(t, c, "GET", base+"/_retrylab/", "", "")
	if err := json.Unmarshal(body, &st); err != nil || code != 200 || st.Scenario != "outage-bare" || st.Recording != 2 || st.Requests != 1 || st.Output != filepath.Join(dir, "t.2.ndjson") {
		t.Errorf("status: %d %s; want outage-bare's recording 2 going on with 1 request", code, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	for path, want := range map[string]struct {
		scenario string
		attempts int
	}{out: {"outage-date", 4}, filepath.Join(dir, "t.2.ndjson"): {"outage-bare", 1}} {
		meta, as := readTimeline(t, path)
		if meta.Scenario != want.scenario || len(as) != want.attempts {
			t.Errorf("%s: scenario %q, %d attempts; want %q, %d", path, meta.Scenario, len(as), want.scenario, want.attempts)
		}
		for _, a := range as {
			if strings.HasPrefix(a.Path, "/_retrylab") {
				t.Errorf("%s recorded a control request: %+v", path, a)
			}
		}
		if b, _ := os.ReadFile(path); !bytes.Contains(b, []byte(`"type":"end"`)) {
			t.Errorf("%s has no end record", path)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "t.3.ndjson")); string(b) != "keep\n" {
		t.Errorf("t.3.ndjson was overwritten: %q", b)
	}
}

// A reset's scenario gets serve's --redis and --upstream, and cannot
// point serve at an upstream or a Redis it was not started with.
func TestResetConfig(t *testing.T) {
	parse := func(src string) *scenarios.Scenario {
		t.Helper()
		sc, err := scenarios.Parse("posted.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	plain := parse("name: plain\nserver: {phases: [{name: a, respond: ok}]}\n")
	proxied := parse("name: proxied\nserver: {upstream: 'http://10.0.0.1:80', phases: [{name: a, respond: ok}]}\n")
	quota := parse("name: q\nserver: {quota: {rate: 10/s, burst: 10}, phases: [{name: a, respond: quota}]}\n")
	redisQuota := parse("name: q\nserver: {quota: {rate: 10/s, burst: 10, backend: 'redis://127.0.0.1:6379/0'}, phases: [{name: a, respond: quota}]}\n")
	redisFlag := serveOptions{redis: "redis://127.0.0.1:6379/1", redisSet: true}
	for _, tc := range []struct {
		what     string
		sc       *scenarios.Scenario
		upstream string
		o        serveOptions
		redis    bool
		want     string // "" for no error
		check    func(stubserver.Config) bool
	}{
		{"plain", plain, "", serveOptions{}, false, "", func(c stubserver.Config) bool { return c.Upstream == "" }},
		{"--upstream applies", plain, "http://127.0.0.1:9", serveOptions{upstream: "http://127.0.0.1:9"}, false, "", func(c stubserver.Config) bool { return c.Upstream == "http://127.0.0.1:9" }},
		{"an upstream of its own", proxied, "", serveOptions{}, false, "cannot point serve at an upstream", nil},
		{"the upstream serve has", proxied, "http://10.0.0.1:80", serveOptions{}, false, "", nil},
		{"--upstream wins", proxied, "http://127.0.0.1:9", serveOptions{upstream: "http://127.0.0.1:9"}, false, "", func(c stubserver.Config) bool { return c.Upstream == "http://127.0.0.1:9" }},
		{"--redis, no quota", plain, "", redisFlag, true, "no quota to keep in Redis", nil},
		{"--redis, same scenario", quota, "", redisFlag, true, "", func(c stubserver.Config) bool { return c.Quota.Backend == redisFlag.redis }},
		{"--redis, another scenario", quota, "", redisFlag, true, `under scenario "first"`, nil},
		{"a Redis serve has not", redisQuota, "", serveOptions{}, false, "cannot start a backend", nil},
		{"a memory quota on a Redis serve", quota, "", serveOptions{}, true, `under scenario "q"`, nil},
	} {
		name := "q" // the scenario serve started with
		if tc.what == "--redis, another scenario" {
			name = "first"
		}
		cfg, _, err := resetConfig(tc.sc, name, tc.upstream, tc.o, tc.redis)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.what, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v; want one containing %q", tc.what, err, tc.want)
		case err == nil && tc.check != nil && !tc.check(cfg):
			t.Errorf("%s: config %+v", tc.what, cfg)
		}
	}
}

// `serve --no-control` mounts no control API: /_retrylab/ is a client's
// path like any other, answered by the phase and recorded.
func TestServeNoControl(t *testing.T) {
	out := filepath.Join(t.TempDir(), "t.ndjson")
	base, stop := serveUntilURL(t, "--addr", "127.0.0.1:0", "--scenario", "outage-date", "-o", out, "--no-control")
	c := &http.Client{Timeout: 10 * time.Second}
	code, body := ctlCall(t, c, "GET", base+"/_retrylab/status", "", "")
	if code == http.StatusOK && bytes.Contains(body, []byte(`"recording"`)) {
		t.Errorf("GET /_retrylab/status = %d %s; want the phase's answer, no control API", code, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	_, as := readTimeline(t, out)
	if len(as) != 1 || as[0].Path != "/_retrylab/status" {
		t.Errorf("recorded %+v; want the one request to /_retrylab/status, a client's", as)
	}
}
