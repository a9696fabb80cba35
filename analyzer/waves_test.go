package analyzer

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/internal/testenv"
	"github.com/retrylab/retrylab/timeline"
)

var wavesTable = flag.Bool("waves-table", false, "print the waves measurements as a Markdown table (docs/design/waves.md)")

// A wavesStrategy is a client-paced backoff the waves measurements run.
type wavesStrategy struct {
	name    string
	delay   func(int, *rand.Rand, time.Duration) time.Duration
	delayAt func(int, *rand.Rand, time.Duration) time.Duration
	spread  bool // should pass
	mod     func(*sim)
	warn    bool // should raise server-induced synchronization (and not fail)
}

// honours makes a strategy honour a Retry-After of the given form, adding
// extra and U[0, jitter) to it.
func honours(form string, extra, jitter time.Duration) func(*sim) {
	return func(s *sim) {
		s.server, s.honorRA, s.raExtra, s.raJitter = outage(15*s1, form), true, extra, jitter
	}
}

func loaded(late time.Duration) func(*sim) { return func(s *sim) { s.late = late } }

// wavesStrategies: the mainstream jitters (must pass on every seed and
// start) and the synchronizing ones (must fail on every seed and start).
var wavesStrategies = []wavesStrategy{
	{name: "full jitter, base 100ms, cap 5s", delay: fullJitter(100*ms, 5*s1), spread: true},
	{name: "equal jitter, base 100ms, cap 5s", delay: equalJitter(100*ms, 5*s1), spread: true},
	{name: "decorrelated jitter, base 100ms, cap 5s", delay: decorrelated(100*ms, 5*s1), spread: true},
	{name: "gRPC: 1s·1.6^n, ±20%, cap 120s", delay: proportional(s1, 1.6, 120*s1, 0.2), spread: true},
	{name: "100ms·2^n, ±25%, cap 5s", delay: proportional(100*ms, 2, 5*s1, 0.25), spread: true},
	{name: "no jitter, base 100ms, cap 5s", delay: noJitter(100*ms, 5*s1)},
	{name: "fixed 1s", delay: fixed(s1)},
	{name: "2s ± 100ms (±5%)", delay: narrow(2*s1, 100*ms)},
	{name: "0, 1 or 2 s at random", delay: discrete(0, s1, 2*s1)},
	{name: "next whole second of the clock", delayAt: clockAligned(s1)},
	{name: "min(1s, 100ms·2^n·U[0.5,1.5]): jitter, then cap", delay: jitterThenCap(100*ms, s1)},
	{name: "0, then exactly 1, 2, 4 s (urllib3)", delay: urllib3()},
	{name: "0, then exactly 1, 2, 4 s (urllib3), host 300ms late", delay: urllib3(), mod: loaded(300 * ms)},
	{name: "fixed 1s, host 300ms late", delay: fixed(s1), mod: loaded(300 * ms)},
	{name: "full jitter, host 300ms late", delay: fullJitter(100*ms, 5*s1), spread: true, mod: loaded(300 * ms)},
	{name: "instant (0 s)", delay: fixed(0), spread: true},
	{name: "instant (0 s), host 390ms late", delay: fixed(0), spread: true, mod: loaded(390 * ms)},
	{name: "Retry-After 1 s + 0", delay: fixed(0), mod: honours("delta1", 0, 0), warn: true},
	{name: "Retry-After 1 s + 60ms", delay: fixed(0), mod: honours("delta1", 60*ms, 0), warn: true},
	{name: "Retry-After 1 s + 80ms", delay: fixed(0), mod: honours("delta1", 80*ms, 0), warn: true},
	{name: "Retry-After 1 s + 1s", delay: fixed(0), mod: honours("delta1", s1, 0), warn: true},
	{name: "Retry-After date + 80ms", delay: fixed(0), mod: honours("phase-end", 80*ms, 0), warn: true},
	{name: "Retry-After 1 s + U[0,100ms)", delay: fixed(0), spread: true, mod: honours("delta1", 0, 100*ms)},
	{name: "Retry-After 1 s + U[0,1s)", delay: fixed(0), spread: true, mod: honours("delta1", 0, s1)},
	{name: "Retry-After date + U[0,1s)", delay: fixed(0), spread: true, mod: honours("phase-end", 0, s1)},
}

// wavesStarts are the fleet's start patterns of the measurements.
var wavesStarts = []struct {
	name    string
	spread  time.Duration
	poisson bool
}{{"burst", 0, false}, {"ramp 10s", 10 * s1, false}, {"poisson 100/s", 10 * s1, true}}

// TestWavesMeasurements simulates fleets of 1,000 clients with each backoff
// strategy through a 15 s outage of bare 503s (max 8 attempts), under each
// start, and checks that the default threshold passes every mainstream
// jitter and fails every synchronizing strategy on every seed (3 seeds; 10
// with -waves-table, which prints the figures for docs/design/waves.md).
func TestWavesMeasurements(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("a measurement over thousands of simulated fleets: 2 minutes under the race detector; make matrix runs it without")
	}
	seeds := 3
	if *wavesTable {
		seeds = 10
	}
	if testing.Short() {
		seeds = 1
	}
	var table strings.Builder
	table.WriteString("| strategy | start | figure, min–max over seeds | worst cohort, reading (seed 1) | verdict | server-sync warning | busiest 100 ms window vs mean (seed 1) |\n|---|---|---:|---|---|---|---:|\n")
	for _, st := range wavesStrategies {
		for _, start := range wavesStarts {
			lo, hi := math.Inf(1), math.Inf(-1)
			var peak float64
			var worst string
			verdicts, warned := map[string]bool{}, map[bool]bool{}
			for seed := uint64(1); seed <= uint64(seeds); seed++ {
				s := sim{clients: 1000, seed: seed, spread: start.spread, poisson: start.poisson, server: outage(15*s1, ""),
					delay: st.delay, delayAt: st.delayAt, maxAttempts: 8, policy: policy(100*ms, 5*s1, 8, 60*s1, "full")}
				if st.mod != nil {
					st.mod(&s)
				}
				v := s.verdict(Options{})
				c := v.Check(CheckWaves)
				if seed == 1 {
					peak = peakToMean(s.records(), 100*ms)
					worst = "—"
					if i := strings.Index(c.Reason, ":"); c.Status != StatusSkip && i > 0 {
						worst = strings.TrimPrefix(c.Reason[:i], "worst cohort ")
						if j := strings.Index(c.Reason, "(worst: "); j > 0 {
							worst += ", " + strings.SplitN(strings.SplitN(c.Reason[j+8:], ";", 2)[0], " (", 2)[0]
						}
					}
				}
				if c.Status != StatusSkip {
					lo, hi = min(lo, c.Figure), max(hi, c.Figure)
				}
				verdicts[c.Status] = true
				warned[hasWarning(v, WarnServerSync)] = true
				want := map[bool]string{true: StatusPass, false: StatusFail}[st.spread]
				switch {
				case s.late > 0 && c.Status == StatusInconclusive:
					// A loaded host may leave it open, never on the
					// wrong side (the power table in docs/checks.md).
				case st.warn && c.Status == StatusFail:
					t.Errorf("%s, %s start, seed %d: waves failed (%s); want the server's pacing", st.name, start.name, seed, c.Reason)
				case !st.warn && c.Status != want:
					t.Errorf("%s, %s start, seed %d: waves = %s (%s: %s); want %s", st.name, start.name, seed, c.Status, fmtFigure(c.Figure, c.Unit), c.Reason, want)
				}
				if got := hasWarning(v, WarnServerSync); got != st.warn {
					t.Errorf("%s, %s start, seed %d: server-induced-synchronization warning = %v; want %v", st.name, start.name, seed, got, st.warn)
				}
			}
			v := "fail"
			switch {
			case len(verdicts) > 1:
				v = "flips"
			case verdicts[StatusPass]:
				v = "pass"
			case verdicts[StatusSkip]:
				v = "skip"
			}
			w := map[bool]string{true: "yes", false: "no"}[warned[true]]
			if len(warned) > 1 {
				w = "flips"
			}
			fig := "—"
			if !math.IsInf(lo, 0) {
				fig = fmt.Sprintf("%.1f–%.1f", lo, hi)
			}
			fmt.Fprintf(&table, "| %s | %s | %s | %s | %s | %s | %.1f× |\n", st.name, start.name, fig, worst, v, w, peak)
		}
	}
	if *wavesTable {
		t.Logf("waves at the default threshold %.0f, %d seeds:\n%s", defaultWaves, seeds, table.String())
	}
}

// peakToMean is the symptom waves are about: the most retries arriving in
// one window, over the mean per window across the span of the retries.
func peakToMean(recs []timeline.Record, window time.Duration) float64 {
	counts := map[int64]int{}
	var first, last int64 = -1, 0
	n := 0
	for _, r := range recs {
		if r.Type != timeline.TypeAttempt || r.Attempt.Attempt < 2 {
			continue
		}
		w := r.Attempt.At / int64(window)
		counts[w]++
		if first < 0 || w < first {
			first = w
		}
		last = max(last, w)
		n++
	}
	best := 0
	for _, c := range counts {
		best = max(best, c)
	}
	if n == 0 {
		return 0
	}
	return float64(best) / (float64(n) / float64(last-first+1))
}

// proportional is min(cap, base·mult^(k-1)) · U[1-p, 1+p] (gRPC's shape).
func proportional(base time.Duration, mult float64, cap time.Duration, p float64) func(int, *rand.Rand, time.Duration) time.Duration {
	return func(k int, r *rand.Rand, _ time.Duration) time.Duration {
		d := min(float64(cap), float64(base)*math.Pow(mult, float64(k-1)))
		return time.Duration(d * (1 - p + 2*p*r.Float64()))
	}
}

// discrete picks one of the delays at random.
func discrete(ds ...time.Duration) func(int, *rand.Rand, time.Duration) time.Duration {
	return func(_ int, r *rand.Rand, _ time.Duration) time.Duration { return ds[r.IntN(len(ds))] }
}

// clockAligned waits until the next whole multiple of unit of the clock.
func clockAligned(unit time.Duration) func(int, *rand.Rand, time.Duration) time.Duration {
	return func(_ int, _ *rand.Rand, now time.Duration) time.Duration { return now.Truncate(unit) + unit - now }
}

// jitterThenCap is min(cap, base·2^(k-1)·U[0.5,1.5]): jitter first, then
// the cap, so late retries all wait exactly the cap.
func jitterThenCap(base, cap time.Duration) func(int, *rand.Rand, time.Duration) time.Duration {
	return func(k int, r *rand.Rand, _ time.Duration) time.Duration {
		d := float64(base<<(k-1)) * (0.5 + r.Float64())
		return min(cap, time.Duration(d))
	}
}

// urllib3 is a common Python client's default: the first retry at once,
// then 1, 2, 4 s... exactly (backoff_factor 0.5, no jitter).
func urllib3() func(int, *rand.Rand, time.Duration) time.Duration {
	return func(k int, _ *rand.Rand, _ time.Duration) time.Duration {
		if k == 1 {
			return 0
		}
		return min(120*s1, s1<<(k-2))
	}
}

func hasWarning(v *Verdict, id string) bool {
	for _, w := range v.Warnings {
		if w.ID == id {
			return true
		}
	}
	return false
}

// TestWavesIssueRows gives each probe of issue 11 the verdict it deserves
// (500 clients, 15 s outage of bare 503s unless the row says otherwise).
func TestWavesIssueRows(t *testing.T) {
	bare := func(d func(int, *rand.Rand, time.Duration) time.Duration) sim {
		return sim{clients: 500, server: outage(15*s1, ""), delay: d, maxAttempts: 8, policy: policy(100*ms, 5*s1, 8, 60*s1, "full")}
	}
	tests := []struct {
		name string
		sim  sim
		want string
	}{
		{"three discrete delays form three waves", bare(discrete(0, s1, 2*s1)), StatusFail},
		{"next whole second, 2 s ramp", func() sim { s := bare(nil); s.delayAt, s.spread = clockAligned(s1), 2*s1; return s }(), StatusFail},
		{"jitter, then cap: late retries in lockstep at the cap", bare(jitterThenCap(100*ms, s1)), StatusFail},
		{"gRPC ±20% jitter", bare(proportional(s1, 1.6, 120*s1, 0.2)), StatusPass},
		{"one client alone cannot form a wave", func() sim { s := bare(fixed(100 * ms)); s.clients, s.maxAttempts = 1, 0; return s }(), StatusSkip},
		{"instant retries, virtual time", bare(fixed(0)), StatusPass},
		// Retries at once smeared by 390 ms of lateness may have been
		// waits of 190 ms in lockstep: open, never failed.
		{"instant retries on a loaded host", func() sim { s := bare(fixed(0)); s.late = 390 * ms; return s }(), StatusInconclusive},
		{"0 then exactly 1, 2, 4 s, 100 clients on a loaded host", func() sim { s := bare(urllib3()); s.clients, s.late = 100, 300*ms; return s }(), StatusFail},
		{"0 then exactly 1, 2, 4 s, virtual time", bare(urllib3()), StatusFail},
	}
	for _, tt := range tests {
		for seed := uint64(1); seed <= 3; seed++ {
			tt.sim.seed = seed
			v := tt.sim.verdict(Options{})
			if c := v.Check(CheckWaves); c.Status != tt.want {
				t.Errorf("%s, seed %d: waves = %s (%s: %s); want %s", tt.name, seed, c.Status, fmtFigure(c.Figure, c.Unit), c.Reason, tt.want)
			}
		}
	}
}

// TestWavesRetryAfterContinuity: a client that honours Retry-After and adds
// a constant is paced by the server whatever the constant (the warning, no
// failure, no cliff); one that adds jitter on top passes without a warning.
func TestWavesRetryAfterContinuity(t *testing.T) {
	for _, form := range []string{"delta1", "phase-end"} {
		for _, extra := range []time.Duration{0, 20 * ms, 60 * ms, 80 * ms, 200 * ms, s1, 3 * s1} {
			for seed := uint64(1); seed <= 3; seed++ {
				s := sim{clients: 500, seed: seed, spread: 2 * s1, server: outage(15*s1, form), honorRA: true, raExtra: extra,
					delay: fullJitter(100*ms, 5*s1), maxAttempts: 8, policy: policy(100*ms, 5*s1, 8, 60*s1, "full")}
				v := s.verdict(Options{})
				if c := v.Check(CheckWaves); c.Status == StatusFail {
					t.Errorf("%s + %v, seed %d: waves failed (%s); want the server's pacing, not the client's", form, extra, seed, c.Reason)
				}
				if !hasWarning(v, WarnServerSync) {
					t.Errorf("%s + %v, seed %d: no %s warning", form, extra, seed, WarnServerSync)
				}
				if v.Figures.ServerPaced == 0 || v.Figures.ClientPaced != 0 {
					t.Errorf("%s + %v, seed %d: server-paced %d, client-paced %d; want all server-paced", form, extra, seed, v.Figures.ServerPaced, v.Figures.ClientPaced)
				}
			}
		}
		for seed := uint64(1); seed <= 6; seed++ {
			jitter := map[bool]time.Duration{true: s1, false: 100 * ms}[seed <= 3] // a wide and a small jitter on top
			s := sim{clients: 500, seed: seed, spread: 2 * s1, server: outage(15*s1, form), honorRA: true, raJitter: jitter,
				delay: fullJitter(100*ms, 5*s1), maxAttempts: 8, policy: policy(100*ms, 5*s1, 8, 60*s1, "full")}
			v := s.verdict(Options{})
			if c := v.Check(CheckWaves); c.Status != StatusPass {
				t.Errorf("%s + U(0,%v), seed %d: waves = %s (%s); want pass", form, jitter, seed, c.Status, c.Reason)
			}
			if hasWarning(v, WarnServerSync) {
				t.Errorf("%s + U(0,%v), seed %d: %s warning with jitter on top of Retry-After", form, jitter, seed, WarnServerSync)
			}
		}
	}
}

// TestWavesRetryAfterLoadedHost: honouring Retry-After exactly on a loaded
// host (every start and wait U[0, 300ms) late) is still the server's
// pacing: the slack grows with the measured start lateness.
func TestWavesRetryAfterLoadedHost(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		s := sim{clients: 500, seed: seed, spread: 2 * s1, late: 300 * ms, server: outage(15*s1, "phase-end"), honorRA: true,
			delay: fullJitter(100*ms, 5*s1), maxAttempts: 8, policy: policy(100*ms, 5*s1, 8, 60*s1, "full")}
		v := s.verdict(Options{})
		if c := v.Check(CheckWaves); c.Status == StatusFail || !hasWarning(v, WarnServerSync) {
			t.Errorf("seed %d: waves %s (%s), warning %v; want no failure and the warning", seed, c.Status, c.Reason, hasWarning(v, WarnServerSync))
		}
	}
}

// TestWavesNoSyncWarningWithoutRetryAfter: client-paced retries never raise
// the server-synchronization warning, however many arrive per 100 ms (a
// uniform 200-client 2 s ramp reached the old absolute count by itself).
func TestWavesNoSyncWarningWithoutRetryAfter(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		s := sim{clients: 200, seed: seed, spread: 2 * s1, requests: 5, server: outage(5*s1, ""), delay: fullJitter(100*ms, 5*s1),
			maxAttempts: 8, policy: policy(100*ms, 5*s1, 8, 60*s1, "full")}
		if v := s.verdict(Options{}); hasWarning(v, WarnServerSync) || !v.Pass {
			t.Errorf("seed %d: warning %v, pass %v; want neither warning nor failure: %s", seed, hasWarning(v, WarnServerSync), v.Pass, describe(v))
		}
	}
}

// TestWavesLoadedHost: a fleet slowed on purpose (every start and every
// wait comes U[0, late) late, and the outcomes show the start lateness,
// the host's lateness when it measured none) does not make lockstep pass
// nor jitter fail: each is decided, or left open.
func TestWavesLoadedHost(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("simulated fleets on many seeds, 17 s under the race detector: make matrix runs it without")
	}
	tests := []struct {
		name  string
		delay func(int, *rand.Rand, time.Duration) time.Duration
		late  time.Duration
		want  string
	}{
		{"fixed 1s, 100ms late", fixed(s1), 100 * ms, StatusFail},
		{"fixed 1s, 300ms late", fixed(s1), 300 * ms, StatusFail},
		{"no jitter, 200ms late", noJitter(100*ms, 5*s1), 200 * ms, StatusFail},
		{"full jitter, 300ms late", fullJitter(100*ms, 5*s1), 300 * ms, StatusPass},
		{"±25%, 100ms late", proportional(100*ms, 2, 5*s1, 0.25), 100 * ms, StatusPass},
		{"instant, 390ms late", fixed(0), 390 * ms, StatusPass},
	}
	for _, tt := range tests {
		for _, start := range wavesStarts {
			for seed := uint64(1); seed <= 3; seed++ {
				s := sim{clients: 1000, seed: seed, spread: start.spread, poisson: start.poisson, late: tt.late, server: outage(15*s1, ""),
					delay: tt.delay, maxAttempts: 8, policy: policy(100*ms, 5*s1, 8, 60*s1, "full")}
				if c := s.verdict(Options{}).Check(CheckWaves); c.Status != tt.want && c.Status != StatusInconclusive {
					t.Errorf("%s, %s, seed %d: waves = %s (%s); want %s, or inconclusive", tt.name, start.name, seed, c.Status, c.Reason, tt.want)
				}
			}
		}
	}
}

// TestWavesReservoirUniform: a cohort of 200,000 retries keeps a uniform
// sample of 2,048 (Algorithm L): each tenth of the stream holds about a
// tenth of the sample.
func TestWavesReservoirUniform(t *testing.T) {
	an := New(nil, Options{})
	st := &keyState{client: "c"}
	const n = 200_000
	for i := range n {
		p := attemptLite{n: 1, status: 503, done: int64(i)}
		x := attemptLite{n: 2, at: int64(i) + 1}
		an.waveRetry(st, "k", 1, &p, &x, p.done, false)
	}
	c := &an.wv.cohorts[0]
	if c.seen != n || len(c.sample) != waveSample {
		t.Fatalf("seen %d, sample %d; want %d, %d", c.seen, len(c.sample), n, waveSample)
	}
	var tenths [10]int
	for _, r := range c.sample {
		tenths[r.trigger*10/n]++
	}
	for i, k := range tenths {
		// Binomial(2048, 0.1): mean 204.8, sd 13.6; ±5 sd.
		if k < 137 || k > 273 {
			t.Errorf("tenth %d of the stream holds %d of %d sampled retries; want about 205 (all: %v)", i, k, waveSample, tenths)
		}
	}
}

// TestWavesWithoutOutcomes: a serve recording has no outcomes, hence no
// measured lateness. Fixed 1 s waits made U[0, 100ms) late still fail; made
// U[0, 300ms) late they pass without outcomes (the noise reads as spread)
// and fail with them (the run's start lateness is subtracted), as
// docs/design/waves.md says.
func TestWavesWithoutOutcomes(t *testing.T) {
	judge := func(late time.Duration, outcomes bool) CheckResult {
		s := sim{clients: 1000, seed: 1, spread: 10 * s1, late: late, server: outage(15*s1, ""), delay: fixed(s1),
			maxAttempts: 8, policy: policy(100*ms, 5*s1, 8, 60*s1, "full")}
		recs := s.records()
		an := New(recs[0].Meta, Options{})
		for i := 1; i < len(recs); i++ {
			if outcomes || recs[i].Type != timeline.TypeOutcome {
				an.Add(&recs[i])
			}
		}
		return *an.Result().Check(CheckWaves)
	}
	for _, tt := range []struct {
		late     time.Duration
		outcomes bool
		want     string
	}{
		{100 * ms, false, StatusFail},
		// Without outcomes nothing shows the host's lateness: as read.
		{300 * ms, false, StatusPass},
		// With them, lockstep smeared by 300 ms is open, not passed.
		{300 * ms, true, StatusInconclusive},
	} {
		if c := judge(tt.late, tt.outcomes); c.Status != tt.want {
			t.Errorf("fixed 1s, %v late, outcomes %v: waves = %s (%s); want %s", tt.late, tt.outcomes, c.Status, c.Reason, tt.want)
		}
	}
}
