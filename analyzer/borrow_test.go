package analyzer

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// TestAnalyzeBorrowed: Analyze decodes into memory it reuses once Add has
// seen a record (timeline.Decoder.DecodeIn), so the analyzer must clone every
// string it keeps. Fed long fault and result names (which the decoder does
// not intern), non-idempotent retries and offenders of most checks, the
// verdict of Analyze, serial (the block reused at every line) and pipelined,
// is the verdict Add gives over the same records held as Go values.
func TestAnalyzeBorrowed(t *testing.T) {
	long := strings.Repeat("x", 40)
	for _, s := range []sim{
		{clients: 50, server: outage(2*s1, "garbage"), delay: fixed(s1), maxAttempts: 4, method: "POST", seed: 9,
			policy: policy(100*ms, 500*ms, 3, 10*s1, "full")},
		{clients: 80, server: outage(s1, "seconds"), delay: instant(), maxAttempts: 6, method: "PATCH", idem: true, seed: 3,
			policy: policy(100*ms, s1, 5, 2*s1, "full")},
	} {
		recs := s.records()
		for i := range recs {
			switch r := &recs[i]; r.Type {
			case timeline.TypeAttempt:
				if i%7 == 0 {
					r.Attempt.Fault = "reset-" + long + strings.Repeat("y", i%3)
				}
			case timeline.TypeOutcome:
				if i%5 == 0 {
					r.Outcome.Result = "odd-" + long + strings.Repeat("z", i%3)
				}
			}
		}
		an := New(recs[0].Meta, Options{})
		for i := 1; i < len(recs); i++ {
			an.Add(&recs[i])
		}
		want := an.Result()
		if len(want.Figures.Statuses) < 4 || len(want.Figures.Results) < 3 {
			t.Fatalf("statuses %v, results %v: the test wants several long fault and result names", want.Figures.Statuses, want.Figures.Results)
		}
		examples := 0
		for _, c := range want.Checks {
			examples += len(c.Examples)
		}
		if examples < 10 {
			t.Fatalf("%d examples: the test wants offenders to keep", examples)
		}
		data := ndjson(t, recs)
		for _, serial := range []bool{true, false} {
			got, err := Analyze(bytes.NewReader(data), Options{Serial: serial})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Analyze(serial %v) = %s\nwant %s", serial, describe(got), describe(want))
			}
		}
	}
}

// TestAnalyzeBorrowedLimits: pacing counts rate limits by the name of the
// limit that refused, from borrowed strings too: its reason is the same
// whether the records came decoded into reused memory or as Go values.
func TestAnalyzeBorrowedLimits(t *testing.T) {
	long := strings.Repeat("l", 40)
	meta := &timeline.Meta{Format: timeline.Format, Recorder: "run", Scenario: "limits",
		Quota:  &timeline.Quota{Name: "minute", Algorithm: "fixed-window", Rate: 5, Limit: 300, Window: int64(time.Minute), Key: "global"},
		Phases: []timeline.Phase{{Name: "steady", Respond: "quota"}}, Expect: &timeline.Expect{Checks: []string{CheckPacing}}}
	recs := []timeline.Record{{Type: timeline.TypeMeta, Meta: meta}}
	i := 0
	recs = append(recs, steadyClient(20, 30*time.Second, func(_ time.Duration, a *timeline.Attempt) {
		if i++; i%3 == 0 {
			a.Status, a.Limit = 429, long+strings.Repeat("m", i%4)
		}
	})...)
	an := New(meta, Options{})
	for i := 1; i < len(recs); i++ {
		an.Add(&recs[i])
	}
	want := an.Result()
	if c := want.Check(CheckPacing); c.Status != StatusFail || strings.Count(c.Reason, long) != 4 {
		t.Fatalf("pacing %s: %s; want a failure naming four limits", c.Status, c.Reason)
	}
	data := ndjson(t, recs)
	for _, serial := range []bool{true, false} {
		got, err := Analyze(bytes.NewReader(data), Options{Serial: serial})
		if err != nil {
			t.Fatal(err)
		}
		if g, w := got.Check(CheckPacing).Reason, want.Check(CheckPacing).Reason; g != w {
			t.Errorf("Analyze(serial %v): pacing's reason\n%s\nwant\n%s", serial, g, w)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Analyze(serial %v) = %s\nwant %s", serial, describe(got), describe(want))
		}
	}
}
