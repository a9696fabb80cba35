package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// decodeEnd returns the timeline's meta and end records (the decoder
// keeps the end record last and single).
func decodeEnd(t *testing.T, b []byte) (*timeline.Meta, *timeline.End) {
	t.Helper()
	d := decode(t, b)
	if d.end == nil {
		t.Fatal("timeline lacks its end record")
	}
	return d.meta, d.end
}

func TestRunEndCompleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, smallOutage)
		var buf bytes.Buffer
		sum, err := Run(context.Background(), sc, RunOptions{Virtual: true, Seed: 7, Timeline: &buf})
		if err != nil {
			t.Fatal(err)
		}
		meta, end := decodeEnd(t, buf.Bytes())
		if meta.Scheduled != 60 {
			t.Errorf("meta.Scheduled = %d; want 20 clients × 3 requests = 60", meta.Scheduled)
		}
		if end.Reason != timeline.EndCompleted || end.InFlight != 0 || end.Unstarted != 0 || end.DialErrors != 0 || len(end.Errors) != 0 {
			t.Errorf("end = %+v; want completed, nothing in flight or unstarted, no errors", end)
		}
		// A goroutine fleet has no start barrier: fleet_ready is an exec
		// fleet's (the ramp launching its last client is not readiness).
		if end.FleetReady != 0 {
			t.Errorf("end.FleetReady = %v; want none for a goroutine fleet", time.Duration(end.FleetReady))
		}
		if end.At <= 0 || sum.End.Reason != end.Reason {
			t.Errorf("end.At = %d, Summary.End = %+v; want a positive instant and the same end", end.At, sum.End)
		}
	})
}

// hangScenario: every request hangs; 4 clients × 5 requests; the cap stops
// the run with 4 in flight and 16 never started.
const hangScenario = `
duration: 3s
server: {phases: [{respond: {fault: hang}}]}
fleet: {clients: 4, requests: 5, timeout: 1m}
`

func TestRunEndDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, hangScenario)
		var buf bytes.Buffer
		start := time.Now()
		sum, err := Run(context.Background(), sc, RunOptions{Virtual: true, Subject: mustSubject(t, "no-retry"), Timeline: &buf})
		if err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el > 3*time.Second+StopGrace {
			t.Errorf("run took %v; want at most the 3s cap + StopGrace (%v)", el, StopGrace)
		}
		_, end := decodeEnd(t, buf.Bytes())
		want := timeline.End{Reason: timeline.EndDuration, InFlight: 4, Unstarted: 16}
		if end.Reason != want.Reason || end.InFlight != want.InFlight || end.Unstarted != want.Unstarted || end.Signal != "" || len(end.Errors) != 0 {
			t.Errorf("end = %+v; want reason duration, 4 in flight, 16 unstarted", end)
		}
		if end.At < int64(3*time.Second) || end.At > int64(3*time.Second+StopGrace) {
			t.Errorf("end.At = %v; want the 3s cap (within StopGrace)", time.Duration(end.At))
		}
		if sum.Stopped != StoppedDuration || sum.End.InFlight != 4 {
			t.Errorf("Summary stopped %q, end %+v; want duration, 4 in flight", sum.Stopped, sum.End)
		}
	})
}

// A signal mid-run: requests in flight become canceled and are counted;
// the end record names the signal.
func TestRunEndInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, `
duration: 1m
server: {phases: [{respond: {fault: hang}}]}
fleet: {clients: 3, requests: 2, timeout: 1m}
`)
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(2*time.Second, func() { cancel(&Interrupt{Signal: "SIGTERM"}) })
		var buf bytes.Buffer
		sum, err := Run(ctx, sc, RunOptions{Virtual: true, Subject: mustSubject(t, "no-retry"), Timeline: &buf})
		if err != nil {
			t.Fatal(err)
		}
		_, end := decodeEnd(t, buf.Bytes())
		if end.Reason != timeline.EndInterrupted || end.Signal != "SIGTERM" || end.InFlight != 3 || end.Unstarted != 3 {
			t.Errorf("end = %+v; want interrupted by SIGTERM, 3 in flight, 3 unstarted", end)
		}
		if sum.Results[timeline.ResultCanceled] != 3 || sum.Stopped != StoppedCanceled {
			t.Errorf("Summary = %+v; want 3 canceled, stopped canceled", sum)
		}
	})
}

// failAfter fails every write once n bytes have been written, as a full
// disk does.
type failAfter struct {
	mu     sync.Mutex
	n      int
	writes int
}

var errDiskFull = errors.New("no space left on device")

func (f *failAfter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if len(p) > f.n {
		n := f.n
		f.n = 0
		return n, errDiskFull
	}
	f.n -= len(p)
	return len(p), nil
}

// The first timeline write error stops the run at once: the fleet is
// canceled, Run returns a TimelineError naming the file.
func TestRunWriteErrorStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, `
duration: 1m
fleet: {clients: 5, requests: 1000, think: 10ms}
`)
		w := &failAfter{n: 4096}
		start := time.Now()
		sum, err := Run(context.Background(), sc, RunOptions{Virtual: true, Timeline: w})
		var te *TimelineError
		if !errors.As(err, &te) || !errors.Is(err, errDiskFull) || te.Path != "" || !strings.HasPrefix(err.Error(), "timeline: ") {
			t.Fatalf("Run error = %v; want a TimelineError wrapping the write error (no path: Run's Timeline is a writer)", err)
		}
		if el := time.Since(start); el > time.Second+StopGrace {
			t.Errorf("run went on for %v after a write error; want it to stop within about a flush (100ms) + StopGrace", el)
		}
		if sum == nil || sum.Stopped != StoppedWriteError || sum.End.Reason != timeline.EndWriteError || len(sum.End.Errors) == 0 {
			t.Fatalf("Summary = %+v; want stopped by the write error, with it in End.Errors", sum)
		}
		if sum.Requests >= sum.Planned/2 {
			t.Errorf("%d of %d requests made; the run did not stop", sum.Requests, sum.Planned)
		}
	})
}

// The cap holds for a fleet far larger than the handful above: 2000
// clients that all hang end within StopGrace of the cap.
func TestRunStopsAtCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, `
duration: 2s
server: {phases: [{respond: {fault: hang}}]}
fleet: {clients: 2000, requests: 3, timeout: 1m}
`)
		start := time.Now()
		sum, err := Run(context.Background(), sc, RunOptions{Virtual: true, Subject: mustSubject(t, "no-retry"), Timeline: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el > 2*time.Second+StopGrace || sum.Flushed > 2*time.Second+StopGrace || sum.Flushed < 2*time.Second {
			t.Errorf("run took %v, over at %v; want at most the cap + StopGrace", el, sum.Flushed)
		}
		if sum.End.Reason != timeline.EndDuration || sum.End.InFlight != 2000 || sum.End.Unstarted != 4000 {
			t.Errorf("end = %+v; want duration, 2000 in flight, 4000 unstarted", sum.End)
		}
	})
}

func TestDialErrorsCounted(t *testing.T) {
	r := &runner{}
	boom := errors.New("socket: too many open files")
	var calls atomic.Int64
	dial := r.countDials(func(ctx context.Context, _, _ string) (net.Conn, error) {
		calls.Add(1)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, boom
	})
	dial(context.Background(), "tcp", "x")
	dial(context.Background(), "tcp", "x")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dial(ctx, "tcp", "x") // a canceled request's dial is not the harness's failure
	if got := r.dialErrors.Load(); got != 2 || calls.Load() != 3 {
		t.Errorf("dial errors = %d after 3 dials (1 canceled); want 2", got)
	}

	l := &countingListener{Listener: &errListener{errs: []error{boom, boom, net.ErrClosed}}, errs: &r.dialErrors}
	for range 3 {
		l.Accept()
	}
	if got := r.dialErrors.Load(); got != 4 {
		t.Errorf("dial errors = %d after 2 failed accepts; want 4", got)
	}
}

type errListener struct {
	net.Listener
	errs []error
}

func (l *errListener) Accept() (net.Conn, error) {
	err := l.errs[0]
	l.errs = l.errs[1:]
	return nil, err
}

// The same in real time over loopback, with a handful of clients: the
// stub's listener is closed once by the runner and once by its shutdown,
// which must not show up as a harness error. A real-time run also
// measures the host's noise while its fleet runs (the scheduler's
// latencies and the sleep loop: no probe for a goroutine fleet) and
// writes it in the end record and the Summary.
func TestRunEndDurationReal(t *testing.T) {
	sc := mustParse(t, `
duration: 300ms
server: {phases: [{respond: {fault: hang}}]}
fleet: {clients: 3, requests: 2, timeout: 1m}
`)
	var buf bytes.Buffer
	sum, err := Run(t.Context(), sc, RunOptions{Subject: mustSubject(t, "no-retry"), Timeline: &buf})
	if err != nil {
		t.Fatal(err)
	}
	_, end := decodeEnd(t, buf.Bytes())
	if end.Reason != timeline.EndDuration || end.InFlight != 3 || end.Unstarted != 3 || len(end.Errors) != 0 || end.DialErrors != 0 {
		t.Errorf("end = %+v; want duration, 3 in flight, 3 unstarted, no errors", end)
	}
	if sum.Flushed < 300*time.Millisecond || sum.Flushed > 300*time.Millisecond+StopGrace {
		t.Errorf("over at %v; want within StopGrace of the 300ms cap", sum.Flushed)
	}
	checkNoise(t, end.Noise, timeline.NoiseSched+"+"+timeline.NoiseSleep+"+"+timeline.NoiseStamp)
	if sum.End.Noise == nil || *sum.End.Noise != *end.Noise {
		t.Errorf("Summary.End.Noise = %v; want the end record's %+v", sum.End.Noise, end.Noise)
	}
}

// A detached run (the CLI's) returns once its timeline is whole, leaving
// its fleet parked on the stub: clients retrying through an outage and
// then hanging are in flight at the cap, and every one gets its canceled
// outcome before the end record.
func TestRunDetach(t *testing.T) {
	sc := mustParse(t, `
duration: 300ms
server: {phases: [{for: 100ms, respond: {status: 503}}, {respond: {fault: hang}}]}
fleet: {clients: 4, requests: 2, timeout: 1m}
subject: {policy: {base: 10ms, budget: 1m}}
`)
	var buf bytes.Buffer
	sum, err := Run(t.Context(), sc, RunOptions{Subject: mustSubject(t, "retrylab"), Timeline: &buf, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	_, end := decodeEnd(t, buf.Bytes())
	if end.Reason != timeline.EndDuration || end.InFlight != 4 || end.Unstarted != 4 || len(end.Errors) != 0 {
		t.Errorf("end = %+v; want duration, 4 in flight, 4 unstarted, no errors", end)
	}
	if sum.Flushed < 300*time.Millisecond || sum.Flushed > 300*time.Millisecond+StopGrace {
		t.Errorf("over at %v; want within StopGrace of the 300ms cap", sum.Flushed)
	}
	if sum.Attempts == 0 {
		t.Errorf("attempts = 0; want the clients' retries recorded up to the cap")
	}
}

// TestSealWalksInParts: a fleet large enough to be walked in parts gets
// every request in flight back once, in slot order, counted, and every
// idle slot closed.
func TestSealWalksInParts(t *testing.T) {
	r := &runner{slots: make([]slot, 3*sealPart+17)}
	var want []string
	for i := range r.slots {
		if i%7 == 0 {
			o := timeline.Outcome{Client: strconv.Itoa(i), Key: strconv.Itoa(i) + "/0", Start: 5}
			r.slots[i].begin(&o)
			want = append(want, o.Key)
		}
	}
	pending := r.seal(9)
	if len(pending) != len(want) || r.inFlight.Load() != int64(len(want)) || r.done.Load() != int64(len(want)) {
		t.Fatalf("seal returned %d outcomes, counted %d in flight, %d done; want %d", len(pending), r.inFlight.Load(), r.done.Load(), len(want))
	}
	for i, o := range pending {
		if o.Key != want[i] || o.Result != timeline.ResultCanceled || o.End != 9 {
			t.Fatalf("pending[%d] = %+v; want %s canceled at 9, in slot order", i, o, want[i])
		}
	}
	for i := range r.slots {
		if st := r.slots[i].state.Load(); (i%7 == 0 && st != slotTaken) || (i%7 != 0 && st != slotClosed) {
			t.Fatalf("slot %d state %d after seal", i, st)
		}
	}
}
