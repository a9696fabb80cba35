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

// serveNoise serves a stub on ln with a probe command, sends it three
// requests at addr, stops it and returns the recording's end record's
// noise.
func serveNoise(t *testing.T, ln net.Listener, addr net.Addr) *timeline.Noise {
	t.Helper()
	sc := mustParse(t, "name: s\nserver: {phases: [{respond: ok}]}\n")
	var buf bytes.Buffer
	sv, err := NewServe(sc, ServeOptions{Record: &buf, Probe: probeCommand(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := sv.Serve(ctx, ln)
		done <- err
	}()
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	for i := range 3 {
		resp, err := client.Get(fmt.Sprintf("http://%s/c/%d/r/0", addr, i))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	d := decode(t, buf.Bytes())
	if d.end == nil || d.end.Noise == nil {
		t.Fatalf("end = %+v; want the host's noise", d.end)
	}
	t.Logf("noise %+v", *d.end.Noise)
	return d.end.Noise
}

// A serve whose clients are on this host runs the noise probe, as an exec
// fleet does: its recording's noise holds the probe's measure of what a
// process on the host met, and the CPU pressure; the stamps' socket waits
// no longer stand for the clients' lateness.
func TestServeProbesLocalClients(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := serveNoise(t, ln, ln.Addr())
	checkNoise(t, n, "sched+sleep+probe+stamp")
}

// On a listener that is not on loopback (here one that says so), the
// first client from this host starts the probe.
func TestServeProbesFirstLocalPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := serveNoise(t, &addrListener{Listener: ln, says: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 80}}, ln.Addr())
	checkNoise(t, n, "sched+sleep+probe+stamp")
}

// Clients from another host start no probe: the recording's noise is the
// stub's own, as before.
func TestServeNoProbeRemoteClients(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	remote := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 4242}
	n := serveNoise(t, &addrListener{Listener: ln, says: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 80}, peer: remote}, ln.Addr())
	checkNoise(t, n, "sched+sleep") // wrapped connections give the stamps no socket
}

// addrListener is a loopback listener whose Addr says another address
// (says), and whose connections, with peer set, another remote address.
type addrListener struct {
	net.Listener
	says net.Addr
	peer net.Addr
}

func (l *addrListener) Addr() net.Addr { return l.says }

func (l *addrListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil || l.peer == nil {
		return c, err
	}
	return &peerConn{Conn: c, peer: l.peer}, nil
}

// peerConn is a connection whose RemoteAddr is peer.
type peerConn struct {
	net.Conn
	peer net.Addr
}

func (c *peerConn) RemoteAddr() net.Addr { return c.peer }
