package analyzer

import (
	"bufio"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// fmtFigure renders a figure or threshold in its unit.
func fmtFigure(v float64, unit string) string {
	switch unit {
	case "%", "% rate-limited":
		return strconv.FormatFloat(v, 'f', 1, 64) + "%"
	case "× full jitter":
		if v >= maxWaveIndex {
			return "≥" + strconv.Itoa(maxWaveIndex) + "×"
		}
		return strconv.FormatFloat(v, 'f', 1, 64) + "×"
	case "attempts/request":
		return strconv.FormatFloat(v, 'f', 2, 64)
	case "× offered load":
		return strconv.FormatFloat(v, 'f', 2, 64) + "×"
	case "% wasted":
		return strconv.FormatFloat(v, 'f', 1, 64) + "%"
	case "s":
		return strconv.FormatFloat(v, 'f', 1, 64) + "s"
	default:
		if v == float64(int64(v)) {
			return strconv.FormatInt(int64(v), 10)
		}
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// unitWord is the unit printed after a count ("3 retries"), "" for units
// that fmtFigure already shows.
func unitWord(unit string) string {
	switch unit {
	case "%", "× full jitter", "s":
		return ""
	case "% rate-limited":
		return "rate-limited"
	case "% wasted":
		return "wasted"
	case "× offered load":
		return "offered load"
	}
	return unit
}

// figureText is "97.2% ≤ 50.0%" style: the figure against the threshold.
func figureText(c *CheckResult) string {
	f := fmtFigure(c.Figure, c.Unit)
	if w := unitWord(c.Unit); w != "" {
		f += " " + w
	}
	op := "≤"
	switch c.Status {
	case StatusFail:
		op = ">"
	case StatusInconclusive:
		op = "?"
		if len(c.Range) == 2 {
			f = fmtFigure(c.Range[0], c.Unit) + "–" + fmtFigure(c.Range[1], c.Unit)
		}
		return f + " against " + fmtFigure(c.Threshold, c.Unit)
	}
	return f + " " + op + " " + fmtFigure(c.Threshold, c.Unit)
}

// exampleText is one line of evidence.
func exampleText(e *Example) string {
	var b strings.Builder
	if e.Client != "" {
		b.WriteString("client " + e.Client + " · ")
	}
	if e.Key != "" {
		b.WriteString(e.Key + " · ")
	}
	b.WriteString(e.Detail)
	return printable(b.String())
}

// printable replaces control characters (from client ids or keys sent by
// outside clients) so evidence cannot drive a terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '\uFFFD'
		}
		return r
	}, s)
}

func title(v *Verdict) string {
	f := &v.Figures
	var parts []string
	if f.Scenario != "" {
		parts = append(parts, f.Scenario)
	}
	if f.Subject != "" {
		s := "subject " + f.Subject
		if f.Version != "" {
			s += " " + f.Version
		}
		parts = append(parts, s)
	}
	if f.Recorder != "" {
		parts = append(parts, "seed "+strconv.FormatInt(f.Seed, 10))
	}
	parts = append(parts, fmt.Sprintf("%d attempts, %d requests, %d retries, %d outcomes", f.Attempts, f.Requests, f.Retries, f.Outcomes))
	return strings.Join(parts, " · ")
}

// Word is the verdict in capitals: PASS, FAIL or INCONCLUSIVE.
func (v *Verdict) Word() string {
	switch {
	case v.Status == VerdictInconclusive:
		return "INCONCLUSIVE"
	case v.Pass:
		return "PASS"
	}
	return "FAIL"
}

func passWord(v *Verdict) string { return v.Word() }

// WriteText writes the verdict as a terminal table in the manner of k6's
// thresholds block: ✓, ✗ or ↷ (skipped) per check, the figure against its
// threshold, one line of evidence under each failure, then the warnings.
func WriteText(w io.Writer, v *Verdict) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "retrylab verdict: %s  %s\n\n", passWord(v), title(v))
	if len(v.Inconclusive) > 0 {
		if v.Status == VerdictInconclusive {
			bw.WriteString("  the run behind this timeline cannot be vouched for; no check failed, but:\n")
		} else {
			bw.WriteString("  the run was not carried out faithfully, and a check failed anyway:\n")
		}
		for _, why := range v.Inconclusive {
			fmt.Fprintf(bw, "  ? %s\n", why)
		}
		bw.WriteString("\n")
	}
	width := 0
	for _, c := range v.Checks {
		width = max(width, len(c.ID))
	}
	for i := range v.Checks {
		c := &v.Checks[i]
		dots := strings.Repeat(".", width+3-len(c.ID))
		switch c.Status {
		case StatusSkip:
			fmt.Fprintf(bw, "  ↷ %s%s skipped: %s\n", c.ID, dots, c.Reason)
		case StatusPass:
			fmt.Fprintf(bw, "  ✓ %s%s %s\n", c.ID, dots, figureText(c))
		case StatusInconclusive:
			fmt.Fprintf(bw, "  ~ %s%s %s: undecided under the host's noise\n", c.ID, dots, figureText(c))
		default:
			fmt.Fprintf(bw, "  ✗ %s%s %s\n", c.ID, dots, figureText(c))
			if len(c.Examples) > 0 {
				fmt.Fprintf(bw, "      ↳ %s\n", exampleText(&c.Examples[0]))
			} else if c.Reason != "" {
				fmt.Fprintf(bw, "      ↳ %s\n", c.Reason)
			}
		}
	}
	if len(v.Warnings) > 0 {
		bw.WriteString("\n  warnings:\n")
		for _, wr := range v.Warnings {
			fmt.Fprintf(bw, "  ⚠ %s\n", wr.Message)
			if wr.Remedy != "" {
				fmt.Fprintf(bw, "      remedy: %s\n", wr.Remedy)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("analyzer: writing text: %w", err)
	}
	return nil
}

// WriteJSON writes the verdict as one indented JSON object.
func WriteJSON(w io.Writer, v *Verdict) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("analyzer: encoding JSON: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("analyzer: writing JSON: %w", err)
	}
	return nil
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  string          `xml:"system-out,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Error     *junitFailure `xml:"error,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Body    string `xml:",cdata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes the verdict as JUnit XML: one testsuite, one testcase
// per check (classname "retrylab.<scenario>"), a failure element with the
// evidence for each failed check and a skipped element with the reason for
// each skipped one. Warnings go to the suite's system-out. GitHub Actions
// test reporters, GitLab and Jenkins read this shape.
func WriteJUnit(w io.Writer, v *Verdict) error {
	suite := junitSuiteOf(v)
	return writeJUnit(w, junitSuites{Name: "retrylab", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Skipped: suite.Skipped, Suites: []junitSuite{suite}})
}

// junitSuiteOf is the verdict's testsuite (see WriteJUnit).
func junitSuiteOf(v *Verdict) junitSuite {
	scen := v.Figures.Scenario
	if scen == "" {
		scen = "timeline"
	}
	suite := junitSuite{Name: "retrylab " + scen, Time: "0"}
	if v.Figures.Subject != "" {
		suite.Name += " (" + v.Figures.Subject + ")"
		suite.Properties = append(suite.Properties, junitProperty{"subject", v.Figures.Subject})
	}
	if v.Figures.Version != "" {
		suite.Properties = append(suite.Properties, junitProperty{"subject_version", v.Figures.Version})
	}
	suite.Properties = append(suite.Properties,
		junitProperty{"seed", strconv.FormatInt(v.Figures.Seed, 10)},
		junitProperty{"attempts", strconv.FormatInt(v.Figures.Attempts, 10)})
	for i := range v.Checks {
		c := &v.Checks[i]
		tc := junitCase{Name: c.ID, Classname: "retrylab." + scen, Time: "0"}
		suite.Tests++
		switch c.Status {
		case StatusSkip:
			suite.Skipped++
			tc.Skipped = &junitSkipped{Message: c.Reason}
		case StatusInconclusive:
			suite.Skipped++
			tc.Skipped = &junitSkipped{Message: "inconclusive: " + figureText(c) + ": " + c.Reason}
		case StatusFail:
			suite.Failures++
			var body strings.Builder
			body.WriteString(c.Reason + "\n")
			for j := range c.Examples {
				body.WriteString(exampleText(&c.Examples[j]) + "\n")
			}
			tc.Failure = &junitFailure{Message: c.ID + ": " + figureText(c), Type: c.ID, Body: xmlSafe(body.String())}
		default:
			tc.SystemOut = figureText(c) + ": " + c.Reason
		}
		suite.Cases = append(suite.Cases, tc)
	}
	var out strings.Builder
	for _, wr := range v.Warnings {
		out.WriteString("warning: " + wr.Message + "\n")
		if wr.Remedy != "" {
			out.WriteString("  remedy: " + wr.Remedy + "\n")
		}
	}
	suite.SystemOut = out.String()
	if len(v.Inconclusive) > 0 {
		// One testcase the gate cannot miss: an error, not a failure of the
		// library, in every JUnit reader.
		tc := junitCase{Name: "run-fidelity", Classname: "retrylab." + scen, Time: "0"}
		tc.Error = &junitFailure{Message: "INCONCLUSIVE: " + xmlSafe(v.Inconclusive[0]), Type: "inconclusive", Body: xmlSafe(strings.Join(v.Inconclusive, "\n") + "\n")}
		suite.Cases = append([]junitCase{tc}, suite.Cases...)
		suite.Tests++
		suite.Errors++
	}
	return suite
}

// writeJUnit writes a JUnit document.
func writeJUnit(w io.Writer, doc junitSuites) error {
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("analyzer: encoding JUnit: %w", err)
	}
	if _, err := io.WriteString(w, xml.Header+string(b)+"\n"); err != nil {
		return fmt.Errorf("analyzer: writing JUnit: %w", err)
	}
	return nil
}

// xmlSafe replaces the characters XML cannot hold (control characters from
// client ids, say) with U+FFFD; the CDATA of a failure is not escaped.
func xmlSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r',
			r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
			return r
		}
		return '\uFFFD'
	}, s)
}

// mdEscape makes s safe inside a Markdown table cell.
func mdEscape(s string) string {
	r := strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;", "`", "'")
	return r.Replace(s)
}

// WriteMarkdown writes the verdict as GitHub-flavoured Markdown for a pull
// request comment or $GITHUB_STEP_SUMMARY: a heading with the verdict, a
// table of checks, the evidence of each failure in a details block, and the
// warnings as alerts.
func WriteMarkdown(w io.Writer, v *Verdict) error {
	bw := bufio.NewWriter(w)
	icon := "✅"
	switch {
	case v.Status == VerdictInconclusive:
		icon = "⚠️"
	case !v.Pass:
		icon = "❌"
	}
	fmt.Fprintf(bw, "### %s retrylab verdict: %s\n\n%s\n\n", icon, passWord(v), mdEscape(title(v)))
	if len(v.Inconclusive) > 0 {
		bw.WriteString("> [!CAUTION]\n> The run behind this verdict was not carried out faithfully:\n")
		for _, why := range v.Inconclusive {
			fmt.Fprintf(bw, "> - %s\n", mdEscape(why))
		}
		bw.WriteString("\n")
	}
	bw.WriteString("| | check | figure | threshold | note |\n|---|---|---:|---:|---|\n")
	for i := range v.Checks {
		c := &v.Checks[i]
		mark, fig, thr := "✅", fmtFigure(c.Figure, c.Unit), "≤ "+fmtFigure(c.Threshold, c.Unit)
		if u := unitWord(c.Unit); u != "" {
			fig += " " + u
		}
		switch c.Status {
		case StatusSkip:
			mark, fig, thr = "⏭️", "—", "—"
		case StatusInconclusive:
			mark, fig = "❔", figureText(c)
		case StatusFail:
			mark = "❌"
		}
		fmt.Fprintf(bw, "| %s | `%s` | %s | %s | %s |\n", mark, c.ID, fig, thr, mdEscape(c.Reason))
	}
	for i := range v.Checks {
		c := &v.Checks[i]
		if c.Status != StatusFail || len(c.Examples) == 0 {
			continue
		}
		fmt.Fprintf(bw, "\n<details><summary><code>%s</code>: evidence</summary>\n\n", c.ID)
		for j := range c.Examples {
			fmt.Fprintf(bw, "- %s\n", mdEscape(exampleText(&c.Examples[j])))
		}
		bw.WriteString("\n</details>\n")
	}
	for _, wr := range v.Warnings {
		fmt.Fprintf(bw, "\n> [!WARNING]\n> %s\n", mdEscape(wr.Message))
		if wr.Remedy != "" {
			fmt.Fprintf(bw, "> Remedy: %s\n", mdEscape(wr.Remedy))
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("analyzer: writing Markdown: %w", err)
	}
	return nil
}
