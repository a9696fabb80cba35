package findings

import (
	"slices"
	"strings"
	"testing"

	"github.com/retrylab/retrylab/analyzer"
)

func verdict(failed ...string) *analyzer.Verdict {
	v := &analyzer.Verdict{Pass: len(failed) == 0}
	for _, id := range analyzer.CheckIDs() {
		c := analyzer.CheckResult{ID: id, Status: analyzer.StatusPass, Unit: "retries"}
		if slices.Contains(failed, id) {
			c.Status, c.Figure = analyzer.StatusFail, 7
			c.Examples = []analyzer.Example{{Client: "3", Key: "3/0", Detail: "attempt 2 | early"}}
		}
		v.Checks = append(v.Checks, c)
	}
	return v
}

func TestMarkdown(t *testing.T) {
	runs := []run{
		{subject: "retrylab", scenario: "outage-delta", seed: 1, version: "(devel)", verdict: verdict(), results: map[string]int64{"ok": 10}, requests: 10},
		{subject: "retrylab", scenario: "outage-delta", seed: 2, version: "(devel)", verdict: verdict(), results: map[string]int64{"ok": 10}, requests: 10},
		{subject: "go-retry", scenario: "outage-delta", seed: 1, version: "v0.5.0", verdict: verdict("retry-after"), results: map[string]int64{"ok": 10}, requests: 10},
		{subject: "go-retry", scenario: "outage-delta", seed: 2, version: "v0.5.0", verdict: verdict("retry-after", "budget"), results: map[string]int64{"ok": 9, "hung": 1}, requests: 10},
	}
	doc := string(markdown(runs, []int64{1, 2}))
	for _, want := range []string{
		"| `retrylab` (reference) | (devel) | PASS | — |",
		"| `go-retry` | v0.5.0 | FAIL `retry-after`, `budget` (1/2) | — |",
		"  - outage-delta (2/2 seeds): 7 retries > 0; e.g. client 3 · request 3/0 · attempt 2 \\| early",
		causes["go-retry/retry-after"],
		causes["go-retry/budget"],
		"| `go-retry` | ok 10 of 10 · ",
		regenerate,
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("markdown lacks %q:\n%s", want, doc)
		}
	}
	// A cause is printed only beside a failure the runs showed.
	if strings.Contains(doc, causes["go-retry/waves"]) {
		t.Errorf("markdown prints the cause of a waves failure no run showed:\n%s", doc)
	}
}

// TestCauseKeys keeps the hand-written causes attached to real subjects,
// scenarios and checks.
func TestCauseKeys(t *testing.T) {
	for key := range causes {
		parts := strings.Split(key, "/")
		ok := (len(parts) == 2 || len(parts) == 3) && slices.Contains(libraries, parts[0]) &&
			slices.Contains(analyzer.CheckIDs(), parts[len(parts)-1])
		if len(parts) == 3 {
			ok = ok && slices.Contains(scenarioNames, parts[1])
		}
		if !ok {
			t.Errorf("causes[%q]: want subject/check or subject/scenario/check of known ones", key)
		}
	}
	for key := range outcomeNotes {
		parts := strings.Split(key, "/")
		if len(parts) != 2 || !slices.Contains(libraries, parts[0]) || !slices.Contains(scenarioNames, parts[1]) {
			t.Errorf("outcomeNotes[%q]: want subject/scenario of known ones", key)
		}
	}
}

// TestExplanationsCheckedAgainstRuns: a cause whose failure no run shows,
// and an outcome note about a run in which requests ended ok, are errors.
func TestExplanationsCheckedAgainstRuns(t *testing.T) {
	has := func(errs []string, sub string) bool {
		return slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, sub) })
	}
	fixed := []run{
		{subject: "go-retry", scenario: "outage-bare", seed: 1, verdict: verdict(), results: map[string]int64{"ok": 10}, requests: 10},
		{subject: "failsafe", scenario: "outage-bare", seed: 1, verdict: verdict(), results: map[string]int64{"ok": 10}, requests: 10},
	}
	errs := checkExplanations(fixed)
	if !has(errs, `causes["go-retry/waves"]`) {
		t.Errorf("no error for the go-retry waves cause when no run fails waves: %v", errs)
	}
	if !has(errs, `outcomeNotes["failsafe/outage-bare"]`) {
		t.Errorf("no error for the failsafe/outage-bare note when its run ended ok: %v", errs)
	}
	seen := []run{
		{subject: "go-retry", scenario: "outage-bare", seed: 1, verdict: verdict("waves"), results: map[string]int64{"ok": 10}, requests: 10},
		{subject: "failsafe", scenario: "outage-bare", seed: 1, verdict: verdict(), results: map[string]int64{"gave-up": 10}, requests: 10},
	}
	errs = checkExplanations(seen)
	if has(errs, `causes["go-retry/waves"]`) || has(errs, `outcomeNotes["failsafe/outage-bare"]`) {
		t.Errorf("errors for explanations the runs bear out: %v", errs)
	}
}
