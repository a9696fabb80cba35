package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	metaRun   = `{"type":"meta","format":1,"recorder":"run","scenario":"fixture","seed":1,"start":"2026-11-30T23:00:00Z","scheduled":2,"phases":[{"name":"outage","start":0,"end":2000000000,"respond":"status 503","retry_after":"delta 1s"},{"name":"up","start":2000000000,"respond":"ok"}]}`
	attempt1  = `{"type":"attempt","client":"1","key":"1/0","attempt":1,"method":"GET","path":"/c/1/r/0","at":1000000,"done":1100000,"status":503,"phase":"outage","retry_after":"2","not_before":2001100000}`
	attempt2  = `{"type":"attempt","client":"1","key":"1/0","attempt":2,"method":"GET","path":"/c/1/r/0","at":2101100000,"done":2101200000,"status":200,"phase":"up"}`
	outcome1  = `{"type":"outcome","client":"1","key":"1/0","scheduled":0,"start":0,"end":2101300000,"result":"ok","status":200,"attempts":2}`
	attempt3  = `{"type":"attempt","client":"2","key":"2/0","attempt":1,"method":"GET","path":"/c/2/r/0","at":3000000,"done":3100000,"status":503,"phase":"outage","retry_after":"2","not_before":2003100000}`
	attempt4  = `{"type":"attempt","client":"2","key":"2/0","attempt":2,"method":"GET","path":"/c/2/r/0","at":2103100000,"done":2103200000,"status":200,"phase":"up"}`
	outcome2  = `{"type":"outcome","client":"2","key":"2/0","scheduled":0,"start":0,"end":2103300000,"result":"ok","status":200,"attempts":2}`
	endRecord = `{"type":"end","at":2103400000,"reason":"completed"}`
)

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// TestAnalyzeVerdictExitCodes: analyze's exit status follows the verdict:
// a faithful run passes (0); a killed, partial or interrupted one is
// INCONCLUSIVE (3) with its reason on stdout and in the JSON, never
// "pass": true; a malformed timeline is bad input (2) naming file:line.
func TestAnalyzeVerdictExitCodes(t *testing.T) {
	whole := []string{metaRun, attempt1, attempt3, attempt2, outcome1, attempt4, outcome2, endRecord}
	tests := []struct {
		name     string
		timeline string
		code     int
		want     string // in stdout for 0/3, in stderr for 2
	}{
		{"faithful run", lines(whole...), exitOK, "verdict: PASS"},
		{"killed: no end record (SIGKILL)", lines(whole[:7]...), exitError, "no end record"},
		{"killed early: one outcome of two", lines(whole[:5]...), exitError, "1 of 2 scheduled logical requests have an outcome"},
		{"interrupted", lines(append(whole[:7:7], `{"type":"end","at":2103400000,"reason":"interrupted","signal":"interrupt","in_flight":1}`)...), exitError, "interrupted by interrupt"},
		{"meta only", lines(metaRun), exitError, "no attempt"},
		{"meta not first (line 3)", lines(attempt1, attempt3, metaRun), exitUsage, "t.ndjson:3: the meta record must be the first record"},
		{"two metas", lines(metaRun, attempt1, metaRun), exitUsage, "t.ndjson:3: a second meta record"},
		{"unknown record type", lines(metaRun, `{"type":"attempts","client":"1"}`), exitUsage, "t.ndjson:2: unknown record type"},
		{"answered before it arrived", lines(metaRun, strings.Replace(attempt1, `"done":1100000`, `"done":1`, 1)), exitUsage, "t.ndjson:2: attempt answered"},
		{"negative time", lines(metaRun, strings.Replace(attempt1, `"at":1000000`, `"at":-1000000`, 1)), exitUsage, "t.ndjson:2: attempt arrives at -1000000 ns"},
		{"records after the end", lines(append(whole[:8:8], attempt1)...), exitUsage, "t.ndjson:9: a record (attempt) after the end record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "t.ndjson", tt.timeline)
			js := filepath.Join(filepath.Dir(path), "v.json")
			code, out, errOut := runCmd(t, "analyze", path, "--json", js)
			if code != tt.code {
				t.Fatalf("exit %d; want %d\n%s%s", code, tt.code, out, errOut)
			}
			where := out
			if code == exitUsage {
				where = errOut
			}
			if !strings.Contains(where, tt.want) {
				t.Errorf("output lacks %q:\nstdout:\n%s\nstderr:\n%s", tt.want, out, errOut)
			}
			if code == exitUsage {
				return
			}
			b, err := os.ReadFile(js)
			if err != nil {
				t.Fatal(err)
			}
			var v struct {
				Verdict string `json:"verdict"`
				Pass    bool   `json:"pass"`
			}
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			if v.Pass != (code == exitOK) || (code == exitError && v.Verdict != "inconclusive") {
				t.Errorf("JSON verdict %q pass %v; want pass only for exit 0, inconclusive for exit 3", v.Verdict, v.Pass)
			}
			if code == exitError && !strings.Contains(errOut, "INCONCLUSIVE") {
				t.Errorf("stderr does not say why the exit status is 3: %q", errOut)
			}
		})
	}
}

// TestRequireFlag: --require turns a required check's skip into
// INCONCLUSIVE; an unknown id is bad input naming the flag.
func TestRequireFlag(t *testing.T) {
	path := writeFile(t, "t.ndjson", lines(metaRun, attempt1, attempt3, attempt2, outcome1, attempt4, outcome2, endRecord))
	if code, out, _ := runCmd(t, "analyze", path, "--require", "idempotency"); code != exitError || !strings.Contains(out, "required check idempotency judged nothing") {
		t.Errorf("--require idempotency: exit %d; want 3 naming the check\n%s", code, out)
	}
	if code, _, errOut := runCmd(t, "analyze", path, "--require", "wavez"); code != exitUsage || !strings.Contains(errOut, "--require") {
		t.Errorf("--require wavez: exit %d, %q; want 2 naming the flag", code, errOut)
	}
}
