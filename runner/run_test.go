package runner

import (
	"bytes"
	"context"
	"errors"
	"github.com/retrylab/retrylab/scenarios"
	"io"
	"math"
	"os/exec"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/internal/loghist"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

func mustParse(t testing.TB, src string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// decoded is a whole timeline, read by decode.
type decoded struct {
	meta *timeline.Meta
	atts []timeline.Attempt
	outs []timeline.Outcome
	end  *timeline.End
}

// decode reads a timeline; the decoder itself rejects a meta record that
// is not first and anything after the end record.
func decode(t *testing.T, b []byte) decoded {
	t.Helper()
	var d decoded
	dec := timeline.NewDecoder(bytes.NewReader(b))
	for {
		var rec timeline.Record
		err := dec.Decode(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("decoding the timeline: %v", err)
		}
		switch rec.Type {
		case timeline.TypeMeta:
			d.meta = rec.Meta
		case timeline.TypeAttempt:
			d.atts = append(d.atts, rec.Attempt)
		case timeline.TypeOutcome:
			d.outs = append(d.outs, rec.Outcome)
		case timeline.TypeEnd:
			d.end = rec.End
		}
	}
	if d.meta == nil {
		t.Fatal("timeline has no meta record")
	}
	return d
}

// decodeAll reads a timeline into its meta, attempts and outcomes.
func decodeAll(t *testing.T, b []byte) (*timeline.Meta, []timeline.Attempt, []timeline.Outcome) {
	t.Helper()
	d := decode(t, b)
	return d.meta, d.atts, d.outs
}

const smallOutage = `
name: small-outage
duration: 20s
server:
  phases:
    - {name: down, for: 1s, respond: {status: 503}, retry_after: {form: delta, value: 1}}
    - {name: up, respond: ok}
fleet: {clients: 20, requests: 3, think: 100ms, start: ramp 500ms, timeout: 10s}
subject: {name: retrylab, policy: {base: 50ms, cap: 1s, max_attempts: 5, budget: 8s}}
expect: {checks: [retry-after, attempts]}
`

func TestRunVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, smallOutage)
		var buf bytes.Buffer
		var mu sync.Mutex
		var last Progress
		calls := 0
		sum, err := Run(context.Background(), sc, RunOptions{Virtual: true, Seed: 7, Timeline: &buf,
			Progress: func(p Progress) { mu.Lock(); last = p; calls++; mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Planned != 60 || sum.Requests != 60 || sum.Results["ok"] != 60 || sum.Stopped != StoppedDone {
			t.Errorf("Summary = %+v; want 60 planned, 60 ok, stopped done", sum)
		}
		if sum.Unavailable503 < 10 || sum.Attempts != 60+sum.Unavailable503 {
			t.Errorf("Summary attempts %d, 503s %d; want every client of the first 500ms to meet a 503, then succeed", sum.Attempts, sum.Unavailable503)
		}
		if sum.TimelineBytes != int64(buf.Len()) {
			t.Errorf("TimelineBytes = %d; want %d", sum.TimelineBytes, buf.Len())
		}
		if calls < 2 || last.Done != 60 || last.Total != 60 || last.Attempts != sum.Attempts {
			t.Errorf("progress: %d calls, last %+v; want several, ending with 60/60 and %d attempts", calls, last, sum.Attempts)
		}
		meta, atts, outs := decodeAll(t, buf.Bytes())
		if !meta.Virtual || meta.Subject != "retrylab" || meta.Seed != 7 || meta.Recorder != "run" || meta.Policy == nil || len(meta.Phases) != 2 {
			t.Errorf("meta = %+v; want virtual, retrylab, seed 7, a stated policy, two phases", meta)
		}
		if int64(len(atts)) != sum.Attempts || len(outs) != 60 {
			t.Errorf("timeline has %d attempts and %d outcomes; want %d and 60", len(atts), len(outs), sum.Attempts)
		}
		for _, a := range atts {
			if a.Status == 503 && (!a.HasNotBefore || a.NotBefore-a.Done > int64(time.Second)+int64(time.Millisecond)) {
				t.Errorf("attempt %+v: 503 without a 1 s not_before", a)
				break
			}
		}
		for _, o := range outs {
			if o.Start < o.Scheduled || o.End < o.Start || o.Result != "ok" || o.Attempts < 1 {
				t.Errorf("outcome %+v; want scheduled <= start <= end, ok, attempts counted", o)
				break
			}
		}
	})
}

func TestRunWatchdogHung(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, `
duration: 1m
server: {phases: [{respond: {fault: hang}}]}
fleet: {clients: 3, requests: 2, timeout: 2s}
`)
		var buf bytes.Buffer
		start := time.Now()
		sum, err := Run(context.Background(), sc, RunOptions{Virtual: true, Subject: mustSubject(t, "no-retry"), Timeline: &buf})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Results["hung"] != 6 || sum.Stopped != StoppedDone {
			t.Errorf("Summary = %+v; want 6 hung, stopped done", sum)
		}
		if el := time.Since(start); el < 4*time.Second || el > 5*time.Second {
			t.Errorf("run took %v; want about two watchdog periods (4s)", el)
		}
		_, _, outs := decodeAll(t, buf.Bytes())
		for _, o := range outs {
			if o.Result != "hung" || o.Duration() != 2*time.Second {
				t.Errorf("outcome %+v; want hung after exactly 2s", o)
			}
		}
	})
}

func TestRunDurationCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, `
duration: 3s
server: {phases: [{respond: {fault: hang}}]}
fleet: {clients: 4, requests: 5, timeout: 1m}
`)
		var buf bytes.Buffer
		start := time.Now()
		sum, err := Run(context.Background(), sc, RunOptions{Virtual: true, Subject: mustSubject(t, "no-retry"), Timeline: &buf})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Results["canceled"] != 4 || sum.Requests != 4 || sum.Planned != 20 || sum.Stopped != StoppedDuration {
			t.Errorf("Summary = %+v; want 4 canceled of 20 planned, stopped by duration", sum)
		}
		if el := time.Since(start); el < 3*time.Second || el > 4*time.Second {
			t.Errorf("run took %v; want the 3s cap", el)
		}
		_, atts, outs := decodeAll(t, buf.Bytes())
		if len(outs) != 4 || len(atts) != 4 {
			t.Errorf("timeline: %d outcomes, %d attempts; want 4 and 4", len(outs), len(atts))
		}
	})
}

func TestRunCanceledStillSummarizes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, `
duration: 1m
fleet: {clients: 5, requests: 1000, think: 100ms}
`)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(2*time.Second, cancel)
		var buf bytes.Buffer
		sum, err := Run(ctx, sc, RunOptions{Virtual: true, Timeline: &buf})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Stopped != StoppedCanceled || sum.Requests < 50 || sum.Requests > 150 {
			t.Errorf("Summary = %+v; want canceled after about 100 requests", sum)
		}
		_, _, outs := decodeAll(t, buf.Bytes())
		if int64(len(outs)) != sum.Requests {
			t.Errorf("timeline has %d outcomes; want %d (flushed)", len(outs), sum.Requests)
		}
	})
}

func TestRunReal(t *testing.T) {
	sc := mustParse(t, `
duration: 10s
server:
  phases:
    - {name: down, for: 200ms, respond: {status: 503}}
    - {name: up, respond: ok}
fleet: {clients: 8, requests: 4, start: poisson 100/s}
subject: {policy: {base: 10ms, cap: 100ms, max_attempts: 20}}
`)
	var buf bytes.Buffer
	sum, err := Run(t.Context(), sc, RunOptions{Timeline: &buf, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Requests != 32 || sum.Results["ok"] != 32 {
		t.Errorf("Summary = %+v; want 32 ok", sum)
	}
	meta, atts, outs := decodeAll(t, buf.Bytes())
	if meta.Virtual || len(outs) != 32 || int64(len(atts)) != sum.Attempts {
		t.Errorf("real run: virtual %v, %d outcomes, %d attempts; want false, 32, %d", meta.Virtual, len(outs), len(atts), sum.Attempts)
	}
	if sum.StartLateness.Max > 5*time.Second {
		t.Errorf("StartLateness = %+v; want small", sum.StartLateness)
	}
}

func TestRunRefuses(t *testing.T) {
	sc := mustParse(t, "fleet: {clients: 1}\n")
	_, err := Run(context.Background(), sc, RunOptions{Virtual: true, Subject: subjects.Program{Path: "true"}})
	if !errors.Is(err, subjects.ErrRealTimeOnly) {
		t.Errorf("Run(virtual, exec) = %v; want ErrRealTimeOnly", err)
	}
	bad := *sc
	bad.Subject.Name = "nope"
	if _, err := Run(context.Background(), &bad, RunOptions{}); !errors.Is(err, ErrNoSubject) {
		t.Errorf("Run(unknown subject) = %v; want ErrNoSubject", err)
	}
}

func mustSubject(t *testing.T, name string) subjects.Subject {
	t.Helper()
	s, err := subjects.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestArrivals(t *testing.T) {
	a := newArrivals(scenarios.Arrival{Kind: scenarios.ArrivalRamp, Over: 10 * time.Second}, 5, 1)
	var got []time.Duration
	for range 5 {
		got = append(got, a.next())
	}
	want := []time.Duration{0, 2500 * time.Millisecond, 5 * time.Second, 7500 * time.Millisecond, 10 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ramp 10s over 5 clients: start[%d] = %v; want %v", i, got[i], want[i])
		}
	}
	b := newArrivals(scenarios.Arrival{Kind: scenarios.ArrivalBurst}, 3, 1)
	if x, y := b.next(), b.next(); x != 0 || y != 0 {
		t.Errorf("burst starts = %v, %v; want 0, 0", x, y)
	}
	p := newArrivals(scenarios.Arrival{Kind: scenarios.ArrivalPoisson, Rate: 100}, 20001, 3)
	var last time.Duration
	for range 20001 {
		last = p.next()
	}
	// 20000 gaps of mean 10ms: 200s, within a few standard deviations (1.4s).
	if math.Abs(last.Seconds()-200) > 6 {
		t.Errorf("poisson 100/s: the 20001st client starts at %v; want about 200s", last)
	}
	q := newArrivals(scenarios.Arrival{Kind: scenarios.ArrivalPoisson, Rate: 100}, 20001, 3)
	for range 100 {
		q.next()
	}
	r := newArrivals(scenarios.Arrival{Kind: scenarios.ArrivalPoisson, Rate: 100}, 20001, 3)
	for range 99 {
		r.next()
	}
	if x, y := q.next(), r.next(); x == y {
		t.Errorf("poisson arrivals do not advance: %v == %v", x, y)
	}
}

// TestLatenessSummary: the run's start lateness summary reads its
// quantiles within 1/16 above the exact ones, and the max exactly.
func TestLatenessSummary(t *testing.T) {
	h := loghist.NewAtomic(latenessLayout)
	for i := 1; i <= 1000; i++ {
		h.Add(int64(i) * int64(time.Millisecond))
	}
	s := summarizeLateness(h)
	near := func(got, want time.Duration) bool {
		return got >= want && float64(got) <= float64(want)*(1+1.0/16)
	}
	if !near(s.P50, 500*time.Millisecond) || !near(s.P99, 990*time.Millisecond) || s.Max != time.Second {
		t.Errorf("summary of 1..1000 ms = %+v; want p50 ≈ 500ms, p99 ≈ 990ms, max 1s", s)
	}
	if s := summarizeLateness(loghist.NewAtomic(latenessLayout)); s != (Lateness{}) {
		t.Errorf("summary of nothing = %+v; want zeros", s)
	}
}

// TestRunExec runs an exec subject, a shell loop over curl, in real time:
// one process per client; its output lines become the outcomes.
func TestRunExec(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	sc := mustParse(t, `
duration: 20s
server: {phases: [{respond: {mix: {200: 1}}}]}
fleet: {clients: 3, requests: 2}
`)
	prog := subjects.Program{Path: "sh", Args: []string{"-c", `
for i in $(seq 0 $((RETRYLAB_REQUESTS - 1))); do
  if curl -sf -o /dev/null "$RETRYLAB_BASE_URL/r/$i"; then echo "ok /r/$i"; else echo "fail /r/$i error curl"; fi
done`}}
	var buf bytes.Buffer
	sum, err := Run(t.Context(), sc, RunOptions{Subject: prog, Timeline: &buf})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Results["ok"] != 6 || sum.Attempts != 6 || sum.Subject != "exec" {
		t.Errorf("Summary = %+v; want 6 ok logical requests, 6 attempts", sum)
	}
	_, atts, outs := decodeAll(t, buf.Bytes())
	keys := map[string]bool{}
	for _, a := range atts {
		keys[a.Key] = true
	}
	for _, o := range outs {
		if !keys[o.Key] {
			t.Errorf("outcome %+v has no attempt; attempt keys %v", o, keys)
		}
	}
}

func TestConnCap(t *testing.T) {
	tests := []struct {
		requested, clients int
		virtual            bool
		limit, want        int
	}{
		{0, 100, false, 20000, 0},
		{0, 10000, false, 20000, 9872},
		{0, 10000, true, 20000, 0},
		{500, 10000, false, 20000, 500},
		{0, 10000, false, 0, 0},
		{0, 10, false, 100, 1},
	}
	for _, tt := range tests {
		if got := connCap(tt.requested, tt.clients, tt.virtual, tt.limit); got != tt.want {
			t.Errorf("connCap(%d, %d, %v, %d) = %d; want %d", tt.requested, tt.clients, tt.virtual, tt.limit, got, tt.want)
		}
	}
}

// countingLimiter counts the Takes of a memory limiter.
type countingLimiter struct {
	stubserver.Limiter
	mu    sync.Mutex
	takes int
}

func (c *countingLimiter) Take(ctx context.Context, ch stubserver.Charge, now time.Time) (stubserver.Decision, error) {
	c.mu.Lock()
	c.takes++
	c.mu.Unlock()
	return c.Limiter.Take(ctx, ch, now)
}

// TestRunNewLimiter: RunOptions.NewLimiter builds the stub's quota
// limiter, and every quota decision of the run is its.
func TestRunNewLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, `
name: q
duration: 20s
server:
  quota: {rate: 5/s, burst: 2}
  phases: [{name: q, respond: quota, retry_after: {form: delta, value: limiter}}]
fleet: {clients: 4, requests: 2, think: 100ms, start: ramp 400ms, timeout: 10s}
subject: {name: retrylab, policy: {base: 50ms, cap: 1s, max_attempts: 5, budget: 8s}}
`)
		var specs []stubserver.LimiterSpec
		var lim *countingLimiter
		sum, err := Run(context.Background(), sc, RunOptions{Virtual: true, Seed: 3,
			NewLimiter: func(spec stubserver.LimiterSpec) (stubserver.Limiter, error) {
				specs = append(specs, spec)
				mem, err := stubserver.NewMemoryLimiter(spec)
				lim = &countingLimiter{Limiter: mem}
				return lim, err
			}})
		if err != nil {
			t.Fatal(err)
		}
		if len(specs) != 1 || len(specs[0].Limits) != 1 || specs[0].Limits[0].Limit != 5 {
			t.Fatalf("NewLimiter got %+v; want the quota's one spec, 5/s", specs)
		}
		if lim.takes != int(sum.Attempts) || sum.Throttled429 == 0 {
			t.Errorf("%d Takes for %d attempts (%d 429s); want one Take per attempt, some rejected", lim.takes, sum.Attempts, sum.Throttled429)
		}
	})
}

// TestRunCapacity runs a stub with finite capacity in virtual time through
// the runner: a burst beyond the workers and the queue is partly rejected
// with 503 (Limit capacity), the rest waits; the client retries the 503s
// and every logical request ends ok. The meta record states the capacity
// and the trigger's share; the attempts carry their queue and service.
func TestRunCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := mustParse(t, `
name: cap
duration: 30s
server:
  capacity: {concurrency: 4, queue: 4, service: 100ms}
  phases:
    - {name: trigger, for: 2s, capacity: 50%, retry_after: {form: delta, value: 1}}
    - {name: after}
fleet: {clients: 12, requests: 2, start: ramp 10ms, timeout: 20s}
subject: {name: retrylab, policy: {base: 50ms, cap: 1s, max_attempts: 10, budget: 15s}}
`)
		var buf bytes.Buffer
		sum, err := Run(context.Background(), sc, RunOptions{Virtual: true, Seed: 5, Timeline: &buf})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Results["ok"] != 24 {
			t.Errorf("results %v; want all 24 ok", sum.Results)
		}
		meta, atts, _ := decodeAll(t, buf.Bytes())
		if meta.Capacity == nil || meta.Capacity.Concurrency != 4 || meta.Capacity.Queue != 4 || meta.Capacity.Service != int64(100*time.Millisecond) {
			t.Errorf("meta.Capacity = %+v; want 4 workers, 4 places, 100ms", meta.Capacity)
		}
		if len(meta.Phases) != 2 || meta.Phases[0].Capacity != 0.5 {
			t.Errorf("meta.Phases = %+v; want the trigger at 0.5", meta.Phases)
		}
		var rejected, queued, served int
		for _, a := range atts {
			switch {
			case a.Limit == timeline.LimitCapacity:
				rejected++
				if a.Status != 503 || a.Service != 0 || a.RetryAfter != "1" {
					t.Errorf("capacity rejection %+v; want 503, no service, Retry-After 1", a)
				}
			case a.Status == 200:
				served++
				if a.Service != int64(100*time.Millisecond) {
					t.Errorf("served attempt %+v; want 100ms of service", a)
				}
				if a.Queue > 0 {
					queued++
				}
			}
		}
		if rejected == 0 || queued == 0 || served != 24 {
			t.Errorf("%d rejected, %d queued before service, %d served; want some rejected, some queued, 24 served", rejected, queued, served)
		}
	})
}
