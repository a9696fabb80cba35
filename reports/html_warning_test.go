package reports

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/retrylab/retrylab/analyzer"
)

// TestWarningNotRepeated: a warning whose message begins with its id's
// words is not shown as "id: the same words ...".
func TestWarningNotRepeated(t *testing.T) {
	var buf bytes.Buffer
	if _, err := (synth{clients: 5, requests: 1, seed: 1}).write(&buf); err != nil {
		t.Fatal(err)
	}
	v := testVerdict()
	v.Warnings = []analyzer.Warning{
		{ID: analyzer.WarnServerSync, Message: "server-induced synchronization: 296 retries waited exactly as Retry-After said", Remedy: "spread Retry-After"},
		{ID: analyzer.WarnNoMeta, Message: "the timeline has no meta record"},
	}
	rep, err := WriteFrom(t.TempDir(), &buf, v, Options{DPI: testDPI})
	if err != nil {
		t.Fatal(err)
	}
	html := readReport(t, rep.HTML)
	text := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(html, "")
	if strings.Contains(text, "server-induced-synchronization: server-induced synchronization") {
		t.Errorf("report.html repeats the warning's id before its message")
	}
	for _, want := range []string{
		`id="warning-server-induced-synchronization"><strong>server-induced synchronization</strong>: 296 retries`,
		`id="warning-no-meta"><strong>no-meta</strong>: the timeline has no meta record`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}
