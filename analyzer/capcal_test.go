package analyzer

import (
	"flag"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

var capacityTable = flag.Bool("capacity-table", false, "run every row of the capacity checks' calibration and print the tables of docs/design/capacity.md")

// calClient is a fleet's retry policy in the calibration, and what the
// capacity checks must say of it on every row: good clients recover and
// pass all three; storm clients fail all three, recovery as metastable.
// Marginal ones (a budget that leaves the server almost no headroom) are
// only required to pass load-amplification.
type calClient struct {
	name, policy string
	set          func(*capSim)
	kind         int
}

const (
	calGood = iota
	calMarginal
	calStorm
)

var calClients = []calClient{
	{"no-retry", "1 attempt", noRetry, calGood},
	{"budget-10%", "5 attempts, full jitter 100ms–2s, fleet budget 10 % (10 tokens)", budget10, calGood},
	{"budget-20%", "5 attempts, full jitter 100ms–2s, fleet budget 20 % (10 tokens)", func(s *capSim) {
		s.maxAttempts, s.backoff, s.budget, s.budgetCap = 5, capJitter(100*ms, 2*s1), 0.2, 10
	}, calMarginal},
	{"jitter-2", "2 attempts, full jitter 100ms–2s", func(s *capSim) { s.maxAttempts, s.backoff = 2, capJitter(100*ms, 2*s1) }, calStorm},
	{"jitter-5", "5 attempts, full jitter 100ms–2s", jitter5, calStorm},
	{"fixed-10", "10 attempts, 100 ms apart", func(s *capSim) { s.maxAttempts, s.backoff = 10, capFixed(100*ms) }, calStorm},
}

// calSim is one calibration run: the metastable shape (10 workers × 50 ms
// exponential, queue 100 FIFO, 80 % load, timeouts 250 ms) with a trigger
// to 30 % of the workers at 10 s for trigger, then 40 s of arrivals.
func calSim(seed uint64, trigger time.Duration, c calClient) capSim {
	s := metastableSim(seed, c.set)
	s.phases = triggerPhases(10*s1, trigger, 0.3)
	s.duration = 10*s1 + trigger + 40*s1
	return s
}

// TestCapacityCalibration runs the simulated metastable fleet with
// triggers of 2, 10 and 30 s and each client of calClients, and checks
// what the capacity checks say of each: docs/design/capacity.md has the tables and
// the defaults they support. By default the rows of a 10 s trigger on
// seed 1 for the clients that are quick to simulate (TestRecovery covers
// the heavier storms); -capacity-table runs every row on seeds 1-3 and
// prints the tables:
//
//	go test ./analyzer -run TestCapacityCalibration -count=1 -v -args -capacity-table
func TestCapacityCalibration(t *testing.T) {
	triggers, seeds, clients := []time.Duration{10 * s1}, []uint64{1}, calClients[:4]
	if *capacityTable {
		triggers, seeds, clients = []time.Duration{2 * s1, 10 * s1, 30 * s1}, []uint64{1, 2, 3}, calClients
	}
	var table strings.Builder
	table.WriteString("| trigger | client | recovery (seeds " + fmt.Sprint(seeds) + ") | load-amplification: mean (peak) | wasted-work |\n|---|---|---|---|---|\n")
	var longestSpell time.Duration
	for _, trig := range triggers {
		for _, c := range clients {
			var rec, amp, waste []string
			for _, seed := range seeds {
				s := calSim(seed, trig, c)
				v, an := s.judge(Options{})
				r, a, w := v.Check(CheckRecovery), v.Check(CheckLoadAmplification), v.Check(CheckWastedWork)
				j := an.judgeLoad(false)
				switch {
				case j.rec.Metastable:
					rec = append(rec, "never")
					longestSpell = max(longestSpell, healthySpell(an.Load()))
				case r.Status == StatusSkip:
					rec = append(rec, "skip")
				default:
					rec = append(rec, fmt.Sprintf("%.1fs", r.Figure))
				}
				amp = append(amp, fmt.Sprintf("%.2f× (%.2f×)", a.Figure, max(j.during.peak, j.after.peak)))
				waste = append(waste, fmt.Sprintf("%.0f%%", w.Figure))
				want := map[string]string{CheckLoadAmplification: StatusPass}
				switch c.kind {
				case calGood:
					want = map[string]string{CheckRecovery: StatusPass, CheckLoadAmplification: StatusPass, CheckWastedWork: StatusPass}
				case calStorm:
					want = map[string]string{CheckRecovery: StatusFail, CheckLoadAmplification: StatusFail, CheckWastedWork: StatusFail}
				}
				for id, st := range want {
					got := v.Check(id)
					if got.Status == StatusSkip && c.kind == calStorm && id == CheckRecovery && trig >= 30*s1 {
						continue // 40 s after a 30 s trigger is too short to call it: skip is right
					}
					if got.Status != st {
						t.Errorf("trigger %v, %s, seed %d: %s = %s (%.2f vs %.2f: %s); want %s", trig, c.name, seed, id, got.Status, got.Figure, got.Threshold, got.Reason, st)
					}
				}
				if c.kind == calStorm && r.Status == StatusFail && !j.rec.Metastable {
					t.Errorf("trigger %v, %s, seed %d: recovered after %.1fs; want metastable", trig, c.name, seed, r.Figure)
				}
			}
			fmt.Fprintf(&table, "| %v | `%s`: %s | %s | %s | %s |\n", trig, c.name, c.policy, strings.Join(rec, ", "), strings.Join(amp, ", "), strings.Join(waste, ", "))
		}
	}
	if longestSpell >= time.Duration(minHold) {
		t.Errorf("a metastable run had goodput at 90%% of the offered load for %v in a row; the hold (%v) would call it recovered", longestSpell, time.Duration(minHold))
	}
	if *capacityTable {
		t.Logf("\n%s\nlongest healthy spell in a metastable run: %v", table.String(), longestSpell)
		t.Logf("\n%s", windowNoise(t))
	}
}

// healthySpell is the longest stretch after the last trigger in which
// every rolling window had goodput at 90 % of its first attempts.
func healthySpell(l *LoadSeries) time.Duration {
	w := int(l.Window / l.Width)
	s0 := int((l.Recovery.End + l.Width - 1) / l.Width)
	run, best := 0, 0
	for i := s0; i+w <= len(l.First)-1; i++ {
		var f, g int64
		for k := i; k < i+w; k++ {
			f, g = f+l.First[k], g+l.Good[k]
		}
		if float64(g) >= 0.9*float64(f) {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	if best == 0 {
		return 0
	}
	return time.Duration(int64(best+w-1) * l.Width)
}

// windowNoise measures, on steady runs without a trigger, the share of
// rolling windows whose goodput reads below 90 % of their first attempts,
// by how many first attempts a window holds: the evidence for
// windowCount.
func windowNoise(t *testing.T) string {
	var b strings.Builder
	b.WriteString("| server | load | first attempts per window | windows below 90 % |\n|---|---|---|---|\n")
	for _, workers := range []int{5, 10} {
		for _, load := range []float64{0.6, 0.8} {
			c := float64(workers) / 0.05
			s := capSim{seed: 1, rate: load * c, duration: 120 * s1, workers: workers, queue: workers * 10, service: 50 * ms, exp: true,
				timeout: 250 * ms, maxAttempts: 1}
			_, an := s.judge(Options{})
			l := an.Load()
			for _, per := range []float64{40, 80, 160, 320} {
				w := max(1, int(math.Round(per/(load*c)*1e9/float64(l.Width))))
				bad, tot := 0, 0
				for i := 0; i+w <= len(l.First)-1; i++ {
					var f, g int64
					for k := i; k < i+w; k++ {
						f, g = f+l.First[k], g+l.Good[k]
					}
					tot++
					if float64(g) < 0.9*float64(f) {
						bad++
					}
				}
				fmt.Fprintf(&b, "| %d × 50 ms (%.0f/s) | %.0f %% | %.0f (%v) | %.2f %% |\n", workers, c, 100*load, per, time.Duration(int64(w)*l.Width), 100*float64(bad)/float64(tot))
			}
		}
	}
	return b.String()
}
