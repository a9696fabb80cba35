package retrylabtest_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/timeline"
)

// hostNoise is noise a test makes a virtual-time timeline meet: every
// wait of a logical request made late by a draw whose p99 is delay, up to
// batch consecutive arrivals stamped at one instant, and the CPU pressure
// of a starved host.
type hostNoise struct {
	delay  time.Duration
	batch  int
	starve bool
}

func (n hostNoise) String() string {
	s := fmt.Sprintf("p99 %v, batch %d", n.delay, n.batch)
	if n.starve {
		s += ", starved"
	}
	return s
}

// measured is the end record's measurement of n, as Options.Noise.
func (n hostNoise) measured() *timeline.Noise {
	d := int64(n.delay)
	m := &timeline.Noise{Source: "injected", P50: d * 15 / 100, P90: d / 2, P99: d, Max: 2 * d, Batch: n.batch, Samples: 1000}
	if n.starve {
		m.CPUPressure = 60
	}
	return m
}

// injectNoise makes the timeline raw meet n, deterministically (seed):
// each attempt's wait, from the previous response of its logical request
// (or the request's start), is lengthened by a draw d ≥ 0 whose p99 is
// n.delay (exponential, p50 0.15 of it), so each attempt and everything
// after it in its request moves later by the sum of the draws so far —
// the response, its not_before and the request's end with it; then runs
// of n.batch arrivals within 50 ms of each other are stamped at the last
// of them. Nothing moves earlier.
func injectNoise(t *testing.T, raw []byte, n hostNoise, seed uint64) []byte {
	t.Helper()
	dec := timeline.NewDecoder(bytes.NewReader(raw))
	var meta *timeline.Meta
	var end *timeline.End
	var atts []timeline.Attempt
	var outs []timeline.Outcome
	for {
		var rec timeline.Record
		err := dec.Decode(&rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch rec.Type {
		case timeline.TypeMeta:
			meta = rec.Meta
		case timeline.TypeEnd:
			end = rec.End
		case timeline.TypeAttempt:
			atts = append(atts, rec.Attempt)
		case timeline.TypeOutcome:
			outs = append(outs, rec.Outcome)
		}
	}
	r := rand.New(rand.NewPCG(seed, 0x401e))
	scale := float64(n.delay) / math.Log(100) // exponential: p99 = n.delay
	shift := map[string]int64{}               // client/key: how late so far
	for i := range atts {
		a := &atts[i]
		k := a.Client + "\x00" + a.Key
		if scale > 0 {
			shift[k] += int64(r.ExpFloat64() * scale)
		}
		s := shift[k]
		a.At += s
		a.Done += s
		if a.HasNotBefore {
			a.NotBefore += s
		}
	}
	for i := range outs {
		o := &outs[i]
		o.End += shift[o.Client+"\x00"+o.Key]
	}
	slices.SortStableFunc(atts, func(x, y timeline.Attempt) int { return cmpInt(x.At, y.At) })
	if n.batch > 1 {
		for i := 0; i < len(atts); {
			j := i + 1
			for j < len(atts) && j-i < n.batch && atts[j].At-atts[i].At < int64(50*time.Millisecond) {
				j++
			}
			last := atts[j-1].At
			for k := i; k < j; k++ {
				d := atts[k].Done - atts[k].At
				atts[k].At = last
				atts[k].Done = last + d
			}
			i = j
		}
	}
	var buf bytes.Buffer
	enc := timeline.NewEncoder(&buf)
	if err := enc.EncodeMeta(meta); err != nil {
		t.Fatal(err)
	}
	// Attempts and outcomes in time order, as the stub and the runner
	// write them.
	oi := 0
	slices.SortStableFunc(outs, func(x, y timeline.Outcome) int { return cmpInt(x.End, y.End) })
	for i := range atts {
		for oi < len(outs) && outs[oi].End < atts[i].At {
			must(t, enc.EncodeOutcome(&outs[oi]))
			oi++
		}
		must(t, enc.EncodeAttempt(&atts[i]))
	}
	for ; oi < len(outs); oi++ {
		must(t, enc.EncodeOutcome(&outs[oi]))
	}
	if end != nil {
		must(t, enc.EncodeEnd(end))
	}
	must(t, enc.Flush())
	return buf.Bytes()
}

func cmpInt(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// classNoise is the noise of the class test: delays of 0, 10, 100 and
// 500 ms at p99, batches of 1, 5 and 20, a starved host or not.
func classNoise() []hostNoise {
	var ns []hostNoise
	for _, d := range []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond} {
		for _, b := range []int{1, 5, 20} {
			for _, s := range []bool{false, true} {
				ns = append(ns, hostNoise{d, b, s})
			}
		}
	}
	return ns
}

// TestNoiseClass is the class of verdicts noise may not make: every
// built-in's good policy (our client) and bad one (its control), each
// run once in virtual time, judged as if its host had been late, had
// batched arrivals and had been starved, at every level of classNoise.
// The good policy is never FAIL and the bad one never PASS; with -v it
// prints, per control, the noise at which its check stops deciding (the
// power table of docs/checks.md).
func TestNoiseClass(t *testing.T) {
	skipUnderRace(t)
	for _, tt := range controlRows {
		t.Run(tt.scenario+"/"+tt.bad, func(t *testing.T) {
			t.Parallel()
			opts := tt.options(1)
			good := retrylabtest.Run(t, retrylabtest.Builtin(tt.scenario), retrylabtest.Registered("retrylab"), opts...)
			bad := retrylabtest.Run(t, retrylabtest.Builtin(tt.scenario), retrylabtest.Registered(tt.bad), opts...)
			if tt.bad == "retrylab" { // a scenario whose control is our client with a policy that cannot pass
				good = retrylabtest.Run(t, retrylabtest.Builtin(tt.scenario), retrylabtest.Registered("retrylab"), retrylabtest.WithSeed(1))
			}
			var decided, open []string
			for _, n := range classNoise() {
				judge := func(r *retrylabtest.Result) *analyzer.Verdict {
					v, err := analyzer.Analyze(bytes.NewReader(injectNoise(t, r.Timeline, n, 1)), analyzer.Options{Noise: n.measured()})
					if err != nil {
						t.Fatal(err)
					}
					return v
				}
				if g := judge(good); g.Status == analyzer.VerdictFail {
					t.Errorf("%s: our client FAILED (%v): %s", n, g.Failed(), reasons(g, g.Failed()...))
				}
				b := judge(bad)
				if b.Status == analyzer.VerdictPass {
					t.Errorf("%s: the control %s PASSED", n, tt.bad)
				}
				if c := b.Check(tt.fails); c != nil && c.Status == analyzer.StatusFail {
					decided = append(decided, n.String())
				} else {
					open = append(open, n.String())
				}
			}
			t.Logf("%s × %s: %s decided FAIL under %d of %d noises; open under: %s", tt.scenario, tt.bad, tt.fails, len(decided), len(decided)+len(open), strings.Join(open, "; "))
		})
	}
}

// reasons is what the checks ids read.
func reasons(v *analyzer.Verdict, ids ...string) string {
	var b strings.Builder
	for _, id := range ids {
		if c := v.Check(id); c != nil {
			fmt.Fprintf(&b, "\n\t%s %s: %s", id, c.Status, c.Reason)
		}
	}
	return b.String()
}
