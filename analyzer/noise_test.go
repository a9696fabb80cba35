package analyzer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// noiseOf states host noise of p99 late.
func noiseOf(late time.Duration) *timeline.Noise {
	return &timeline.Noise{Source: timeline.NoiseSched + "+" + timeline.NoiseSleep, P50: int64(late) / 4, P99: int64(late), Max: 2 * int64(late), Samples: 1000}
}

// constantDelay waits d before every retry.
func constantDelay(d time.Duration) func(int, *rand.Rand, time.Duration) time.Duration {
	return func(int, *rand.Rand, time.Duration) time.Duration { return d }
}

// TestNoiseNeverDecides is the class: for each check with a time window, a
// client the host made look worse is not failed, and one the host made look
// better is not passed. With the noise measured, the verdict is FAIL only
// on what noise cannot explain, and INCONCLUSIVE where its range
// straddles the threshold.
func TestNoiseNeverDecides(t *testing.T) {
	jit := policy(100*ms, 2*s1, 8, 20*s1, "full")
	tests := []struct {
		name  string
		sim   sim
		check string
		want  string // check status
		// verdict: the verdict wanted (pass, fail, inconclusive)
		verdict string
		before  string // the check's status without the measurement (the old behaviour)
	}{
		// A client with no backoff that the host ran 60-120 ms late: its
		// "instant" retries passed the absolute 50 ms window. Within the
		// window plus the lateness they may have been instant: open.
		{"instant retries made late", sim{clients: 50, server: outage(3*s1, ""), delay: func(int, *rand.Rand, time.Duration) time.Duration {
			return 60*ms + 0
		}, late: 60 * ms, maxAttempts: 8, seed: 1, policy: jit, noise: noiseOf(120 * ms)},
			CheckInstantRetry, StatusInconclusive, VerdictInconclusive, ""},
		// Retries 20 ms after the response are instant whatever the host
		// did: it only lengthens gaps.
		{"instant retries on a noisy host", sim{clients: 50, server: outage(3*s1, ""), delay: constantDelay(20 * ms), maxAttempts: 8, seed: 1, policy: jit, noise: noiseOf(470 * ms)},
			CheckInstantRetry, StatusFail, VerdictFail, StatusFail},
		// A full-jitter client on a host whose noise is as large as its
		// jitter: it cannot be told from an instant retrier, so
		// instant-retry does not vouch for it.
		{"jitter within the noise", sim{clients: 50, server: outage(3*s1, ""), delay: fullJitter(100*ms, 2*s1), maxAttempts: 8, seed: 2, policy: jit, noise: noiseOf(200 * ms)},
			CheckInstantRetry, StatusInconclusive, VerdictInconclusive, StatusPass},
		// Lockstep waits of 200 ms smeared by 60 ms of host lateness: the
		// spread reads as jitter. Without the measurement it passed; with
		// it the pairs within the lateness count at the high end: open.
		{"lockstep smeared", sim{clients: 100, server: outage(3*s1, ""), delay: constantDelay(200 * ms), late: 60 * ms, maxAttempts: 6, seed: 3,
			policy: policy(200*ms, 200*ms, 6, 20*s1, "none"), noise: noiseOf(60 * ms), expect: &timeline.Expect{Require: []string{CheckWaves}}},
			CheckWaves, StatusInconclusive, VerdictInconclusive, ""},
		// The budget overrun the host may have made: 1.1 s past a 10 s
		// budget with a 1 s tolerance is within 1 s + 9 × 150 ms: it is not
		// failed, and not passed either.
		{"budget overrun by the host", sim{clients: 20, server: always(503), delay: constantDelay(1 * s1), maxAttempts: 30, budget: 10 * s1, overrun: 1100 * ms, seed: 4,
			policy: policy(s1, s1, 30, 10*s1, "none"), noise: noiseOf(150 * ms), expect: &timeline.Expect{Checks: []string{CheckBudget}}},
			CheckBudget, StatusInconclusive, VerdictInconclusive, StatusFail},
		// An overrun of seconds is the client's whatever the noise.
		{"budget ignored", sim{clients: 20, server: always(503), delay: constantDelay(1 * s1), maxAttempts: 40, budget: 10 * s1, overrun: 8 * s1, seed: 5,
			policy: policy(s1, s1, 40, 10*s1, "none"), noise: noiseOf(150 * ms), expect: &timeline.Expect{Checks: []string{CheckBudget}}},
			CheckBudget, StatusFail, VerdictFail, StatusFail},
		// Waits 40 ms over the policy's bound, maybe by the host: open.
		{"jitter bound overrun by the host", sim{clients: 50, server: outage(3*s1, ""), delay: func(k int, r *rand.Rand, _ time.Duration) time.Duration {
			return min(2*s1, 100*ms<<(k-1)) + 40*ms
		}, maxAttempts: 8, seed: 6, policy: jit, noise: noiseOf(50 * ms), expect: &timeline.Expect{Checks: []string{CheckJitterBounds}}},
			CheckJitterBounds, StatusInconclusive, VerdictInconclusive, StatusFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.sim.verdict(Options{})
			c := v.Check(tt.check)
			if tt.want != "" && c.Status != tt.want {
				t.Errorf("%s = %s (%s); want %s", tt.check, c.Status, c.Reason, tt.want)
			}
			if v.Status != tt.verdict {
				t.Errorf("verdict %s (failed %v, inconclusive %q); want %s", v.Status, v.Failed(), v.Inconclusive, tt.verdict)
			}
			if tt.verdict == VerdictInconclusive && !strings.Contains(strings.Join(v.Inconclusive, "\n"), "could not decide under this host's noise") {
				t.Errorf("inconclusive %q; want the noise named", v.Inconclusive)
			}
			if tt.want == StatusInconclusive && len(c.Range) != 2 {
				t.Errorf("%s inconclusive with range %v; want its [lo, hi] stated", tt.check, c.Range)
			}
			if tt.before != "" {
				s := tt.sim
				s.noise = nil
				if c := s.verdict(Options{}).Check(tt.check); c.Status != tt.before {
					t.Errorf("without the measurement: %s = %s (%s); want %s (the old behaviour this test pins)", tt.check, c.Status, c.Reason, tt.before)
				}
			}
		})
	}
}

// slotted stamps every retry at the end of its slot, as a stub that
// reads its backlog every slot would, and returns the most arrivals it
// stamped at one instant (what the stub measures as Noise.Batch).
func slotted(recs []timeline.Record, slot time.Duration) int {
	per := map[int64]int{}
	most := 0
	for i := range recs {
		if a := &recs[i].Attempt; recs[i].Type == timeline.TypeAttempt && a.Attempt > 1 {
			a.At = (a.At/int64(slot) + 1) * int64(slot)
			per[a.At]++
			most = max(most, per[a.At])
		}
	}
	return most
}

// TestNoiseBunchingIsNotAWave: a stub short of CPU stamps a backlog of
// ready connections at once. A full-jitter fleet whose arrivals were
// stamped in batches the stub measured is not a wave.
func TestNoiseBunchingIsNotAWave(t *testing.T) {
	s := sim{clients: 200, server: outage(3*s1, ""), delay: fullJitter(500*ms, 4*s1), maxAttempts: 8, seed: 7,
		policy: policy(500*ms, 4*s1, 8, 20*s1, "full"), noise: noiseOf(20 * ms)}
	recs := s.records()
	recs[len(recs)-1].End.Noise.Batch = slotted(recs, 20*ms)
	v, _ := judgeRecords(recs, Options{})
	if c := v.Check(CheckWaves); c.Status == StatusFail {
		t.Errorf("waves = fail (%s); want no failure: the bunching is the host's", c.Reason)
	}
}

// TestNoiseStarved: the host is starved for a stub of finite capacity
// when its CPU pressure passes starvePressure or its lateness p90 is half
// the service time or more.
func TestNoiseStarved(t *testing.T) {
	for _, tc := range []struct {
		p90, service time.Duration
		pressure     float64
		want         bool
	}{
		{1 * ms, 10 * ms, 0, false},
		{5 * ms, 10 * ms, 0, true},
		{1 * ms, 10 * ms, starvePressure, true},
		{1 * ms, 10 * ms, starvePressure - 1, false},
	} {
		m := modelOf(&timeline.Noise{P50: int64(tc.p90) / 2, P90: int64(tc.p90), P99: 2 * int64(tc.p90), CPUPressure: tc.pressure})
		if got := m.starvedFor(int64(tc.service)); got != tc.want {
			t.Errorf("p90 %v, service %v, pressure %.0f%%: starved %v; want %v", tc.p90, tc.service, tc.pressure, got, tc.want)
		}
	}
}

// TestNoiseBatch: a stub that stamped a backlog of late arrivals at once
// (Noise.Batch) does not let waves FAIL a fleet on the pairs its batches
// can make: a full-jitter fleet bunched by a stub that stalled 200 ms is
// not FAIL, though most arrivals were on time (p90 1 ms); a lockstep
// fleet still FAILs, whether the stub stamped nothing late or stamped its
// wave in batches of 35 (the wave is itself a burst).
func TestNoiseBatch(t *testing.T) {
	bunched := func(measured bool) *Verdict {
		s := sim{clients: 200, server: outage(3*s1, ""), delay: fullJitter(500*ms, 4*s1), maxAttempts: 8, seed: 7,
			policy: policy(500*ms, 4*s1, 8, 20*s1, "full"), noise: noiseOf(1 * ms), expect: &timeline.Expect{Checks: []string{CheckWaves}}}
		s.noise.P90, s.noise.P99 = int64(1*ms), int64(200*ms)
		recs := s.records()
		// The stub read its sockets every 200 ms: the retries waiting
		// meanwhile are stamped at once (waves alone is judged: the
		// delay moves the waits past jitter-bounds too).
		b := slotted(recs, 200*ms)
		if measured {
			recs[len(recs)-1].End.Noise.Batch = b
		}
		v, _ := judgeRecords(recs, Options{})
		return v
	}
	if c := bunched(false).Check(CheckWaves); c.Status != StatusFail {
		t.Fatalf("bunched every 200 ms, no batch measured: waves = %s (%s); want fail (else this test shows nothing)", c.Status, c.Reason)
	}
	v := bunched(true)
	if c := v.Check(CheckWaves); c.Status == StatusFail || c.Range == nil || c.Range[0] > c.Threshold {
		t.Errorf("bunched by a stub that measured its batches: waves = %s %v (%s); want no failure, the range's low end within the threshold", c.Status, c.Range, c.Reason)
	}
	if v.Status == VerdictFail {
		t.Errorf("verdict %s (failed %v); want no FAIL", v.Status, v.Failed())
	}

	lockstep := sim{clients: 100, server: outage(3*s1, ""), delay: constantDelay(500 * ms), maxAttempts: 6, seed: 3,
		policy: policy(500*ms, 500*ms, 6, 20*s1, "none"), noise: noiseOf(1 * ms)}
	if c := lockstep.verdict(Options{}).Check(CheckWaves); c.Status != StatusFail {
		t.Errorf("lockstep, no batch: waves = %s (%s); want fail", c.Status, c.Reason)
	}
	lockstep.noise.Batch, lockstep.noise.P90, lockstep.noise.P99 = 35, int64(1*ms), int64(20*ms)
	if c := lockstep.verdict(Options{}).Check(CheckWaves); c.Status != StatusFail {
		t.Errorf("lockstep, its wave stamped 35 at once, p99 20 ms: waves = %s (%s); want fail", c.Status, c.Reason)
	}
}

// TestNoiseRecovery: on a starved host recovery's range runs from the
// reading that counts as goodput the attempts the stub served within the
// attempt timeout whose clients had gone (the host delivered them late)
// to the reading as recorded: a fleet that recovers but for them is
// INCONCLUSIVE, not FAIL; a storm that keeps the queue past the timeout
// still FAILs; load-amplification's and wasted-work's ranges run between
// their two readings, and are unbounded above unless the clients spread
// their retries themselves (TestNoiseLoadAmpWhoseSpread).
func TestNoiseRecovery(t *testing.T) {
	noisy := func(recs []timeline.Record) {
		recs[0].Meta.Fleet.AttemptTimeout = int64(250 * ms)
		n := noiseOf(5 * ms)
		n.CPUPressure = 60
		recs[len(recs)-1].End.Noise = n
	}
	judgeWith := func(recs []timeline.Record, o Options) *Verdict {
		v, _ := judgeRecords(recs, o)
		return v
	}

	// A retry budget recovers; then the host delivers every other
	// in-time success after the trigger too late for its client.
	recs := metastableSim(1, budget10).records()
	noisy(recs)
	late := 0
	for i := range recs {
		a := &recs[i].Attempt
		if recs[i].Type == timeline.TypeAttempt && a.Fault == "" && a.Status == 200 && a.At > int64(15*s1) && a.At < int64(35*s1) && a.Queue+a.Service <= int64(250*ms) && i%2 == 0 {
			a.Fault = timeline.FaultAbandoned
			late++
		}
	}
	if late == 0 {
		t.Fatal("no in-time success to deliver late")
	}
	v := judgeWith(recs, Options{})
	if c := v.Check(CheckRecovery); c.Status == StatusFail || !strings.Contains(c.Reason, "counting as goodput") {
		t.Errorf("a budget, %d in-time successes delivered late: recovery = %s (%s); want no failure, with the reading that counts them", late, c.Status, c.Reason)
	}
	// Under CPU pressure load-amplification reads over the trigger alone
	// too; with the clients' own spread (full jitter) its PASS stands.
	if c := v.Check(CheckLoadAmplification); c.Status != StatusPass || !strings.Contains(c.Reason, "read over the trigger alone") || !strings.Contains(c.Reason, "the clients spread their own retries") {
		t.Errorf("load-amplification at 60%% CPU pressure, full jitter = %s (%s); want a pass that says whose spread it was", c.Status, c.Reason)
	}
	// Both readings over 1.01: FAIL whatever the host did.
	under := Options{Checks: []CheckSpec{{ID: CheckLoadAmplification, Params: map[string]string{"threshold": "1.01"}}}}
	if c := judgeWith(recs, under).Check(CheckLoadAmplification); c.Status != StatusFail || !strings.Contains(c.Reason, "FAIL whatever the host did") {
		t.Errorf("load-amplification 1.01 at 60%% CPU pressure = %s (%s); want fail whatever the host did", c.Status, c.Reason)
	}
	// A threshold between the two readings: open.
	between := Options{Checks: []CheckSpec{{ID: CheckLoadAmplification, Params: map[string]string{"threshold": "1.05"}}}}
	if c := judgeWith(recs, between).Check(CheckLoadAmplification); c.Status != StatusInconclusive || len(c.Range) != 2 {
		t.Errorf("load-amplification 1.05 at 60%% CPU pressure = %s %v (%s); want inconclusive with its range", c.Status, c.Range, c.Reason)
	}
	quiet := metastableSim(1, budget10).records()
	if c := judgeWith(quiet, between).Check(CheckLoadAmplification); c.Status != StatusFail {
		t.Errorf("load-amplification 1.05 without noise nor late deliveries = %s (%s); want fail", c.Status, c.Reason)
	}
	if c := v.Check(CheckWastedWork); c.Status == StatusSkip || !strings.Contains(c.Reason, "served within the attempt timeout") {
		t.Errorf("wasted-work at 60%% CPU pressure = %s (%s); want judged on both readings", c.Status, c.Reason)
	}

	// Five attempts, no budget: the storm outlives its trigger with the
	// queue past the timeout, amplified: FAIL whatever the host did.
	recs = metastableSim(1, jitter5).records()
	noisy(recs)
	if c := judgeWith(recs, Options{}).Check(CheckRecovery); c.Status != StatusFail || !strings.Contains(c.Reason, "a storm of retries") {
		t.Errorf("no budget, at 60%% CPU pressure: recovery = %s (%s); want fail, a storm", c.Status, c.Reason)
	}
	// The same storm on a host whose lateness is of the order of the
	// service time (p90 30 ms, service 50 ms): the host set the capacity.
	recs = metastableSim(1, jitter5).records()
	noisy(recs)
	recs[len(recs)-1].End.Noise.P99 = int64(30 * ms)
	if c := judgeWith(recs, Options{}).Check(CheckRecovery); c.Status != StatusInconclusive || !strings.Contains(c.Reason, "half the service time") {
		t.Errorf("no budget, lateness 30ms against a 50ms service: recovery = %s (%s); want inconclusive naming the service time", c.Status, c.Reason)
	}
}

// TestNoiseRecoveryWithoutRetries: a fleet that never retries cannot make
// a storm; an overload that outlives the trigger on a starved host, with
// the load not amplified, may be the host's: INCONCLUSIVE, not FAIL.
func TestNoiseRecoveryWithoutRetries(t *testing.T) {
	recs := metastableSim(1, noRetry).records()
	recs[0].Meta.Fleet.AttemptTimeout = int64(250 * ms)
	n := noiseOf(50 * ms)
	n.CPUPressure = 100
	recs[len(recs)-1].End.Noise = n
	for i := range recs {
		if a := &recs[i].Attempt; recs[i].Type == timeline.TypeAttempt && a.Fault == "" && a.Status == 200 && a.At > int64(15*s1) {
			a.Fault, a.Queue = timeline.FaultAbandoned, int64(300*ms) // delivered too late, and queued past the timeout
		}
	}
	v, _ := judgeRecords(recs, Options{})
	if c := v.Check(CheckRecovery); c.Status != StatusInconclusive {
		t.Errorf("no retries on a starved host: recovery = %s (%s); want inconclusive", c.Status, c.Reason)
	}
}

// TestNoiseRecoveryStormEndedWithTrigger: a storm during the trigger
// (five attempts, no budget) whose retries end with it, and a server that
// stays down after it on a starved host: the load after the trigger was
// not amplified, so no storm need have kept the server down: INCONCLUSIVE.
func TestNoiseRecoveryStormEndedWithTrigger(t *testing.T) {
	sim := metastableSim(1, func(s *capSim) {
		jitter5(s)
		s.duration = 33 * s1 // 18 s after the trigger, enough to judge: its storm still weighs in the whole span
	})
	var recs []timeline.Record
	for _, r := range sim.records() {
		if r.Type == timeline.TypeAttempt && r.Attempt.Attempt > 1 && r.Attempt.At >= int64(15*s1) {
			continue // no retry after the trigger
		}
		if a := &r.Attempt; r.Type == timeline.TypeAttempt && a.Fault == "" && a.Status == 200 && a.At >= int64(15*s1) {
			a.Fault, a.Queue = timeline.FaultAbandoned, int64(300*ms) // delivered too late, and queued past the timeout
		}
		recs = append(recs, r)
	}
	recs[0].Meta.Fleet.AttemptTimeout = int64(250 * ms)
	n := noiseOf(5 * ms)
	n.CPUPressure = 60
	recs[len(recs)-1].End.Noise = n
	v, _ := judgeRecords(recs, Options{})
	if c := v.Check(CheckRecovery); c.Status != StatusInconclusive || !strings.Contains(c.Reason, "not amplified") {
		t.Errorf("a storm that ended with the trigger, a starved host after it: recovery = %s (%s); want inconclusive", c.Status, c.Reason)
	}
	// The storm itself was read: over the trigger the load was amplified.
	if c := v.Check(CheckLoadAmplification); !strings.Contains(c.Reason, "during the trigger: mean ") || strings.Contains(c.Reason, "during the trigger: mean 1.0") {
		t.Errorf("load-amplification = %s (%s); want the trigger's storm read", c.Status, c.Reason)
	}
}

// TestNoiseBaselineOverloaded: on a host short of CPU, a server that was
// not keeping up before the trigger (its successes before it all
// delivered too late) leaves load-amplification's range unbounded: the
// host, not the scenario, may have overloaded it. Without noise the same
// recording is judged as read.
func TestNoiseBaselineOverloaded(t *testing.T) {
	judgeOf := func(client func(*capSim), noisy bool, queue time.Duration) *Verdict {
		recs := metastableSim(1, client).records()
		recs[0].Meta.Fleet.AttemptTimeout = int64(250 * ms)
		for i := range recs {
			if a := &recs[i].Attempt; recs[i].Type == timeline.TypeAttempt && a.Status == 200 && a.Fault == "" && a.At < int64(10*s1) {
				a.Fault, a.Queue = timeline.FaultAbandoned, int64(queue)
			}
		}
		if noisy {
			n := noiseOf(5 * ms)
			n.CPUPressure = 60
			recs[len(recs)-1].End.Noise = n
		}
		v, _ := judgeRecords(recs, Options{Checks: []CheckSpec{{ID: CheckLoadAmplification, Params: map[string]string{"threshold": "1.01"}}}})
		return v
	}
	judge := func(noisy bool, queue time.Duration) *Verdict { return judgeOf(budget10, noisy, queue) }
	// A fleet that never retries reads 1 over any window: no window the
	// host hid can read more, so it PASSes the same baseline.
	noRetry := func(s *capSim) { s.maxAttempts = 1 }
	if c := judgeOf(noRetry, true, 300*ms).Check(CheckLoadAmplification); c.Status != StatusPass || !strings.Contains(c.Reason, "at most 1.00×") {
		t.Errorf("baseline overloaded, no retries: load-amplification = %s %v (%s); want pass, at most 1", c.Status, c.Range, c.Reason)
	}
	// Queued past the 250 ms attempt timeout: the fleet asked too much.
	v := judge(true, 300*ms)
	if c := v.Check(CheckLoadAmplification); c.Status != StatusInconclusive || !strings.Contains(c.Reason, "not keeping up before the trigger") {
		t.Errorf("baseline overloaded at 60%% CPU pressure: load-amplification = %s (%s); want inconclusive naming the baseline", c.Status, c.Reason)
	}
	if c := v.Check(CheckRecovery); c.Status != StatusSkip || !strings.Contains(c.Reason, "the fleet asks for more than the capacity;") {
		t.Errorf("baseline queued past the timeout: recovery = %s (%s); want a skip that blames the fleet's demand alone", c.Status, c.Reason)
	}
	if c := judge(false, 300*ms).Check(CheckLoadAmplification); c.Status == StatusSkip || c.Status == StatusInconclusive {
		t.Errorf("baseline overloaded, no noise: load-amplification = %s (%s); want it judged", c.Status, c.Reason)
	}
}

// TestNoiseLoadAmpWhoseSpread is the class of fleets whose
// load-amplification PASS a host short of CPU might have made: the same
// retry budget, under 60 % CPU pressure, with waits the host cannot have
// spread (full jitter: the PASS stands) and with waits it could have
// (lockstep, retries at once, retries aligned to a clock: not vouched
// for, INCONCLUSIVE). Without the pressure every one of them PASSes as
// read: only the evidence of the retries decides.
func TestNoiseLoadAmpWhoseSpread(t *testing.T) {
	budgetWith := func(backoff func(int, *rand.Rand) time.Duration) func(*capSim) {
		return func(s *capSim) { s.maxAttempts, s.backoff, s.budget, s.budgetCap = 5, backoff, 0.1, 10 }
	}
	// aligned moves every retry to the next 100 ms of the clock, as a
	// client that retries on the tick would (its waits from the failure
	// look spread; its arrivals come together).
	aligned := func(recs []timeline.Record) {
		for i := range recs {
			if a := &recs[i].Attempt; recs[i].Type == timeline.TypeAttempt && a.Attempt > 1 {
				d := a.Done - a.At
				a.At = (a.At/int64(100*ms) + 1) * int64(100*ms)
				a.Done = a.At + d
			}
		}
	}
	tests := []struct {
		name   string
		client func(*capSim)
		edit   func([]timeline.Record)
		want   string // the status under pressure
		reason string // in the reason
	}{
		{"full jitter", budgetWith(capJitter(100*ms, 2*s1)), nil, StatusPass, "the clients spread their own retries"},
		{"lockstep, 100 ms", budgetWith(capFixed(100 * ms)), nil, StatusInconclusive, "fastest tenth waited"},
		{"lockstep, exponential", budgetWith(func(k int, _ *rand.Rand) time.Duration { return min(2*s1, 100*ms<<(k-1)) }), nil, StatusInconclusive, "fastest tenth waited"},
		{"at once", budgetWith(capFixed(0)), nil, StatusInconclusive, "cannot be told from the host's lateness"},
		{"aligned to a 100 ms clock", budgetWith(capJitter(100*ms, 2*s1)), aligned, StatusInconclusive, "arrivals read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs := metastableSim(1, tt.client).records()
			recs[0].Meta.Fleet.AttemptTimeout = int64(250 * ms)
			if tt.edit != nil {
				tt.edit(recs)
			}
			v, _ := judgeRecords(recs, Options{})
			if c := v.Check(CheckLoadAmplification); c.Status != StatusPass {
				t.Fatalf("quiet: load-amplification = %s (%s); want pass (else this case shows nothing)", c.Status, c.Reason)
			}
			n := noiseOf(5 * ms)
			n.CPUPressure = 60
			recs[len(recs)-1].End.Noise = n
			v, _ = judgeRecords(recs, Options{})
			c := v.Check(CheckLoadAmplification)
			if c.Status != tt.want || !strings.Contains(c.Reason, tt.reason) {
				t.Errorf("at 60%% CPU pressure: load-amplification = %s (%s); want %s saying %q", c.Status, c.Reason, tt.want, tt.reason)
			}
			if tt.want == StatusInconclusive && v.Status != VerdictInconclusive && v.Status != VerdictFail {
				t.Errorf("verdict %s; want INCONCLUSIVE (or a FAIL of another check)", v.Status)
			}
			// Lateness of half the service time (50 ms) or more: the host
			// may have cut the capacity, so the low end is 0 and no FAIL;
			// the high end is still the retries' own spread's to vouch for.
			slow := &timeline.Noise{Source: n.Source, P50: int64(5 * ms), P90: int64(25 * ms), P99: int64(30 * ms), Max: int64(60 * ms), Samples: 1000, CPUPressure: 60}
			recs[len(recs)-1].End.Noise = slow
			vs, _ := judgeRecords(recs, Options{})
			cs := vs.Check(CheckLoadAmplification)
			if cs.Status == StatusFail || len(cs.Range) != 2 || cs.Range[0] != 0 || !strings.Contains(cs.Reason, "may have set its capacity") {
				t.Errorf("lateness p90 25ms, service 50ms: load-amplification = %s %v (%s); want a low end of 0 that says why", cs.Status, cs.Range, cs.Reason)
			}
			if tt.want == StatusInconclusive && cs.Status == StatusPass {
				t.Errorf("lateness p90 25ms, service 50ms: load-amplification = pass (%s); want it not vouched for", cs.Reason)
			}
			if vouched := strings.Contains(cs.Reason, "the clients spread their own retries"); vouched == (len(cs.Range) == 2 && cs.Range[1] >= maxFigure) {
				t.Errorf("lateness p90 25ms, service 50ms: load-amplification range %v (%s); want a bounded high end exactly when the spread vouches", cs.Range, cs.Reason)
			}
			recs[len(recs)-1].End.Noise = n
			// wasted-work's PASS needs the same evidence.
			if w := v.Check(CheckWastedWork); tt.want == StatusInconclusive && w.Status == StatusPass {
				t.Errorf("at 60%% CPU pressure: wasted-work = pass (%s); want it not vouched for", w.Reason)
			} else if tt.want == StatusPass && w.Status == StatusPass && !strings.Contains(w.Reason, "the clients spread their own retries") {
				t.Errorf("at 60%% CPU pressure: wasted-work = pass (%s); want the spread's evidence in the reason", w.Reason)
			}
		})
	}
}

// TestClientSpreadUnread: cohorts whose median wait is under 4× the
// host's lateness cannot be read; they may hold at most spreadUnread of
// the retries for the spread to vouch for anything.
func TestClientSpreadUnread(t *testing.T) {
	const late = int64(2 * ms)
	fill := func(an *Analyzer, g, n int, wait func(i int) int64) {
		c := &an.wv.cohorts[g]
		for i := range n {
			at := int64(s1) + int64(i)*int64(7*ms)
			c.sample = append(c.sample, waveSampleRec{trigger: at - wait(i), base: at - wait(i), arrival: at})
		}
		c.seen = int64(n)
	}
	jittered := func(d time.Duration) func(int) int64 {
		return func(i int) int64 { return int64(d) * int64(i%100+1) / 100 } // uniform on (0, d]
	}
	for _, tc := range []struct {
		short int // retries in a cohort of 4 ms waits (unread), of 1000 read
		ok    bool
	}{{0, true}, {150, true}, {200, false}, {1000, false}} {
		an := New(&timeline.Meta{Recorder: "run"}, Options{})
		fill(an, 2, 1000, jittered(100*ms))
		if tc.short > 0 {
			fill(an, 0, tc.short, func(int) int64 { return int64(4 * ms) })
		}
		ok, how := an.clientSpread(0, 1<<62, late)
		if ok != tc.ok {
			t.Errorf("%d short retries beside 1000 jittered: spread %v (%s); want %v", tc.short, ok, how, tc.ok)
		}
	}
	// No retry at all: nothing for the host to break up.
	an := New(&timeline.Meta{Recorder: "run"}, Options{})
	if ok, how := an.clientSpread(0, 1<<62, late); !ok || !strings.Contains(how, "no retry arrived") {
		t.Errorf("no retries: spread %v (%s); want true", ok, how)
	}
	// Retries outside the window are not read.
	an = New(&timeline.Meta{Recorder: "run"}, Options{})
	fill(an, 2, 1000, func(int) int64 { return int64(100 * ms) }) // lockstep
	if ok, _ := an.clientSpread(0, int64(s1)/2, late); !ok {
		t.Errorf("lockstep retries all after the window: spread false; want true (nothing in it)")
	}
	if ok, how := an.clientSpread(0, 1<<62, late); ok || !strings.Contains(how, "fastest tenth") {
		t.Errorf("lockstep retries in the window: spread %v (%s); want false", ok, how)
	}
}

// TestWideningsKeepPairs: for lateness drawn from distributions that meet
// the measured quantiles, with their mass anywhere inside each segment
// (point masses placed at random), the share of pairs of draws within x
// of each other is at least what widenings claims it keeps.
func TestWideningsKeepPairs(t *testing.T) {
	m := hostNoise{measured: true, bulk: int64(2 * ms), p90: int64(10 * ms), delay: int64(42 * ms), most: int64(84 * ms)}
	ws := m.widenings()
	if len(ws) == 0 {
		t.Fatal("no widening")
	}
	for _, w := range ws {
		switch w.x {
		case m.delay:
			if w.kept < 0.98 {
				t.Errorf("x = p99: kept %.3f; want at least 0.99² = 0.98", w.kept)
			}
		case m.p90:
			if w.kept < 0.81 {
				t.Errorf("x = p90: kept %.3f; want at least 0.9² = 0.81", w.kept)
			}
		}
	}
	cuts := []int64{0, m.bulk, m.p90, m.delay, m.most}
	mass := []float64{0.5, 0.4, 0.09, 0.01}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		// Each segment's mass on up to 4 points placed at random in it.
		var at []int64
		var p []float64
		for s := range mass {
			k := 1 + rng.IntN(4)
			for range k {
				at = append(at, cuts[s]+rng.Int64N(cuts[s+1]-cuts[s]+1))
				p = append(p, mass[s]/float64(k))
			}
		}
		for _, w := range ws {
			var within float64
			for i := range at {
				for j := range at {
					if d := at[i] - at[j]; d <= w.x && d >= -w.x {
						within += p[i] * p[j]
					}
				}
			}
			if within < w.kept-1e-9 {
				t.Fatalf("trial %d: x %v keeps %.4f of pairs; widenings claims %.4f", trial, time.Duration(w.x), within, w.kept)
			}
		}
	}
}
