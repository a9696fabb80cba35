package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/retrylab/retrylab/runner"
)

// The bars draw requests done of total and the attempt, 429 and 503 counts
// when stderr is a terminal, and nothing otherwise.
func TestProgressBars(t *testing.T) {
	var buf bytes.Buffer
	b := newProgressBars(&env{stderr: &buf, tty: true}, false, "outage · retrylab")
	b.update(runner.Progress{Done: 7, Total: 10, Attempts: 31, Throttled429: 4, Unavailable503: 12})
	b.finish()
	out := buf.String()
	for _, want := range []string{"outage · retrylab", "/10 requests", "attempts 31 · 429 4 · 503 12", "ETA"} {
		if !strings.Contains(out, want) {
			t.Errorf("bars %q; want %q in them", out, want)
		}
	}

	buf.Reset()
	for _, e := range []*env{{stderr: &buf, tty: false}, {stderr: &buf, tty: true}} {
		quiet := e.tty // the second case is --quiet on a terminal
		b := newProgressBars(e, quiet, "x")
		b.update(runner.Progress{Done: 1, Total: 2})
		b.finish()
	}
	if buf.Len() != 0 {
		t.Errorf("bars drawn %q without a terminal or with --quiet; want nothing", buf.String())
	}
}
