package analyzer

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

var wavesTable = flag.Bool("waves-table", false, "print the waves measurements as a Markdown table (docs/checks.md)")

// TestWavesMeasurements simulates fleets with each backoff strategy through
// an outage without Retry-After, three seeds each, and checks that the
// default waves threshold separates the spread strategies from the
// synchronized ones. -waves-table prints the figures for docs/checks.md.
func TestWavesMeasurements(t *testing.T) {
	type strategy struct {
		name   string
		delay  func(int, *rand.Rand, time.Duration) time.Duration
		spread bool // should pass
	}
	strategies := []strategy{
		{"full jitter, base 100ms, cap 5s", fullJitter(100*ms, 5*s1), true},
		{"decorrelated jitter, base 100ms, cap 5s", decorrelated(100*ms, 5*s1), true},
		{"equal jitter, base 100ms, cap 5s", equalJitter(100*ms, 5*s1), true},
		{"no jitter, base 100ms, cap 5s", noJitter(100*ms, 5*s1), false},
		{"fixed 1s", fixed(s1), false},
		{"2s ± 100ms", narrow(2*s1, 100*ms), false},
		{"1s ± 100ms", narrow(s1, 100*ms), false},
		{"2s ± 250ms", narrow(2*s1, 250*ms), false},
	}
	starts := []struct {
		name   string
		spread time.Duration
	}{{"burst", 0}, {"ramp 10s", 10 * s1}}
	var table strings.Builder
	table.WriteString("| strategy | start | index, seed 1 | seed 2 | seed 3 | verdict | busiest 100 ms window vs mean (seed 1) |\n|---|---|---:|---:|---:|---|---:|\n")
	for _, st := range strategies {
		for _, start := range starts {
			var figs []string
			var peak float64
			verdicts := map[string]bool{}
			for seed := uint64(1); seed <= 3; seed++ {
				s := sim{clients: 500, seed: seed, spread: start.spread, server: outage(15*s1, ""), delay: st.delay,
					maxAttempts: 8, policy: policy(100*ms, 5*s1, 8, 60*s1, "full")}
				c := s.verdict(Options{}).Check(CheckWaves)
				if seed == 1 {
					peak = peakToMean(s.records(), 100*ms)
				}
				figs = append(figs, fmtFigure(c.Figure, c.Unit))
				verdicts[c.Status] = true
				if want := map[bool]string{true: StatusPass, false: StatusFail}[st.spread]; c.Status != want {
					t.Errorf("%s, %s start, seed %d: waves = %s (%s); want %s", st.name, start.name, seed, c.Status, fmtFigure(c.Figure, c.Unit), want)
				}
			}
			v := "fail"
			if verdicts[StatusPass] {
				v = "pass"
			}
			fmt.Fprintf(&table, "| %s | %s | %s | %s | %.1f× |\n", st.name, start.name, strings.Join(figs, " | "), v, peak)
		}
	}
	if *wavesTable {
		t.Logf("waves index at the default threshold %.1f:\n%s", defaultWaves, table.String())
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
