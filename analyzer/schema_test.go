package analyzer

import (
	"errors"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/internal/doccheck"
	"github.com/retrylab/retrylab/timeline"
)

// The checks table of docs/checks.md lies between these lines.
const (
	checksDoc      = "../docs/checks.md"
	checksDocBegin = "<!-- BEGIN checks table: generated from analyzer/schema.go; edit the schema, then run go generate ./analyzer -->\n"
	checksDocEnd   = "<!-- END checks table -->\n"
)

// defaultText is how docs/checks.md states a default of kind k.
func defaultText(k ParamKind, d Default) string {
	var v string
	switch {
	case d.None:
	case k == KindDuration:
		v = time.Duration(math.Round(d.Num * float64(time.Second))).String()
	case k == KindStatuses:
		s := make([]string, len(d.Statuses))
		for i, st := range d.Statuses {
			s[i] = strconv.Itoa(st)
		}
		v = strings.Join(s, "|")
	default:
		v = strconv.FormatFloat(d.Num, 'g', -1, 64)
	}
	if d.Doc == "" {
		return v
	}
	return strings.ReplaceAll(d.Doc, "{}", v)
}

// checksMarkdown is the checks table of docs/checks.md, from the schema.
func checksMarkdown() string {
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	var b strings.Builder
	b.WriteString("| id | figure (unit) | default threshold | parameters (kind: default) | skips when |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, c := range checkTable {
		params := "—"
		if len(c.Params) > 0 {
			ps := make([]string, len(c.Params))
			for i, p := range c.Params {
				ps[i] = "`" + p.Name + "` (" + p.Kind.String() + ": " + defaultText(p.Kind, p.Default) + ")"
			}
			params = strings.Join(ps, ", ")
		}
		b.WriteString("| `" + c.ID + "` | " + cell(c.Meaning) + " | " + cell(defaultText(KindNumber, c.Threshold)) +
			" | " + cell(params) + " | " + cell(c.Skips) + " |\n")
	}
	return b.String()
}

// noiseMarkdown is docs/checks.md's noise table: how each kind of the
// host's noise moves each check's figure, from the schema's rows.
func noiseMarkdown() string {
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	var b strings.Builder
	b.WriteString("| id | delay | batch | starve | the range |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, c := range checkTable {
		n := c.Noise
		undo := n.Undo
		if undo == "" {
			undo = "a point: noise does not enter it"
		}
		b.WriteString("| `" + c.ID + "` | " + n.Delay.String() + " | " + n.Batch.String() + " | " + n.Starve.String() + " | " + cell(undo) + " |\n")
	}
	return b.String()
}

// TestChecksDoc: the checks table and the noise table of docs/checks.md
// are the ones the schema gives. With -update (go generate ./analyzer) it
// rewrites them.
func TestChecksDoc(t *testing.T) {
	for _, tc := range []struct {
		begin, end, want string
	}{
		{checksDocBegin, checksDocEnd, checksMarkdown()},
		{"<!-- BEGIN noise table: generated from analyzer/schema.go; edit the schema, then run go generate ./analyzer -->\n", "<!-- END noise table -->", noiseMarkdown()},
	} {
		raw, err := os.ReadFile(checksDoc)
		if err != nil {
			t.Fatal(err)
		}
		doc := string(raw)
		before, rest, ok := strings.Cut(doc, tc.begin)
		table, after, ok2 := strings.Cut(rest, tc.end)
		if !ok || !ok2 {
			t.Fatalf("%s has no lines\n%s...\n%s around its table", checksDoc, tc.begin, tc.end)
		}
		if table == tc.want {
			continue
		}
		if *update {
			if err := os.WriteFile(checksDoc, []byte(before+tc.begin+tc.want+tc.end+after), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote a table of %s", checksDoc)
			continue
		}
		t.Errorf("a table of %s is not the schema's: %s\nrun go generate ./analyzer (go test ./analyzer -run TestChecksDoc -update) to rewrite it",
			checksDoc, strings.ReplaceAll(doccheck.FirstDiff(table, tc.want), "the runs give", "the schema gives"))
	}
}

// TestCheckSchema: the schema is well formed: ids in report order and
// unique, each with a section in docs/checks.md; parameters unique, none
// named threshold; each default either a value that its docs text shows
// or derived (None) with a text that says how.
func TestCheckSchema(t *testing.T) {
	raw, err := os.ReadFile(checksDoc)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{CheckRetryAfter, CheckInstantRetry, CheckWaves, CheckNonRetryable, CheckIdempotency, CheckAttempts, CheckBudget,
		CheckGiveUp, CheckAmplification, CheckPacing, CheckJitterBounds, CheckRecovery, CheckLoadAmplification, CheckWastedWork}
	if got := CheckIDs(); !slices.Equal(got, want) {
		t.Errorf("CheckIDs() = %v; want %v", got, want)
	}
	checkDefault := func(where string, k ParamKind, d Default) {
		switch {
		case d.None && (d.Doc == "" || strings.Contains(d.Doc, "{}")):
			t.Errorf("%s: a derived default needs a text saying how, without {}: %q", where, d.Doc)
		case !d.None && d.Doc != "" && !strings.Contains(d.Doc, "{}"):
			t.Errorf("%s: the text %q does not show the value ({})", where, d.Doc)
		case !d.None && (k == KindStatuses) != (len(d.Statuses) > 0):
			t.Errorf("%s: a %s default with statuses %v", where, k, d.Statuses)
		case !d.None && k == KindStatuses:
			for _, st := range d.Statuses {
				if func() error { _, err := thresholdValue(KindStatuses, float64(st)); return err }() != nil {
					t.Errorf("%s: %d is not an HTTP status", where, st)
				}
			}
		case !d.None && (d.Num < 0 || math.IsNaN(d.Num)):
			t.Errorf("%s: default %v", where, d.Num)
		}
	}
	for _, c := range checkTable {
		if c.Unit == "" || c.Meaning == "" || c.Skips == "" {
			t.Errorf("%s: unit %q, meaning %q, skips %q: want all three", c.ID, c.Unit, c.Meaning, c.Skips)
		}
		if !strings.Contains(string(raw), "\n## "+c.ID+"\n") {
			t.Errorf("%s has no section \"## %s\"", checksDoc, c.ID)
		}
		checkDefault(c.ID+" threshold", KindNumber, c.Threshold)
		var names []string
		for _, p := range c.Params {
			if p.Name == ThresholdParam || slices.Contains(names, p.Name) {
				t.Errorf("%s: parameter %q twice", c.ID, p.Name)
			}
			names = append(names, p.Name)
			checkDefault(c.ID+"."+p.Name, p.Kind, p.Default)
		}
	}
}

// TestSchemaDefaultsReachAnalyzer: an analyzer with nothing set runs with
// the schema's defaults, and a changed schema value reaches it.
func TestSchemaDefaultsReachAnalyzer(t *testing.T) {
	def := func(id, name string) float64 {
		c := lookupCheck(id)
		p, ok := c.Param(name)
		if !ok || p.Default.None {
			t.Fatalf("%s.%s: no fixed default in the schema", id, name)
		}
		return p.Default.Num
	}
	ns := func(s float64) int64 { return int64(s * float64(time.Second)) }
	// Every check built, pacing too (it needs a quota and to be named).
	paced := func() *Analyzer {
		return New(&timeline.Meta{Recorder: "run", Quota: &timeline.Quota{Rate: 1}}, Options{Checks: []CheckSpec{{ID: CheckPacing}}})
	}
	a := paced()
	warmup := func(a *Analyzer) int64 { return a.cfgOf(CheckPacing).chk.(*pacingCheck).warmup }
	for _, f := range []struct {
		key       string
		got, want int64
	}{
		{"retry-after.tolerance", a.raTol, ns(def(CheckRetryAfter, "tolerance"))},
		{"instant-retry.window", a.instWindow, ns(def(CheckInstantRetry, "window"))},
		{"waves.slack", a.waveSlack, ns(def(CheckWaves, "slack"))},
		{"waves.window", a.waveWindow, ns(def(CheckWaves, "window"))},
		{"waves.min_samples", a.waveMin, int64(def(CheckWaves, "min_samples"))},
		{"waves.min_clients", int64(a.wv.minClients), int64(def(CheckWaves, "min_clients"))},
		{"pacing.warmup", warmup(a), ns(def(CheckPacing, "warmup"))},
		{"jitter-bounds.tolerance", a.jbTol, ns(def(CheckJitterBounds, "tolerance"))},
		{"jitter-bounds.first_exponent", int64(a.firstExp), int64(def(CheckJitterBounds, "first_exponent"))},
		{"give-up.within", a.cfgOf(CheckGiveUp).chk.(*giveUpCheck).within, ns(def(CheckGiveUp, "within"))},
		{"budget.tolerance (derived: at least 1s)", a.cfgOf(CheckBudget).chk.(*budgetCheck).tol, int64(time.Second)},
	} {
		if f.got != f.want {
			t.Errorf("%s = %d; want the schema's %d", f.key, f.got, f.want)
		}
	}
	p, _ := lookupCheck(CheckNonRetryable).Param("statuses")
	for _, st := range p.Default.Statuses {
		if !a.cfgOf(CheckNonRetryable).chk.(*nonRetryCheck).set[st] {
			t.Errorf("non-retryable.statuses default misses %d", st)
		}
	}
	v := New(&timeline.Meta{Recorder: "run"}, Options{}).Result()
	for _, c := range checkTable {
		if c.Threshold.None || c.ID == CheckAmplification {
			continue // derived from the policy
		}
		if got := v.Check(c.ID).Threshold; got != c.Threshold.Num {
			t.Errorf("%s threshold = %v; want the schema's %v", c.ID, got, c.Threshold.Num)
		}
	}

	// A value changed in the schema is the one the analyzer uses.
	i := slices.IndexFunc(checkTable, func(c Check) bool { return c.ID == CheckPacing })
	saved := checkTable[i]
	t.Cleanup(func() { checkTable[i] = saved })
	checkTable[i].Threshold.Num = 7
	checkTable[i].Params = []Param{{"warmup", KindDuration, Default{Num: 3}}}
	a = paced()
	if got := a.Result().Check(CheckPacing).Threshold; got != 7 || warmup(a) != int64(3*time.Second) {
		t.Errorf("with the schema's pacing threshold 7 and warmup 3s the analyzer has %v and %v", got, time.Duration(warmup(a)))
	}
}

// TestThresholdKey: keys of expect.thresholds resolve against the schema,
// and values are checked by kind.
func TestThresholdKey(t *testing.T) {
	for _, tt := range []struct {
		key, param string
		kind       ParamKind
		err        error
	}{
		{"waves", ThresholdParam, KindNumber, nil},
		{"waves.threshold", ThresholdParam, KindNumber, nil},
		{"waves.window", "window", KindDuration, nil},
		{"non-retryable.statuses", "statuses", KindStatuses, nil},
		{"waves.bogus", "", 0, ErrUnknownParam},
		{"waves.", "", 0, ErrUnknownParam},
		{"wavez", "", 0, ErrUnknownCheck},
		{"wavez.threshold", "", 0, ErrUnknownCheck},
	} {
		c, p, err := ThresholdKey(tt.key)
		if !errors.Is(err, tt.err) {
			t.Errorf("ThresholdKey(%q) error = %v; want %v", tt.key, err, tt.err)
			continue
		}
		if err == nil && (p.Name != tt.param || p.Kind != tt.kind || !strings.HasPrefix(tt.key, c.ID)) {
			t.Errorf("ThresholdKey(%q) = %s, %s %s; want %s %s", tt.key, c.ID, p.Name, p.Kind, tt.param, tt.kind)
		}
	}
	if c, _, err := ThresholdKey("waves.bogus"); err == nil || c.ID != CheckWaves || !strings.Contains(err.Error(), "(known: threshold, min_clients, min_samples, slack, window)") {
		t.Errorf("ThresholdKey(waves.bogus) = %s, %v; want the check waves and an error listing its parameters", c.ID, err)
	}
	for _, tt := range []struct {
		kind ParamKind
		v    float64
		ok   bool
	}{
		{KindNumber, 2.5, true}, {KindNumber, -1, false}, {KindNumber, math.NaN(), false}, {KindNumber, math.Inf(1), false},
		{KindDuration, 0.01, true}, {KindDuration, -0.01, false},
		{KindStatuses, 404, true}, {KindStatuses, 404.5, false}, {KindStatuses, 99, false}, {KindStatuses, 600, false},
	} {
		if _, err := thresholdValue(tt.kind, tt.v); (err == nil) != tt.ok {
			t.Errorf("thresholdValue(%s, %v) = %v; want ok %v", tt.kind, tt.v, err, tt.ok)
		}
	}
}

// TestParamTypoPanics: a check that reads a parameter its row does not
// declare fails when it is built, not with a zero value.
func TestParamTypoPanics(t *testing.T) {
	c := &checkCfg{def: lookupCheck(CheckWaves), params: map[string]paramValue{}}
	if got := c.dur("slack"); got != int64(50*time.Millisecond) {
		t.Fatalf("waves.slack = %v; want the row's 50ms", time.Duration(got))
	}
	defer func() {
		if recover() == nil {
			t.Error("reading waves.slak did not panic")
		}
	}()
	c.num("slak")
}
