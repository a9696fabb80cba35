package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/timeline"
)

// serveRecording runs serve with a recording, sends it n requests, stops
// it (with stop, or at --duration when stop is nil) and returns the
// recording's bytes.
func serveRecording(t *testing.T, n int, duration string, stop func()) []byte {
	t.Helper()
	record := filepath.Join(t.TempDir(), "t.ndjson")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--record", record, "--duration", duration}, &stdout, &stderr)
	}()
	base := waitForURL(t, &stdout, done)
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range n {
		resp, err := client.Get(fmt.Sprintf("%s/c/%d/r/0", base, i%4))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if stop != nil {
		stop()
		cancel(&runner.Interrupt{Signal: "SIGTERM"}) // what the signal does
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v (stderr %s)", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lastEnd decodes b and returns its end record, failing unless it is the
// last record and the only one.
func lastEnd(t *testing.T, b []byte) *timeline.End {
	t.Helper()
	dec := timeline.NewDecoder(bytes.NewReader(b))
	var end *timeline.End
	for {
		var rec timeline.Record
		err := dec.Decode(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if end != nil {
			t.Fatalf("a %s record after the end record", rec.Type)
		}
		if rec.Type == timeline.TypeEnd {
			end = rec.End
		}
	}
	if end == nil {
		t.Fatal("the recording has no end record")
	}
	return end
}

// A serve recording ends with an end record: completed at --duration, with
// the host's noise measured while serving; its clients are on this host
// (loopback), so the noise probe ran, as beside an exec fleet (this test
// binary is the probe: TestMain).
func TestServeEndCompleted(t *testing.T) {
	end := lastEnd(t, serveRecording(t, 10, "300ms", nil))
	if end.Reason != timeline.EndCompleted || end.Signal != "" || len(end.Errors) != 0 {
		t.Errorf("end = %+v; want completed", end)
	}
	if end.At < int64(300*time.Millisecond) {
		t.Errorf("end.At = %v; want at least the 300ms --duration", time.Duration(end.At))
	}
	n := end.Noise
	if n == nil {
		t.Fatal("end.Noise = nil")
	}
	want := strings.Join([]string{timeline.NoiseSched, timeline.NoiseSleep, timeline.NoiseProbe, timeline.NoiseStamp}, "+")
	if n.Source != want || n.Samples <= 0 || n.P50 < 0 || n.P50 > n.P99 || n.P99 > n.Max {
		t.Errorf("end.Noise = %+v; want %s (the probe's, and the stub's stamps of the requests served) with samples and 0 <= p50 <= p99 <= max", *n, want)
	}
}

// Stopped by a signal, the end record says which; and the end record
// changes nothing the analyzer judges: the verdict of the recording
// without it is the same but for the span, which now runs to the stop.
func TestServeEndInterrupted(t *testing.T) {
	b := serveRecording(t, 12, "2m", func() {})
	end := lastEnd(t, b)
	if end.Reason != timeline.EndInterrupted || end.Signal != "SIGTERM" || end.Noise == nil {
		t.Errorf("end = %+v; want interrupted by SIGTERM, with noise", end)
	}
	without := b[:bytes.LastIndex(b[:len(b)-1], []byte("\n"))+1]
	if bytes.Contains(without, []byte(`"type":"end"`)) || !bytes.Contains(b, []byte(`"type":"end"`)) {
		t.Fatalf("cutting the end record off went wrong:\n%s", b)
	}
	verdict := func(tl []byte) (int, map[string]any) {
		dir := t.TempDir()
		in, out := filepath.Join(dir, "t.ndjson"), filepath.Join(dir, "v.json")
		if err := os.WriteFile(in, tl, 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runCmdCtx(t, t.Context(), "analyze", in, "--json", out)
		if code == 2 {
			t.Fatalf("analyze: exit 2: %s", stderr)
		}
		vb, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(vb, &v); err != nil {
			t.Fatal(err)
		}
		return code, v
	}
	codeWith, with := verdict(b)
	codeWithout, wo := verdict(without)
	span := func(v map[string]any) float64 {
		f, _ := v["figures"].(map[string]any)
		s, _ := f["span"].(float64)
		delete(f, "span")
		return s
	}
	if sw, so := span(with), span(wo); sw < so {
		t.Errorf("span %v with the end record, %v without; want it no shorter", sw, so)
	}
	jw, _ := json.Marshal(with)
	jo, _ := json.Marshal(wo)
	if codeWith != codeWithout || !bytes.Equal(jw, jo) {
		t.Errorf("with the end record: exit %d %s\nwithout: exit %d %s", codeWith, jw, codeWithout, jo)
	}
}
