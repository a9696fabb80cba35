package main

import (
	"context"
	"fmt"
	"io"
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
