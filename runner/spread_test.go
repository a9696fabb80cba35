package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/retrylab/retrylab/scenarios"
	"net"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

const shardScenario = `
name: shards
duration: 30s
server:
  latency: 3ms
  phases:
    - {name: down, for: 1s, respond: {status: 503}, retry_after: {form: delta, value: 1}}
    - {name: up, respond: ok}
fleet: {clients: 25, requests: 2, think: 70ms, start: poisson 40/s, timeout: 10s}
subject: {name: retrylab, policy: {base: 50ms, cap: 1s, max_attempts: 6, budget: 8s, jitter: full}}
`

// scheduledOf lists a timeline's outcomes as "client key scheduled", sorted.
func scheduledOf(outs []timeline.Outcome) []string {
	var s []string
	for _, o := range outs {
		s = append(s, fmt.Sprintf("%s %s %d", o.Client, o.Key, o.Scheduled))
	}
	sort.Strings(s)
	return s
}

// TestShardsRunTheFleet: in virtual time, the three shards of a fleet
// together schedule exactly the logical requests, at the same instants,
// that the unsharded run of the same seed does; each holds the client ids
// i, i+3, … and states its share.
func TestShardsRunTheFleet(t *testing.T) {
	sc := mustParse(t, shardScenario)
	run := func(sh timeline.Shard) decoded {
		var d decoded
		synctest.Test(t, func(t *testing.T) {
			var buf bytes.Buffer
			sum, err := Run(context.Background(), sc, RunOptions{Virtual: true, Seed: 11, Stagger: time.Millisecond, Shard: sh, Timeline: &buf})
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(sh.Clients(25) * 2); sum.Planned != want || sum.Requests != want || sum.Clients != sh.Clients(25) || sum.Shard != sh.String() {
				t.Errorf("shard %q: planned %d, requests %d, clients %d, shard %q; want %d, %d, %d, %q",
					sh, sum.Planned, sum.Requests, sum.Clients, sum.Shard, want, want, sh.Clients(25), sh)
			}
			d = decode(t, buf.Bytes())
		})
		return d
	}
	whole := run(timeline.Shard{})
	var union []timeline.Outcome
	attempts := 0
	for i := range 3 {
		sh := timeline.Shard{Index: i, Count: 3}
		d := run(sh)
		if d.meta.Shard != sh.String() || d.meta.Scheduled != int64(sh.Clients(25)*2) || d.meta.Fleet.Clients != 25 {
			t.Errorf("shard %s meta: shard %q, scheduled %d, fleet clients %d; want %q, %d, 25 (the whole fleet's)",
				sh, d.meta.Shard, d.meta.Scheduled, d.meta.Fleet.Clients, sh, sh.Clients(25)*2)
		}
		for _, o := range d.outs {
			if id, _ := strconv.Atoi(o.Client); id%3 != i {
				t.Errorf("shard %s ran client %s", sh, o.Client)
			}
		}
		union = append(union, d.outs...)
		attempts += len(d.atts)
	}
	if got, want := scheduledOf(union), scheduledOf(whole.outs); !reflect.DeepEqual(got, want) {
		t.Errorf("the shards' (client, key, scheduled) differ from the whole fleet's:\n got %d: %v\nwant %d: %v", len(got), got, len(want), want)
	}
	if len(whole.outs) != 50 || attempts != len(whole.atts) {
		t.Errorf("whole run: %d outcomes, %d attempts; shards: %d attempts; want 50 outcomes and equal attempts", len(whole.outs), len(whole.atts), attempts)
	}
}

// externalStub starts a stub on loopback, time zero at epoch, recording
// into a timeline with a serve meta record; stop shuts it down and returns
// the recording.
func externalStub(t *testing.T, sc *scenarios.Scenario, epoch time.Time, seed int64) (url string, stop func() []byte) {
	t.Helper()
	var buf bytes.Buffer
	enc := timeline.NewEncoder(&buf)
	if err := enc.EncodeMeta(sc.Meta(scenarios.MetaOptions{Recorder: "serve", Seed: seed, Start: epoch, Epoch: epoch, Host: "h"})); err != nil {
		t.Fatal(err)
	}
	rec := timeline.NewRecorder(enc, 1024)
	srv, err := stubserver.New(sc.Server, stubserver.Options{Start: AnchorEpoch(epoch), Recorder: rec, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(l) }()
	return "http://" + l.Addr().String() + "/", func() []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		<-done
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
}

const targetScenario = `
name: target
duration: 10s
server:
  phases:
    - {name: down, for: 300ms, respond: {status: 503}, retry_after: {form: delta, value: 1}}
    - {name: up, respond: ok}
fleet: {clients: 12, requests: 2, think: 10ms, start: ramp 100ms, timeout: 5s}
subject: {name: retrylab, policy: {base: 20ms, cap: 200ms, max_attempts: 4, budget: 5s}}
`

// TestRunTargetShards: two shards drive one stub outside the runner from a
// shared epoch (over loopback, in real time: about 1.5 s). Each fleet file
// holds the meta, outcomes and end record but no attempt; the stub holds
// every attempt; merged, they make the whole run.
func TestRunTargetShards(t *testing.T) {
	sc := mustParse(t, targetScenario)
	epoch := time.Now().Add(300 * time.Millisecond).Round(time.Millisecond)
	url, stop := externalStub(t, sc, epoch, 3)
	var wg sync.WaitGroup
	files := make([]bytes.Buffer, 2)
	sums := make([]*Summary, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			sums[i], errs[i] = Run(context.Background(), sc, RunOptions{Target: url, Shard: timeline.Shard{Index: i, Count: 2},
				Epoch: epoch, Seed: 3, Host: "h", Timeline: &files[i]})
		})
	}
	wg.Wait()
	stubFile := stop()
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("shard %d: %v", i, errs[i])
		}
		d := decode(t, files[i].Bytes())
		m := d.meta
		if !m.Epoch.Equal(epoch) || !m.Start.Equal(epoch) || m.Shard != fmt.Sprintf("%d/2", i) || m.Host != "h" || m.Scheduled != 12 {
			t.Errorf("shard %d meta: epoch %v start %v shard %q host %q scheduled %d; want the epoch twice, %d/2, h, 12", i, m.Epoch, m.Start, m.Shard, m.Host, m.Scheduled, i)
		}
		if len(m.Notes) == 0 || !strings.Contains(m.Notes[0], "fleet only: the stub at "+url) {
			t.Errorf("shard %d notes %q; want the fleet-only note naming the target", i, m.Notes)
		}
		if len(d.atts) != 0 || len(d.outs) != 12 || d.end == nil || d.end.Reason != timeline.EndCompleted {
			t.Errorf("shard %d: %d attempts, %d outcomes, end %+v; want none, 12, completed", i, len(d.atts), len(d.outs), d.end)
		}
		for _, o := range d.outs {
			if o.Result != timeline.ResultOK {
				t.Errorf("shard %d: outcome %+v; want ok", i, o)
			}
		}
		if s := sums[i]; s.Attempts < 12 || s.Unavailable503 == 0 || s.Target != url {
			t.Errorf("shard %d summary: %d attempts, %d 503s, target %q; want the harness's count of the stub's answers", i, s.Attempts, s.Unavailable503, s.Target)
		}
	}
	stub := decode(t, stubFile)
	for _, a := range stub.atts {
		if a.At < 0 {
			t.Errorf("stub attempt %+v before the epoch", a)
		}
	}
	if n := sums[0].Attempts + sums[1].Attempts; int64(len(stub.atts)) != n {
		t.Errorf("stub recorded %d attempts; the shards sent %d", len(stub.atts), n)
	}

	var merged bytes.Buffer
	msum, err := timeline.Merge(&merged, []timeline.MergeInput{{Name: "stub", R: bytes.NewReader(stubFile)},
		{Name: "s0", R: bytes.NewReader(files[0].Bytes())}, {Name: "s1", R: bytes.NewReader(files[1].Bytes())}}, timeline.MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	md := decode(t, merged.Bytes())
	if md.meta.Scheduled != 24 || len(md.outs) != 24 || len(md.atts) != len(stub.atts) || md.end == nil || md.meta.ClockUncertainty != 0 || msum.Renumbered != 0 {
		t.Errorf("merged: scheduled %d, %d outcomes, %d attempts (stub %d), end %+v, uncertainty %d, renumbered %d; want 24, 24, equal, an end, 0, 0",
			md.meta.Scheduled, len(md.outs), len(md.atts), len(stub.atts), md.end, md.meta.ClockUncertainty, msum.Renumbered)
	}
}

// TestRunEpochInProcess: with an epoch and the in-process stub, time zero
// is the epoch: the meta record names it and nothing precedes it.
func TestRunEpochInProcess(t *testing.T) {
	sc := mustParse(t, targetScenario)
	epoch := time.Now().Add(200 * time.Millisecond)
	var buf bytes.Buffer
	before := time.Now()
	sum, err := Run(context.Background(), sc, RunOptions{Epoch: epoch, Seed: 1, Clients: 3, Requests: 1, Timeline: &buf})
	if err != nil {
		t.Fatal(err)
	}
	d := decode(t, buf.Bytes())
	if !d.meta.Start.Equal(epoch) || !d.meta.Epoch.Equal(epoch) || len(d.outs) != 3 || sum.Stopped != StoppedDone {
		t.Errorf("meta start %v epoch %v, %d outcomes, stopped %q; want the epoch %v twice, 3 outcomes, done", d.meta.Start, d.meta.Epoch, len(d.outs), sum.Stopped, epoch)
	}
	if wait := epoch.Sub(before); sum.Elapsed+wait < time.Duration(d.end.At) {
		t.Errorf("elapsed %v from the epoch; the end at %v", sum.Elapsed, time.Duration(d.end.At))
	}
	for _, a := range d.atts {
		if a.At < 0 || a.Phase != "down" && a.At < int64(300*time.Millisecond) {
			t.Errorf("attempt %+v: want none before the epoch, the first phase from it", a)
		}
	}
}

// TestRunStoppedBeforeEpoch: a run stopped while it waits for its epoch
// writes a timeline that decodes: it stopped at time zero, nothing started.
func TestRunStoppedBeforeEpoch(t *testing.T) {
	sc := mustParse(t, targetScenario)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var buf bytes.Buffer
	sum, err := Run(ctx, sc, RunOptions{Epoch: time.Now().Add(5 * time.Second), Seed: 1, Timeline: &buf})
	if err != nil {
		t.Fatal(err)
	}
	d := decode(t, buf.Bytes())
	if d.end == nil || d.end.At != 0 || d.end.Reason != timeline.EndInterrupted || d.end.Unstarted != 24 || len(d.outs)+len(d.atts) != 0 || sum.Elapsed != 0 {
		t.Errorf("end %+v, %d outcomes, %d attempts, elapsed %v; want interrupted at 0 with 24 unstarted, nothing else", d.end, len(d.outs), len(d.atts), sum.Elapsed)
	}
}

func TestCheckEpoch(t *testing.T) {
	sc := mustParse(t, targetScenario) // first phase 300ms
	one := mustParse(t, "name: one\nduration: 4s\nserver: {phases: [{name: only, respond: ok}]}\n")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		sc       *scenarios.Scenario
		epoch    time.Duration // from now
		late     time.Duration
		err      string
		isPassed bool
	}{
		{sc, 30 * time.Second, 0, "", false},
		{sc, 0, 0, "", false},
		{sc, -200 * time.Millisecond, 200 * time.Millisecond, "", false},
		{sc, -300 * time.Millisecond, 0, "past the end of scenario target's first phase (300ms after it)", true},
		{one, -3 * time.Second, 3 * time.Second, "", false},
		{one, -4 * time.Second, 0, "first phase (4s after it)", true},
		{sc, 2 * time.Hour, 0, "is 2h0m0s ahead, more than 1h0m0s", false},
	} {
		late, err := CheckEpoch(c.sc, now.Add(c.epoch), now)
		if c.err == "" {
			if err != nil || late != c.late {
				t.Errorf("CheckEpoch(%s, now%+v) = %v, %v; want %v, nil", c.sc.Name, c.epoch, late, err, c.late)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) || errors.Is(err, ErrEpochPassed) != c.isPassed {
			t.Errorf("CheckEpoch(%s, now%+v) = %v; want an error containing %q (ErrEpochPassed: %v)", c.sc.Name, c.epoch, err, c.err, c.isPassed)
		}
	}
}

// TestRunRefusesSpread: what a run spread over processes cannot do is an
// error before anything starts.
func TestRunRefusesSpread(t *testing.T) {
	sc := mustParse(t, targetScenario)
	prog := subjects.Program{Path: "true"}
	for _, c := range []struct {
		name string
		opts RunOptions
		want string
	}{
		{"virtual target", RunOptions{Virtual: true, Target: "http://127.0.0.1:1"}, "a virtual run has no target or epoch"},
		{"virtual epoch", RunOptions{Virtual: true, Epoch: time.Now()}, "a virtual run has no target or epoch"},
		{"exec shard", RunOptions{Subject: prog, Shard: timeline.Shard{Index: 0, Count: 2}}, "an exec subject's fleet needs the in-process stub"},
		{"exec target", RunOptions{Subject: prog, Target: "http://127.0.0.1:1"}, "an exec subject's fleet needs the in-process stub"},
		{"empty shard", RunOptions{Shard: timeline.Shard{Index: 12, Count: 13}}, "shard 12/13 of 12 clients has none"},
		{"bad shard", RunOptions{Shard: timeline.Shard{Index: 3, Count: 2}}, "shard 3/2: want"},
		{"bad target", RunOptions{Target: "ftp://127.0.0.1/"}, "want an http:// or https:// URL"},
		{"passed epoch", RunOptions{Epoch: time.Now().Add(-time.Second)}, "the epoch has passed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Run(context.Background(), sc, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Run = %v; want an error containing %q", err, c.want)
			}
		})
	}
}

func TestParseTarget(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080", ""},
		{"https://stub.example:443", "https://stub.example:443", ""},
		{"http://[::1]:9", "http://[::1]:9", ""},
		{"127.0.0.1:8080", "", "want an http:// or https:// URL"},
		{"http://", "", "no host"},
		{"http://:80", "", "no host"},
		{"http://h:1/api", "", "want no path"},
		{"http://h:1/?x=1", "", "without user, query or fragment"},
		{"http://u:p@h:1", "", "without user, query or fragment"},
		{"http://h:1/#f", "", "without user, query or fragment"},
		{"http://h:1/%zz", "", "invalid URL escape"},
	} {
		u, err := ParseTarget(c.in)
		switch {
		case c.err == "" && (err != nil || u.String() != c.want):
			t.Errorf("ParseTarget(%q) = %v, %v; want %s", c.in, u, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseTarget(%q) = %v, %v; want an error containing %q", c.in, u, err, c.err)
		}
	}
}

// FuzzParseTarget: ParseTarget never panics, and a URL it accepts is a
// base URL the fleet's paths can be appended to.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:8080", "https://[::1]:1/", "http://h/x", "x", "http://%41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseTarget(s)
		if err != nil {
			return
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
			t.Fatalf("ParseTarget(%q) accepted %#v", s, u)
		}
	})
}
