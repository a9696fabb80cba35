package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// TestServeRecordsEveryRequest runs `retrylab serve` on loopback, sends it
// requests, stops it as SIGINT would, and reads the recording back.
func TestServeRecordsEveryRequest(t *testing.T) {
	record := filepath.Join(t.TempDir(), "t.ndjson")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--record", record, "--duration", "2m"}, &stdout, &stderr)
	}()

	base := waitForURL(t, &stdout, done)
	client := &http.Client{Timeout: 10 * time.Second}
	const n = 20
	statuses := map[int]int{}
	for i := 0; i < n; i++ {
		resp, err := client.Get(fmt.Sprintf("%s/c/%d/r/0", base, i%4))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses[resp.StatusCode]++
		if resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("503 in the first phase without Retry-After")
		}
	}
	if resp, err := client.Get(base + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	cancel() // what SIGINT does
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v; want nil after a signal", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop after cancel")
	}
	if !strings.Contains(stdout.String(), fmt.Sprintf("%d requests", n)) {
		t.Errorf("stdout %q; want the count of %d requests", stdout.String(), n)
	}

	f, err := os.Open(record)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := timeline.NewDecoder(f)
	var rec timeline.Record
	attempts := 0
	for {
		err := dec.Decode(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch rec.Type {
		case timeline.TypeMeta:
			if rec.Meta.Recorder != "serve" || len(rec.Meta.Phases) == 0 {
				t.Errorf("meta = %+v; want a serve recording with phases", rec.Meta)
			}
		case timeline.TypeAttempt:
			attempts++
		}
	}
	if attempts != n {
		t.Errorf("recorded %d attempts; want %d (health checks excluded)", attempts, n)
	}
}

var urlRE = regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)`)

// waitForURL waits until serve prints its base URL.
func waitForURL(t *testing.T, stdout *syncBuffer, done chan error) string {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if m := urlRE.FindStringSubmatch(stdout.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended early: %v", err)
		case <-deadline.C:
			t.Fatalf("serve printed no URL: %q", stdout.String())
		case <-tick.C:
		}
	}
}

// serveUntilURL starts `retrylab serve` with args, waits for its URL, and
// returns it with a stop func that cancels it as SIGINT would and returns
// its error.
func serveUntilURL(t *testing.T, args ...string) (base string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"serve", "--duration", "2m"}, args...), &stdout, &stderr) }()
	base = waitForURL(t, &stdout, done)
	return base, func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not stop after cancel")
			return nil
		}
	}
}

// readTimeline decodes a recording: its meta and attempts.
func readTimeline(t *testing.T, path string) (timeline.Meta, []timeline.Attempt) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := timeline.NewDecoder(f)
	var (
		meta timeline.Meta
		as   []timeline.Attempt
		rec  timeline.Record
	)
	for {
		err := dec.Decode(&rec)
		if err == io.EOF {
			return meta, as
		}
		if err != nil {
			t.Fatal(err)
		}
		switch rec.Type {
		case timeline.TypeMeta:
			meta = *rec.Meta
		case timeline.TypeAttempt:
			as = append(as, rec.Attempt)
		}
	}
}

// TestServeRecordRefusesExistingFile: --record never overwrites a file
// unless --force is given (exit 2 naming --output, its new spelling, file
// untouched).
func TestServeRecordRefusesExistingFile(t *testing.T) {
	record := filepath.Join(t.TempDir(), "t.ndjson")
	const old = "an earlier recording\n"
	if err := os.WriteFile(record, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--record", record}, io.Discard, io.Discard)
	if code := exitCode(err, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--output") || !strings.Contains(stderr.String(), "--force") {
		t.Errorf("serve --record EXISTING: exit %d, %q; want %d naming --output (--record is its old spelling) and --force", code, stderr.String(), exitUsage)
	}
	if b, _ := os.ReadFile(record); string(b) != old {
		t.Errorf("the existing file became %q; want it untouched", b)
	}

	_, stop := serveUntilURL(t, "--addr", "127.0.0.1:0", "--record", record, "--force")
	if err := stop(); err != nil {
		t.Fatalf("serve --force: %v", err)
	}
	if meta, _ := readTimeline(t, record); meta.Recorder != "serve" {
		t.Errorf("after --force the file holds meta %+v; want a serve recording", meta)
	}
}

// TestServeAddrErrors: an address that cannot be one is bad input (exit 2
// naming --addr); a port in use is a run that could not be carried out
// (exit 3).
func TestServeAddrErrors(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:no-such-service", "127.0.0.1"} {
		var stderr strings.Builder
		err := run(context.Background(), []string{"serve", "--addr", addr}, io.Discard, io.Discard)
		if code := exitCode(err, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--addr") {
			t.Errorf("serve --addr %s: exit %d, %q; want %d naming --addr", addr, code, stderr.String(), exitUsage)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var stderr strings.Builder
	err = run(context.Background(), []string{"serve", "--addr", l.Addr().String()}, io.Discard, io.Discard)
	if code := exitCode(err, &stderr); code != exitError || !strings.Contains(stderr.String(), "--addr") {
		t.Errorf("serve --addr IN-USE: exit %d, %q; want %d naming --addr", code, stderr.String(), exitError)
	}
}

// TestServeStartFirstRequest: with --start first-request, time zero (and
// the phases) start at the first recorded request, not at listen time nor
// at a health check; the meta record says so.
func TestServeStartFirstRequest(t *testing.T) {
	record := filepath.Join(t.TempDir(), "t.ndjson")
	base, stop := serveUntilURL(t, "--addr", "127.0.0.1:0", "--record", record, "--start", "first-request", "--scenario", "outage-delta")
	c := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) int {
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	get("/healthz")
	get("/metrics")
	before := time.Now()
	if code := get("/c/1/r/0"); code != 503 {
		t.Errorf("first request: %d; want 503 (the outage starts with it)", code)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	meta, as := readTimeline(t, record)
	if meta.Start.Before(before) {
		t.Errorf("meta start %v is before the first request was sent (%v)", meta.Start, before)
	}
	if len(meta.Notes) == 0 || !strings.Contains(meta.Notes[0], "first request") {
		t.Errorf("meta notes = %q; want one saying the phases started at the first request", meta.Notes)
	}
	if len(as) != 1 || as[0].At != 0 || as[0].Phase != "outage" {
		t.Errorf("attempts = %+v; want one at time zero in the outage", as)
	}

	// No request at all: the recording still has its meta record.
	empty := filepath.Join(t.TempDir(), "empty.ndjson")
	_, stop = serveUntilURL(t, "--addr", "127.0.0.1:0", "--record", empty, "--start", "first-request")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if meta, as := readTimeline(t, empty); meta.Recorder != "serve" || len(as) != 0 || !strings.Contains(strings.Join(meta.Notes, " "), "no request arrived") {
		t.Errorf("recording without requests: meta %+v, %d attempts; want a meta saying no request arrived", meta, len(as))
	}

	var stderr strings.Builder
	err := run(context.Background(), []string{"serve", "--start", "later"}, io.Discard, io.Discard)
	if code := exitCode(err, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--start") {
		t.Errorf("serve --start later: exit %d, %q; want %d naming --start", code, stderr.String(), exitUsage)
	}
}
