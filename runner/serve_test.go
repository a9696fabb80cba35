package runner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"

	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
)

// A Serving records every request it answers after a meta record with the
// caller's notes, and ends the recording with an end record naming the
// signal that stopped it and the host's noise.
func TestServeRecords(t *testing.T) {
	sc := mustParse(t, "name: s\nserver: {phases: [{name: down, for: 1h, respond: {status: 503}}]}\n")
	var buf bytes.Buffer
	sv, err := NewServe(sc, ServeOptions{Record: &buf, Seed: 3, Tool: "v9", Notes: []string{"a note"}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	type result struct {
		st  stubserver.Stats
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := sv.Serve(ctx, ln)
		done <- result{st, err}
	}()
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	for i := range 3 {
		resp, err := client.Get(fmt.Sprintf("http://%s/c/%d/r/0", ln.Addr(), i))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 {
			t.Errorf("request %d: %d; want 503", i, resp.StatusCode)
		}
	}
	cancel(&Interrupt{Signal: "SIGINT"})
	res := <-done
	if res.err != nil || res.st.Attempts != 3 || res.st.Unavailable503 != 3 {
		t.Fatalf("Serve = %+v, %v; want 3 attempts answered 503", res.st, res.err)
	}
	d := decode(t, buf.Bytes())
	if m := d.meta; m.Recorder != "serve" || m.Seed != 3 || m.Tool != "v9" || !slices.Contains(m.Notes, "a note") || m.Fleet != nil || !m.Start.Equal(sv.Start()) {
		t.Errorf("meta = %+v; want serve's, seed 3, tool v9, the note, no fleet, time zero %v", m, sv.Start())
	}
	if len(d.atts) != 3 || len(d.outs) != 0 {
		t.Errorf("%d attempts, %d outcomes; want 3 and none", len(d.atts), len(d.outs))
	}
	if e := d.end; e == nil || e.Reason != timeline.EndInterrupted || e.Signal != "SIGINT" || e.Noise == nil || e.At <= 0 {
		t.Errorf("end = %+v; want interrupted by SIGINT, at a positive instant, with noise", e)
	}
}

// A server the stub refuses is NewServe's error.
func TestNewServeRefuses(t *testing.T) {
	sc := mustParse(t, "name: s\n")
	bad := stubserver.Config{Phases: []stubserver.Phase{{Name: "x", Respond: stubserver.Respond{Kind: stubserver.RespondStatus, Status: 99}}}}
	if _, err := NewServe(sc, ServeOptions{Server: &bad}); err == nil {
		t.Error("NewServe(status 99) = nil error")
	}
}
