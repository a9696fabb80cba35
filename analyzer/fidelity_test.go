package analyzer

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// goodRun is a faithful run that passes every check: full jitter through a
// bare outage.
func goodRun() *sim {
	return &sim{clients: 100, server: outage(2*s1, ""), delay: fullJitter(100*ms, 2*s1), maxAttempts: 12, seed: 3,
		policy: policy(100*ms, 2*s1, 12, 30*s1, "full")}
}

// judge runs recs (meta first) through a fresh analyzer.
func judge(recs []timeline.Record, opts Options) *Verdict {
	an := New(recs[0].Meta, opts)
	for i := 1; i < len(recs); i++ {
		an.Add(&recs[i])
	}
	return an.Result()
}

// shift delays every record by d, as if the fleet arrived d late.
func shift(recs []timeline.Record, d time.Duration) []timeline.Record {
	for i := range recs {
		switch r := &recs[i]; r.Type {
		case timeline.TypeAttempt:
			r.Attempt.At += int64(d)
			r.Attempt.Done += int64(d)
			if r.Attempt.HasNotBefore {
				r.Attempt.NotBefore += int64(d)
			}
		case timeline.TypeOutcome:
			r.Outcome.Scheduled += int64(d)
			r.Outcome.Start += int64(d)
			r.Outcome.End += int64(d)
		case timeline.TypeEnd:
			r.End.At += int64(d)
		}
	}
	return recs
}

func endOf(recs []timeline.Record) *timeline.End { return recs[len(recs)-1].End }

// TestFidelity: each way a run can fail to be carried out makes an
// otherwise passing verdict INCONCLUSIVE, names the reason, and never sets
// Pass; a failed check still makes it FAIL.
func TestFidelity(t *testing.T) {
	base := goodRun()
	if v := base.verdict(Options{}); v.Status != VerdictPass || !v.Pass || len(v.Inconclusive) > 0 {
		t.Fatalf("the faithful run: %s %v %s; want a clean PASS", v.Status, v.Inconclusive, describe(v))
	}
	tests := []struct {
		name   string
		mutate func([]timeline.Record) []timeline.Record
		want   string // a piece of the reason
	}{
		{"killed: no end record", func(r []timeline.Record) []timeline.Record { return r[:len(r)-1] }, "no end record"},
		{"interrupted by a signal", func(r []timeline.Record) []timeline.Record {
			*endOf(r) = timeline.End{At: 4e9, Reason: timeline.EndInterrupted, Signal: "interrupt", InFlight: 3}
			return r
		}, "interrupted by interrupt"},
		{"duration cap with requests in flight", func(r []timeline.Record) []timeline.Record {
			*endOf(r) = timeline.End{At: 4e9, Reason: timeline.EndDuration, InFlight: 2, Unstarted: 5}
			return r
		}, "duration cap stopped the run"},
		{"write error", func(r []timeline.Record) []timeline.Record {
			endOf(r).Reason = timeline.EndWriteError
			return r
		}, "writing the timeline failed"},
		{"dial errors", func(r []timeline.Record) []timeline.Record {
			endOf(r).DialErrors = 7
			return r
		}, "could not connect 7 times"},
		{"harness errors in words", func(r []timeline.Record) []timeline.Record {
			endOf(r).Errors = []string{"too many open files"}
			return r
		}, "harness: too many open files"},
		{"fewer outcomes than scheduled", func(r []timeline.Record) []timeline.Record {
			r[0].Meta.Scheduled += 5
			return r
		}, "100 of 105 scheduled logical requests"},
		{"plumbing errors", func(r []timeline.Record) []timeline.Record {
			for i := range r {
				if r[i].Type == timeline.TypeOutcome && r[i].Outcome.Client == "4" {
					r[i].Outcome.Result, r[i].Outcome.Harness, r[i].Outcome.Error = timeline.ResultError, true, "exec: exited with status 3"
				}
			}
			return r
		}, "failed in the harness or the subject's plumbing, not in the library (first: 4 4/0: exec: exited with status 3)"},
		{"fleet started late", func(r []timeline.Record) []timeline.Record {
			for i := range r {
				if o := &r[i].Outcome; r[i].Type == timeline.TypeOutcome {
					o.Start = min(o.Scheduled+int64(400*ms), o.End)
				}
			}
			return r
		}, "started requests late"},
		{"fleet arrived after the first phase", func(r []timeline.Record) []timeline.Record {
			r = shift(r, s1)
			r[0].Meta.Phases = []timeline.Phase{{Name: "outage", End: int64(s1) / 2}, {Name: "recovered", Start: int64(s1) / 2}}
			return r
		}, "after the first phase (outage) ended"},
		{"meta only", func(r []timeline.Record) []timeline.Record {
			r[0].Meta.Scheduled = 0
			return []timeline.Record{r[0], r[len(r)-1]}
		}, "no attempt"},
		{"a required check judged nothing", func(r []timeline.Record) []timeline.Record {
			r[0].Meta.Expect = &timeline.Expect{Require: []string{CheckIdempotency}}
			return r
		}, "required check idempotency judged nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := judge(tt.mutate(base.records()), Options{})
			if v.Status != VerdictInconclusive || v.Pass {
				t.Fatalf("status %s pass %v (%s); want inconclusive, not pass", v.Status, v.Pass, describe(v))
			}
			if got := strings.Join(v.Inconclusive, "\n"); !strings.Contains(got, tt.want) {
				t.Errorf("reasons:\n%s\nwant one containing %q", got, tt.want)
			}
		})
	}

	// A failure seen in part of a run is still a failure.
	bad := sim{clients: 100, server: outage(2*s1, ""), delay: fixed(s1), maxAttempts: 12, seed: 3,
		policy: policy(100*ms, 2*s1, 12, 30*s1, "full")}
	recs := bad.records()
	*endOf(recs) = timeline.End{At: 1e9, Reason: timeline.EndInterrupted, Signal: "interrupt"}
	if v := judge(recs, Options{}); v.Status != VerdictFail || v.Pass || len(v.Inconclusive) == 0 {
		t.Errorf("interrupted run with a failed check: %s pass %v, reasons %v; want fail with the reasons kept", v.Status, v.Pass, v.Inconclusive)
	}
}

// TestFidelityServeRecordings: a serve recording has no scheduled count and
// no end record; it is judged on what it holds.
func TestFidelityServeRecordings(t *testing.T) {
	recs := goodRun().records()
	recs[0].Meta.Recorder, recs[0].Meta.Scheduled = "serve", 0
	var kept []timeline.Record
	for _, r := range recs {
		if r.Type != timeline.TypeOutcome && r.Type != timeline.TypeEnd {
			kept = append(kept, r)
		}
	}
	if v := judge(kept, Options{}); v.Status != VerdictPass {
		t.Errorf("serve recording: %s %v (%s); want pass", v.Status, v.Inconclusive, describe(v))
	}
	// A client that turned up after the outage tested nothing.
	kept = shift(kept, s1)
	kept[0].Meta.Phases = []timeline.Phase{{Name: "outage", End: int64(s1) / 2}, {Name: "ok", Start: int64(s1) / 2}}
	if v := judge(kept, Options{}); v.Status != VerdictInconclusive {
		t.Errorf("serve recording of a late client: %s; want inconclusive", v.Status)
	}
}

// TestRequireOption: --require makes a check's skip inconclusive, and a
// required check runs even when expect.checks leaves it out.
func TestRequireOption(t *testing.T) {
	s := goodRun()
	s.expect = &timeline.Expect{Checks: []string{CheckRetryAfter, CheckAttempts}}
	v := s.verdict(Options{Require: []string{CheckWaves}})
	if c := v.Check(CheckWaves); c == nil || c.Status == StatusSkip {
		t.Fatalf("waves: %+v; want it run because it is required", c)
	}
	v = s.verdict(Options{Require: []string{CheckRetryAfter}})
	if v.Status != VerdictInconclusive {
		t.Errorf("required retry-after with no Retry-After sent: %s; want inconclusive", v.Status)
	}
	v = s.verdict(Options{Require: []string{CheckRetryAfter}, Skip: []string{CheckRetryAfter}})
	if v.Status == VerdictInconclusive {
		t.Errorf("a required check skipped on purpose with --skip: %s %v; want it not to count", v.Status, v.Inconclusive)
	}
	if err := (Options{Require: []string{"nope"}}).Validate(); err == nil {
		t.Error("Validate accepted --require nope")
	}
}

// TestInconclusiveEncoders: every output names the verdict and its reasons,
// and none says pass.
func TestInconclusiveEncoders(t *testing.T) {
	recs := goodRun().records()
	*endOf(recs) = timeline.End{At: 4e9, Reason: timeline.EndInterrupted, Signal: "terminated", InFlight: 3}
	v := judge(recs, Options{})
	var txt, js, junit, md bytes.Buffer
	for _, w := range []struct {
		buf   *bytes.Buffer
		write func(*bytes.Buffer, *Verdict) error
	}{
		{&txt, func(b *bytes.Buffer, v *Verdict) error { return WriteText(b, v) }},
		{&js, func(b *bytes.Buffer, v *Verdict) error { return WriteJSON(b, v) }},
		{&junit, func(b *bytes.Buffer, v *Verdict) error { return WriteJUnit(b, v) }},
		{&md, func(b *bytes.Buffer, v *Verdict) error { return WriteMarkdown(b, v) }},
	} {
		if err := w.write(w.buf, v); err != nil {
			t.Fatal(err)
		}
	}
	for name, out := range map[string]string{"text": txt.String(), "markdown": md.String()} {
		if !strings.Contains(out, "verdict: INCONCLUSIVE") || !strings.Contains(out, "interrupted by terminated") {
			t.Errorf("%s output lacks the verdict or its reason:\n%s", name, out)
		}
	}
	var back struct {
		Verdict      string   `json:"verdict"`
		Pass         bool     `json:"pass"`
		Inconclusive []string `json:"inconclusive"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Pass || back.Verdict != VerdictInconclusive || len(back.Inconclusive) == 0 {
		t.Errorf("JSON: %+v, %v; want verdict inconclusive, pass false, reasons", back, err)
	}
	var doc struct {
		Errors int `xml:"errors,attr"`
		Suite  struct {
			Errors int `xml:"errors,attr"`
			Cases  []struct {
				Name  string `xml:"name,attr"`
				Error *struct {
					Message string `xml:"message,attr"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(junit.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Errors != 1 || doc.Suite.Errors != 1 || len(doc.Suite.Cases) == 0 || doc.Suite.Cases[0].Name != "run-fidelity" ||
		doc.Suite.Cases[0].Error == nil || !strings.HasPrefix(doc.Suite.Cases[0].Error.Message, "INCONCLUSIVE: ") {
		t.Errorf("JUnit: %+v; want a first run-fidelity testcase with an INCONCLUSIVE error", doc)
	}
}

func TestLatencyHistQuantile(t *testing.T) {
	var h latencyHist
	for i := 1; i <= 1000; i++ {
		h.add(int64(i) * int64(time.Millisecond))
	}
	for _, q := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * ms}, {0.99, 990 * ms}, {1, s1}} {
		got := time.Duration(h.quantile(q.q))
		if got < q.want || float64(got) > 1.1*float64(q.want) {
			t.Errorf("quantile(%v) = %v; want within [%v, +10%%]", q.q, got, q.want)
		}
	}
	var zero latencyHist
	zero.add(0)
	zero.add(-5)
	if got := zero.quantile(0.99); got > 1000 {
		t.Errorf("quantile of zeros = %d ns; want ≤ 1 µs", got)
	}
}

// TestServeRecordingRequiredOutcomeChecks: a scenario that requires
// give-up of a run does not make every serve recording of it
// INCONCLUSIVE: a recording has no outcomes to judge. A required check it
// could judge still counts.
func TestServeRecordingRequiredOutcomeChecks(t *testing.T) {
	recs := goodRun().records()
	recs[0].Meta.Recorder, recs[0].Meta.Scheduled = "serve", 0
	var kept []timeline.Record
	for _, r := range recs {
		if r.Type != timeline.TypeOutcome && r.Type != timeline.TypeEnd {
			kept = append(kept, r)
		}
	}
	kept[0].Meta.Expect = &timeline.Expect{Require: []string{CheckGiveUp, CheckBudget}}
	if v := judge(kept, Options{}); v.Status != VerdictPass {
		t.Errorf("serve recording requiring give-up and budget: %s %v; want pass", v.Status, v.Inconclusive)
	}
	kept[0].Meta.Expect = &timeline.Expect{Require: []string{CheckGiveUp, CheckRetryAfter}}
	if v := judge(kept, Options{}); v.Status != VerdictInconclusive {
		t.Errorf("serve recording requiring retry-after, which it cannot judge here: %s; want inconclusive", v.Status)
	}
}
