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
