package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// TestRunSpreadFlagErrors: bad --target, --shard and --epoch values are
// bad input naming the flag, found before anything runs.
func TestRunSpreadFlagErrors(t *testing.T) {
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	ahead := time.Now().Add(3 * time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--target", "http://10.1.2.3:8080"}, "--target http://10.1.2.3:8080 is not a loopback address; pass --allow-remote"},
		{[]string{"--target", "http://stub.example"}, "is not a loopback address"},
		{[]string{"--allow-remote"}, "--allow-remote needs --target"},
		{[]string{"--target", "127.0.0.1:8080"}, "--target: runner: target \"127.0.0.1:8080\": want an http:// or https:// URL"},
		{[]string{"--target", "http://127.0.0.1:1/api"}, "want no path"},
		{[]string{"--target", "http://127.0.0.1:1", "--json", "v.json"}, "--json with --target: this run's timeline holds no attempt"},
		{[]string{"--target", "http://127.0.0.1:1", "--check", "waves"}, "--check with --target"},
		{[]string{"--shard", "3/3"}, `invalid argument "3/3" for "--shard"`},
		{[]string{"--shard", "1"}, "want i/n"},
		{[]string{"--shard", "5/8", "--clients", "4"}, "shard 5/8 of 4 clients has none"},
		{[]string{"--epoch", "tomorrow"}, `invalid argument "tomorrow" for "--epoch"`},
		{[]string{"--epoch", past}, "--epoch " + past + ": runner: the epoch has passed"},
		{[]string{"--epoch", ahead}, "more than 1h0m0s"},
		{[]string{"--shard", "0/2", "--subject", "exec:true"}, "an exec subject's fleet starts every process"},
	} {
		out := t.TempDir()
		args := append([]string{"run", "testdata/tiny-outage.yaml", "--quiet", "--out", out}, c.args...)
		code, _, stderr := runCmd(t, args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("run %s: exit %d, stderr %q; want %d containing %q", strings.Join(c.args, " "), code, stderr, exitUsage, c.want)
		}
		if ents, _ := os.ReadDir(out); len(ents) != 0 {
			t.Errorf("run %s created %d entries in --out; want none", strings.Join(c.args, " "), len(ents))
		}
	}
}

// TestServeEpoch: serve --epoch starts the phases at the epoch: its
// recording names it as time zero and the host, and a request sent before
// it waits for it; --epoch with --start is refused.
func TestServeEpoch(t *testing.T) {
	epoch := time.Now().Add(700 * time.Millisecond).UTC().Truncate(time.Millisecond)
	e := epoch.Format(time.RFC3339Nano)
	code, _, stderr := runCmd(t, "serve", "--addr", "127.0.0.1:0", "--epoch", e, "--start", "now")
	if code != exitUsage || !strings.Contains(stderr, "--epoch and --start are exclusive") {
		t.Errorf("serve --epoch --start: exit %d, %q; want %d", code, stderr, exitUsage)
	}
	record := filepath.Join(t.TempDir(), "t.ndjson")
	base, stop := serveUntilURL(t, "--addr", "127.0.0.1:0", "--record", record, "--epoch", e)
	resp, err := http.Get(base + "/c/1/r/0")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	answered := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if answered.Before(epoch) {
		t.Errorf("a request before the epoch was answered %v before it; want it held until the epoch", epoch.Sub(answered))
	}
	meta, as := readTimeline(t, record)
	if !meta.Start.Equal(epoch) || !meta.Epoch.Equal(epoch) || meta.Host == "" {
		t.Errorf("meta start %v epoch %v host %q; want the epoch %v twice and the host", meta.Start, meta.Epoch, meta.Host, epoch)
	}
	if len(as) != 1 || as[0].At < 0 || as[0].At > int64(200*time.Millisecond) {
		t.Errorf("attempts %+v; want the early one, at the epoch", as)
	}
}

// mergeFile writes a timeline of meta and recs (Attempt, Outcome or *End).
func mergeFile(t *testing.T, dir, name string, meta *timeline.Meta, recs ...any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := timeline.NewEncoder(&buf)
	enc.EncodeMeta(meta)
	for _, r := range recs {
		switch r := r.(type) {
		case timeline.Attempt:
			enc.EncodeAttempt(&r)
		case timeline.Outcome:
			enc.EncodeOutcome(&r)
		case *timeline.End:
			enc.EncodeEnd(r)
		}
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMergeCommand: merge writes one timeline of a stub's recording and
// a fleet file; inputs of different runs, a file given twice, or an output
// that exists are bad input naming the file or flag, and nothing is
// written.
func TestMergeCommand(t *testing.T) {
	dir := t.TempDir()
	epoch := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	meta := func(recorder string, seed int64) *timeline.Meta {
		m := &timeline.Meta{Format: timeline.Format, Recorder: recorder, Scenario: "s", Seed: seed, Start: epoch, Epoch: epoch, Host: "h1"}
		if recorder == "run" {
			m.Subject, m.Scheduled, m.Fleet = "retrylab", 1, &timeline.Fleet{Clients: 1, Requests: 1}
		}
		return m
	}
	stub := mergeFile(t, dir, "stub.ndjson", meta("serve", 1),
		timeline.Attempt{Client: "0", Key: "0/0", Attempt: 1, Method: "GET", Path: "/c/0/r/0", At: 5, Done: 9, Status: 200})
	fleet := mergeFile(t, dir, "fleet.ndjson", meta("run", 1),
		timeline.Outcome{Client: "0", Key: "0/0", Scheduled: 0, Start: 1, End: 10, Result: timeline.ResultOK, Status: 200},
		&timeline.End{At: 11, Reason: timeline.EndCompleted})
	other := mergeFile(t, dir, "other.ndjson", meta("serve", 2))
	out := filepath.Join(dir, "m", "merged.ndjson")

	code, stdout, stderr := runCmd(t, "merge", "-o", out, stub, fleet)
	if code != exitOK || !strings.Contains(stdout, "merged 2 files into "+out+": 1 attempts, 1 outcomes of 1 scheduled") ||
		!strings.Contains(stdout, "clock uncertainty between hosts 0s") {
		t.Fatalf("merge: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	code, _, stderr = runCmd(t, "analyze", out)
	if code == exitUsage {
		t.Errorf("analyze of the merged timeline: bad input: %s", stderr)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{stub}, "merge needs -o FILE"},
		{[]string{"-o", filepath.Join(dir, "x.ndjson")}, "got none"},
		{[]string{"-o", out, stub, fleet}, "--output " + out + ": the file exists; pass --force"},
		{[]string{"-o", filepath.Join(dir, "x.ndjson"), stub, stub}, "are the same file"},
		{[]string{"-o", filepath.Join(dir, "x.ndjson"), stub, other}, fmt.Sprintf("timeline: merge: %s: seed 2; %s has seed 1", other, stub)},
		{[]string{"-o", filepath.Join(dir, "x.ndjson"), stub, filepath.Join(dir, "missing.ndjson")}, "missing.ndjson"},
		{[]string{"-o", filepath.Join(dir, "x.ndjson"), "--clock-uncertainty", "-1ms", stub}, "--clock-uncertainty must be >= 0"},
		{[]string{"--force", "-o", stub, stub, fleet}, "--output " + stub + " is also an input"},
	} {
		code, _, stderr := runCmd(t, append([]string{"merge"}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("merge %s: exit %d, stderr %q; want %d containing %q", strings.Join(c.args, " "), code, stderr, exitUsage, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.ndjson")); err == nil {
		t.Error("a refused merge wrote its output")
	}

	// Files of two hosts: the stated uncertainty, or the default.
	m2 := meta("run", 1)
	m2.Host = "h2"
	fleet2 := mergeFile(t, dir, "fleet2.ndjson", m2, &timeline.End{At: 11, Reason: timeline.EndCompleted})
	for _, c := range []struct {
		flags []string
		want  time.Duration
	}{{nil, timeline.DefaultClockUncertainty}, {[]string{"--clock-uncertainty", "3ms"}, 3 * time.Millisecond}} {
		out := filepath.Join(dir, fmt.Sprint("two-hosts-", len(c.flags), ".ndjson"))
		args := append(append([]string{"merge", "-o", out}, c.flags...), stub, fleet2)
		if code, stdout, stderr := runCmd(t, args...); code != exitOK || !strings.Contains(stdout, fmt.Sprintf("clock uncertainty between hosts %v", c.want)) {
			t.Errorf("merge %v: exit %d, %s %s; want the uncertainty %v", c.flags, code, stdout, stderr, c.want)
		}
	}
}

// FuzzParseEpoch: parseEpoch never panics, and what it accepts prints
// back to the same instant.
func FuzzParseEpoch(f *testing.F) {
	for _, s := range []string{"2026-12-01T12:00:00Z", "2026-12-01T12:00:00.5+01:00", "2026-12-01", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := parseEpoch(s)
		if err != nil {
			return
		}
		back, err := parseEpoch(e.Format(time.RFC3339Nano))
		if err != nil || !back.Equal(e) {
			t.Fatalf("parseEpoch(%q) = %v; printed back %v, %v", s, e, back, err)
		}
	})
}

// TestMergeDirectory: a directory stands for the timelines below it, so a
// container without a shell merges a results volume into itself; the
// output, already there, is skipped; a directory without timelines is bad
// input.
func TestMergeDirectory(t *testing.T) {
	dir := t.TempDir()
	epoch := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	stubMeta := &timeline.Meta{Format: timeline.Format, Recorder: "serve", Scenario: "s", Seed: 1, Start: epoch, Epoch: epoch, Host: "h1"}
	runMeta := &timeline.Meta{Format: timeline.Format, Recorder: "run", Scenario: "s", Seed: 1, Start: epoch, Epoch: epoch, Host: "h1",
		Subject: "retrylab", Scheduled: 1, Fleet: &timeline.Fleet{Clients: 1, Requests: 1}}
	mergeFile(t, dir, "stub-a.ndjson", stubMeta,
		timeline.Attempt{Client: "0", Key: "0/0", Attempt: 1, Method: "GET", Path: "/c/0/r/0", At: 5, Done: 9, Status: 200})
	if err := os.MkdirAll(filepath.Join(dir, "fleet", "run-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	mergeFile(t, filepath.Join(dir, "fleet", "run-1"), "timeline.ndjson", runMeta,
		timeline.Outcome{Client: "0", Key: "0/0", Scheduled: 0, Start: 1, End: 10, Result: timeline.ResultOK, Status: 200},
		&timeline.End{At: 11, Reason: timeline.EndCompleted})
	os.WriteFile(filepath.Join(dir, "fleet", "run-1", "report.html"), []byte("<html>"), 0o644) // not a timeline
	out := filepath.Join(dir, "merged.ndjson")
	for range 2 { // the second time, the output is below the directory
		code, stdout, stderr := runCmd(t, "merge", "--force", "-o", out, dir)
		if code != exitOK || !strings.Contains(stdout, "merged 2 files into "+out+": 1 attempts, 1 outcomes of 1 scheduled") {
			t.Fatalf("merge -o %s %s: exit %d\nstdout: %s\nstderr: %s", out, dir, code, stdout, stderr)
		}
	}
	empty := t.TempDir()
	if code, _, stderr := runCmd(t, "merge", "-o", filepath.Join(dir, "x.ndjson"), empty); code != exitUsage || !strings.Contains(stderr, "a directory without *.ndjson timelines") {
		t.Errorf("merge of an empty directory: exit %d, stderr %q; want %d naming it", code, stderr, exitUsage)
	}
}

// TestMergeMissingStub: a run spread over two stubs and two shards, merged
// with stub B's recording left out, is not a complete run: merge warns,
// naming the shards and their files, and analyze of the merged timeline is
// INCONCLUSIVE with the same sentences; merged with both recordings, it
// passes. Before, the partial merge said nothing and analyze said PASS
// ("200 requests, 300 outcomes").
func TestMergeMissingStub(t *testing.T) {
	dir := t.TempDir()
	epoch := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	meta := func(recorder, shard string) *timeline.Meta {
		m := &timeline.Meta{Format: timeline.Format, Recorder: recorder, Scenario: "s", Seed: 1, Start: epoch, Epoch: epoch, Host: "h1",
			Phases: []timeline.Phase{{Name: "ok", Respond: "ok"}},
			Expect: &timeline.Expect{AllowUnexercised: true}} // a baseline: the stubs refuse nothing
		if recorder == "run" {
			m.Subject, m.Shard, m.Scheduled, m.Fleet = "retrylab", shard, 150, &timeline.Fleet{Clients: 300, Requests: 1, Method: "GET"}
		}
		return m
	}
	var stubs [2][]any
	var shards [2][]any
	for i := range 300 {
		at := int64(i) * int64(time.Millisecond)
		c, k := fmt.Sprint(i), fmt.Sprint(i, "/0")
		a := timeline.Attempt{Client: c, Key: k, Attempt: 1, Method: "GET", Path: "/c/" + c + "/r/0", At: at, Done: at + 1000, Status: 200, Phase: "ok"}
		stub := 0
		if i%3 == 2 {
			stub = 1 // a third of the requests on stub B
		}
		stubs[stub] = append(stubs[stub], a)
		shards[i%2] = append(shards[i%2], timeline.Outcome{Client: c, Key: k, Scheduled: at, Start: at, End: at + 2000,
			Result: timeline.ResultOK, Status: 200, Attempts: 1})
	}
	for i := range shards {
		shards[i] = append(shards[i], &timeline.End{At: int64(time.Second), Reason: timeline.EndCompleted})
	}
	stubA := mergeFile(t, dir, "stub-a.ndjson", meta("serve", ""), stubs[0]...)
	stubB := mergeFile(t, dir, "stub-b.ndjson", meta("serve", ""), stubs[1]...)
	for i := range 2 {
		os.MkdirAll(filepath.Join(dir, "out", fmt.Sprint(i)), 0o755)
	}
	s0 := mergeFile(t, filepath.Join(dir, "out", "0"), "timeline.ndjson", meta("run", "0/2"), shards[0]...)
	s1 := mergeFile(t, filepath.Join(dir, "out", "1"), "timeline.ndjson", meta("run", "1/2"), shards[1]...)

	whole := filepath.Join(dir, "whole.ndjson")
	if code, stdout, stderr := runCmd(t, "merge", "-o", whole, stubA, stubB, s0, s1); code != exitOK || stderr != "" {
		t.Fatalf("merge of every file: exit %d, stderr %q, stdout %s; want 0 and no warning", code, stderr, stdout)
	}
	if code, stdout, stderr := runCmd(t, "analyze", whole); code != exitOK || !strings.Contains(stdout, "300 requests") {
		t.Errorf("analyze of the whole merge: exit %d\n%s%s\nwant PASS, 300 requests", code, stdout, stderr)
	}

	partial := filepath.Join(dir, "m.ndjson")
	code, stdout, stderr := runCmd(t, "merge", "-o", partial, stubA, s0, s1)
	want := []string{
		fmt.Sprintf("50 outcomes of shard 0/2 (file %s) name logical requests no recording holds (such as 2/0): a stub's recording is missing from the merge?", s0),
		fmt.Sprintf("50 outcomes of shard 1/2 (file %s) name logical requests no recording holds (such as 5/0): a stub's recording is missing from the merge?", s1),
	}
	if code != exitOK || !strings.Contains(stdout, "200 attempts, 300 outcomes of 300 scheduled") {
		t.Fatalf("merge without stub B: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, "retrylab: merge: warning: "+w+"\n") {
			t.Errorf("merge without stub B: stderr %q; want the warning %q", stderr, w)
		}
	}
	code, stdout, stderr = runCmd(t, "analyze", partial)
	if code != exitError || !strings.Contains(stdout, "INCONCLUSIVE") {
		t.Errorf("analyze of the merge without stub B: exit %d\n%s%s\nwant %d, INCONCLUSIVE", code, stdout, stderr, exitError)
	}
	for _, w := range want {
		if !strings.Contains(stdout, w) {
			t.Errorf("analyze of the merge without stub B does not say %q:\n%s", w, stdout)
		}
	}
}
