package analyzer

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/retrylab/retrylab/timeline"
)

func TestParseCheckSpec(t *testing.T) {
	tests := []struct {
		in      string
		want    CheckSpec
		wantErr string
	}{
		{"waves", CheckSpec{ID: "waves"}, ""},
		{" waves:threshold=2.5 ", CheckSpec{ID: "waves", Params: map[string]string{"threshold": "2.5"}}, ""},
		{"retry-after:tolerance=10ms,threshold=0", CheckSpec{ID: "retry-after", Params: map[string]string{"tolerance": "10ms", "threshold": "0"}}, ""},
		{"non-retryable:statuses=400|404", CheckSpec{ID: "non-retryable", Params: map[string]string{"statuses": "400|404"}}, ""},
		{"budget:tolerance=0.5", CheckSpec{ID: "budget", Params: map[string]string{"tolerance": "0.5"}}, ""},
		{"wavs", CheckSpec{}, `unknown check "wavs"`},
		{"", CheckSpec{}, `unknown check ""`},
		{"waves:", CheckSpec{}, "empty parameter list"},
		{"waves:threshold", CheckSpec{}, "want key=value"},
		{"waves:thresh=1", CheckSpec{}, `unknown parameter "thresh"`},
		{"waves:threshold=-1", CheckSpec{}, "is out of range [0, 1e+12]"},
		{"waves:threshold=NaN", CheckSpec{}, "want a number"},
		{"waves:threshold=1,threshold=2", CheckSpec{}, "given twice"},
		{"retry-after:tolerance=-5ms", CheckSpec{}, "negative duration"},
		{"retry-after:tolerance=soon", CheckSpec{}, "want a duration"},
		{"non-retryable:statuses=4040", CheckSpec{}, "not an HTTP status"},
		{"non-retryable:statuses=|", CheckSpec{}, "want statuses"},
	}
	for _, tt := range tests {
		got, err := ParseCheckSpec(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseCheckSpec(%q) error = %v; want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseCheckSpec(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	if _, err := ParseCheckSpec("nope"); !errors.Is(err, ErrUnknownCheck) {
		t.Errorf("ParseCheckSpec(nope) error = %v; want ErrUnknownCheck", err)
	}
}

func FuzzParseCheckSpec(f *testing.F) {
	for _, s := range []string{"waves", "waves:threshold=2.5", "retry-after:tolerance=10ms,threshold=0",
		"non-retryable:statuses=400|404", "x:y=z", "budget:budget=1h", ":", "waves:a=b=c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParseCheckSpec(s)
		if err != nil {
			return
		}
		again, err := ParseCheckSpec(spec.String())
		if err != nil || !reflect.DeepEqual(again, spec) {
			t.Fatalf("ParseCheckSpec(%q) = %+v; its String %q parses as %+v, %v", s, spec, spec.String(), again, err)
		}
		if err := (Options{Checks: []CheckSpec{spec}}).Validate(); err != nil {
			t.Fatalf("Validate(%+v) = %v", spec, err)
		}
		New(nil, Options{Checks: []CheckSpec{spec}}).Result()
	})
}

func TestParseCheckIDs(t *testing.T) {
	got, err := ParseCheckIDs("waves, pacing,")
	if err != nil || !reflect.DeepEqual(got, []string{"waves", "pacing"}) {
		t.Errorf("ParseCheckIDs = %v, %v; want [waves pacing]", got, err)
	}
	if _, err := ParseCheckIDs("waves,nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("ParseCheckIDs(waves,nope) error = %v; want it to name nope", err)
	}
	if err := (Options{Skip: []string{"nope"}}).Validate(); !errors.Is(err, ErrUnknownCheck) {
		t.Errorf("Validate(skip nope) = %v; want ErrUnknownCheck", err)
	}
}

// TestPrecedence: defaults < the scenario's expect block < flags, and the
// selection rules of expect.checks, expect.skip and --skip.
func TestPrecedence(t *testing.T) {
	meta := func(e *timeline.Expect) *timeline.Meta {
		return &timeline.Meta{Recorder: "run", Policy: policy(100*ms, s1, 5, 10*s1, "full"), Expect: e}
	}
	thr := func(v *Verdict, id string) float64 { return v.Check(id).Threshold }
	v := New(meta(nil), Options{}).Result()
	if got := thr(v, CheckWaves); got != defaultWaves {
		t.Errorf("default waves threshold = %v; want %v", got, defaultWaves)
	}
	if got := thr(v, CheckAmplification); got != 5 {
		t.Errorf("default amplification threshold = %v; want the policy's max_attempts 5", got)
	}
	e := &timeline.Expect{Thresholds: map[string]float64{"waves": 3, "amplification": 3, "retry-after.tolerance": 0.02}}
	v = New(meta(e), Options{}).Result()
	if got := thr(v, CheckWaves); got != 3 {
		t.Errorf("expect waves threshold = %v; want 3", got)
	}
	an := New(meta(e), Options{Checks: []CheckSpec{mustSpec(t, "waves:threshold=2.5")}})
	if got := thr(an.Result(), CheckWaves); got != 2.5 {
		t.Errorf("flag waves threshold = %v; want 2.5", got)
	}
	if got := thr(an.Result(), CheckAmplification); got != 3 {
		t.Errorf("expect amplification threshold under a waves flag = %v; want 3", got)
	}
	if an.raTol != int64(20*ms) {
		t.Errorf("retry-after tolerance from expect = %v; want 20ms", an.raTol)
	}

	// Selection.
	e = &timeline.Expect{Checks: []string{CheckWaves, CheckBudget}, Skip: []string{CheckBudget}}
	v = New(meta(e), Options{Checks: []CheckSpec{{ID: CheckAttempts}}, Skip: []string{CheckWaves}}).Result()
	for id, want := range map[string]string{
		CheckWaves:      "skipped by --skip",
		CheckBudget:     "skipped by the scenario's expect.skip",
		CheckRetryAfter: "not in the scenario's expect.checks",
	} {
		if c := v.Check(id); c.Status != StatusSkip || c.Reason != want {
			t.Errorf("%s = %s %q; want skip %q", id, c.Status, c.Reason, want)
		}
	}
	if c := v.Check(CheckAttempts); c.Reason != "no attempts in the timeline" {
		t.Errorf("attempts selected by a flag = %s (%s); want it run (and skip: nothing to judge)", c.Status, c.Reason)
	}

	// Unknown names in the scenario are warnings, not errors.
	v = New(meta(&timeline.Expect{Checks: []string{"wavez"}, Thresholds: map[string]float64{"waves.nope": 1}}), Options{}).Result()
	if len(v.Warnings) != 2 {
		t.Errorf("warnings = %+v; want two (unknown check, unknown threshold)", v.Warnings)
	}
}

// TestUnselectedChecksMeasureNothing: a check the scenario leaves out or
// --skip names reports why, and no figure or sample count (the report
// would show "N measured" for a check that was not run).
func TestUnselectedChecksMeasureNothing(t *testing.T) {
	s := goodRun()
	s.expect = &timeline.Expect{Checks: []string{CheckRetryAfter, CheckAttempts}}
	v := s.verdict(Options{Skip: []string{CheckAttempts}})
	for _, id := range []string{CheckJitterBounds, CheckAttempts, CheckInstantRetry} {
		if c := v.Check(id); c.Status != StatusSkip || c.Samples != 0 || c.Figure != 0 {
			t.Errorf("%s = %s, %d samples, figure %v; want skip measuring nothing", id, c.Status, c.Samples, c.Figure)
		}
	}
}
