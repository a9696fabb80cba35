package analyzer

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/internal/testenv"
	"github.com/retrylab/retrylab/timeline"
)

// powerNoise are the levels of the power table: a host that makes every
// start and every wait U[0, late) late, and measures it.
var powerNoise = []time.Duration{0, 10 * ms, 50 * ms, 100 * ms, 500 * ms}

// measuredLate is the measurement of lateness U[0, late).
func measuredLate(late time.Duration) *timeline.Noise {
	if late == 0 {
		return &timeline.Noise{Source: "sim"}
	}
	l := int64(late)
	return &timeline.Noise{Source: "sim", P50: l / 2, P90: l * 9 / 10, P99: l * 99 / 100, Max: l, Samples: 1000}
}

// mixed waits as lockstep (fixed at d) a share of the retries, and the
// others as full jitter from base to cap.
func mixed(share float64, d, base, cap time.Duration) func(int, *rand.Rand, time.Duration) time.Duration {
	fj := fullJitter(base, cap)
	return func(k int, r *rand.Rand, prev time.Duration) time.Duration {
		if r.Float64() < share {
			return d
		}
		return fj(k, r, prev)
	}
}

// TestNoisePower measures the smallest violation each time-window check
// still decides FAIL at each level of the host's lateness (-v prints the
// table docs/checks.md holds), and holds the class at every level: a
// client without the violation is never FAIL.
func TestNoisePower(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("eighty simulated fleets: make matrix runs it without the race detector")
	}
	shares := []float64{0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1}
	type row struct {
		check string
		what  string
		sim   func(share float64, late time.Duration) sim
	}
	rows := []row{
		{CheckWaves, "share of retries in lockstep (1 s), the rest full jitter", func(share float64, late time.Duration) sim {
			return sim{clients: 200, server: outage(8*s1, ""), delay: mixed(share, s1, 200*ms, 4*s1), late: late, maxAttempts: 8, seed: 11,
				policy: policy(200*ms, 4*s1, 8, 30*s1, "full"), noise: measuredLate(late), expect: &timeline.Expect{Checks: []string{CheckWaves}}}
		}},
		{CheckInstantRetry, "share of retries sent at once, the rest full jitter", func(share float64, late time.Duration) sim {
			return sim{clients: 200, server: outage(8*s1, ""), delay: mixed(share, 0, 200*ms, 4*s1), late: late, maxAttempts: 8, seed: 12,
				policy: policy(200*ms, 4*s1, 8, 30*s1, "full"), noise: measuredLate(late), expect: &timeline.Expect{Checks: []string{CheckInstantRetry}}}
		}},
	}
	var table strings.Builder
	table.WriteString("| check | violation | " + strings.Join(func() []string {
		var h []string
		for _, l := range powerNoise {
			h = append(h, "p99 "+l.String())
		}
		return h
	}(), " | ") + " |\n|---|---|" + strings.Repeat("---|", len(powerNoise)) + "\n")
	for _, rw := range rows {
		table.WriteString("| `" + rw.check + "` | " + rw.what + " |")
		for _, late := range powerNoise {
			smallest := "none"
			for _, share := range shares {
				s := rw.sim(share, late)
				c := s.verdict(Options{}).Check(rw.check)
				if share == 0 && c.Status == StatusFail {
					t.Errorf("%s at lateness %v without the violation: fail (%s)", rw.check, late, c.Reason)
				}
				if c.Status == StatusFail && smallest == "none" {
					smallest = fmt.Sprintf("%.0f %%", 100*share)
				}
			}
			if late == 0 && smallest == "none" {
				t.Errorf("%s on a quiet host: no share of the violation fails", rw.check)
			}
			table.WriteString(" " + smallest + " |")
		}
		table.WriteString("\n")
	}
	t.Log("\n" + table.String())
}
