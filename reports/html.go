package reports

import (
	"bytes"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/internal/atomicfile"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"inc": func(i int) int { return i + 1 },
}).ParseFS(templateFS, "templates/*.tmpl"))

// writeHTML executes the named template into path.
func writeHTML(path, name string, data any) error {
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, name, data); err != nil {
		return fmt.Errorf("reports: rendering %s: %w", filepath.Base(path), err)
	}
	if err := atomicfile.WriteBytes(path, buf.Bytes()); err != nil {
		return fmt.Errorf("reports: %w", err)
	}
	return nil
}

// pageData is what the report template reads.
type pageData struct {
	Title       string
	Scenario    string
	Description string
	Recorder    string
	Subject     string
	Version     string
	Summary     string
	Facts       []fact // run facts: seed, start, tool...
	Phases      []phaseRow
	Fleet       []fact
	Policy      []fact
	Verdict     *verdictView
	Figures     []fact
	Plots       []plotView
	Notes       []string
}

type fact struct{ Name, Value string }

type phaseRow struct{ Name, From, To, Respond, RetryAfter string }

type plotView struct {
	Plot
	Src                 template.URL // data URI of the PNG
	PixWidth, PixHeight int
}

type verdictView struct {
	Pass         bool
	Inconclusive bool     // the verdict is INCONCLUSIVE
	Reasons      []string // why the run cannot be vouched for (also on a FAIL)
	Checks       []checkRow
	Warnings     []warningView
	Failed       int
	Passed       int
	Skipped      int
	Undecided    int // checks inconclusive under the host's noise
}

// warningView is a warning as the report shows it: Head in bold, then
// Rest. Head is the warning's id, unless its message already begins with
// the id's words ("server-induced synchronization: ..." for
// server-induced-synchronization): then those words are the head, so the
// id is not said twice.
type warningView struct {
	ID, Head, Rest, Remedy string
}

func newWarningView(w analyzer.Warning) warningView {
	wv := warningView{ID: w.ID, Head: w.ID, Rest: ": " + w.Message, Remedy: w.Remedy}
	words := strings.ReplaceAll(w.ID, "-", " ")
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", " ")) }
	if n := len(words); n > 0 && len(w.Message) >= n && norm(w.Message[:n]) == norm(words) {
		if rest := w.Message[n:]; rest == "" || !unicode.IsLetter([]rune(rest)[0]) {
			wv.Head, wv.Rest = w.Message[:n], rest
		}
	}
	return wv
}

type checkRow struct {
	ID, Status, Figure, Threshold, Reason string
	Samples                               int64
	Examples                              []exampleRow
}

type exampleRow struct{ Client, Key, Attempt, At, Prev, Detail string }

// page builds the report's template data.
func (c *Collector) page(rep *Report, v *analyzer.Verdict) (*pageData, error) {
	m := c.meta
	pd := &pageData{
		Title:       c.opts.Title,
		Scenario:    orDash(m.Scenario),
		Description: m.Description,
		Recorder:    m.Recorder,
		Subject:     m.Subject,
		Version:     m.SubjectVersion,
		Summary:     m.Summary,
		Notes:       m.Notes,
	}
	if pd.Title == "" {
		pd.Title = orDash(m.Scenario)
		if m.Subject != "" {
			pd.Title += " · " + m.Subject
		}
	}
	add := func(fs *[]fact, name, value string) {
		if value != "" {
			*fs = append(*fs, fact{name, value})
		}
	}
	switch m.Recorder {
	case "serve":
		add(&pd.Facts, "recorded by", "serve (server only: the clients ran outside the harness)")
	case "run":
		add(&pd.Facts, "recorded by", "run (the harness drove the fleet)")
	}
	add(&pd.Facts, "seed", strconv.FormatInt(m.Seed, 10))
	if !m.Start.IsZero() {
		add(&pd.Facts, "started", m.Start.UTC().Format(time.RFC3339))
	}
	if m.Duration > 0 {
		add(&pd.Facts, "duration cap", fmtDur(time.Duration(m.Duration)))
	}
	if m.Virtual {
		add(&pd.Facts, "time", "virtual (testing/synctest)")
	}
	add(&pd.Facts, "shard", m.Shard)
	add(&pd.Facts, "tool", strings.TrimSpace(m.Tool+" "+m.Go))

	for _, ph := range m.Phases {
		to := "end of run"
		if ph.End > 0 {
			to = fmtDur(time.Duration(ph.End))
		}
		respond := ph.Respond
		if ph.Capacity > 0 && ph.Capacity < 1 && m.Capacity != nil {
			respond += fmt.Sprintf(", at %s%% of capacity", strconv.FormatFloat(100*ph.Capacity, 'f', -1, 64))
		}
		pd.Phases = append(pd.Phases, phaseRow{ph.Name, fmtDur(time.Duration(ph.Start)), to, respond, orDash(ph.RetryAfter)})
	}
	if f := m.Fleet; f != nil {
		add(&pd.Fleet, "clients", strconv.Itoa(f.Clients))
		add(&pd.Fleet, "requests per client", strconv.Itoa(f.Requests))
		add(&pd.Fleet, "start", f.Start)
		if f.Think > 0 {
			add(&pd.Fleet, "think", fmtDur(time.Duration(f.Think)))
		}
		add(&pd.Fleet, "method", f.Method)
		if f.Timeout > 0 {
			add(&pd.Fleet, "watchdog", fmtDur(time.Duration(f.Timeout)))
		}
		if f.AttemptTimeout > 0 {
			add(&pd.Fleet, "attempt timeout", fmtDur(time.Duration(f.AttemptTimeout)))
		}
	}
	if len(m.Limits) > 0 {
		ls := make([]string, len(m.Limits))
		for i := range m.Limits {
			ls[i] = limitLabel(&m.Limits[i])
			if alg := m.Limits[i].Algorithm; alg != "" {
				ls[i] += ", " + alg
			}
		}
		add(&pd.Fleet, "server limits", strings.Join(ls, "; "))
		if q := m.Quota; q != nil {
			add(&pd.Fleet, "most restrictive (pacing)", limitLabel(q))
		}
	} else if q := m.Quota; q != nil {
		s := fmt.Sprintf("%s, %s/s", q.Algorithm, fmtNum(q.Rate))
		if q.Burst > 0 {
			s += ", burst " + fmtCount(q.Burst)
		}
		if q.Key != "" && q.Key != "global" {
			s += ", per " + q.Key
		}
		add(&pd.Fleet, "server quota", s)
	}
	if k := m.Capacity; k != nil {
		s := fmtCount(k.Concurrency) + " workers × " + fmtDur(time.Duration(k.Service))
		if k.Dist != "" {
			s += " (" + k.Dist + ")"
		}
		s += ", queue " + fmtCount(k.Queue)
		if k.Discipline != "" {
			s += " " + k.Discipline
		}
		if k.CancelOnDisconnect {
			s += ", cancel on disconnect"
		}
		add(&pd.Fleet, "server capacity", fmt.Sprintf("%s: %s/s", s, fmtNum(analyzer.CapacityRate(k, 1))))
	}
	if p := m.Policy; p != nil {
		if p.Base > 0 {
			add(&pd.Policy, "base", fmtDur(time.Duration(p.Base)))
		}
		if p.Cap > 0 {
			add(&pd.Policy, "cap", fmtDur(time.Duration(p.Cap)))
		}
		if p.MaxAttempts > 0 {
			add(&pd.Policy, "max attempts", strconv.Itoa(p.MaxAttempts))
		}
		if p.Budget > 0 {
			add(&pd.Policy, "budget", fmtDur(time.Duration(p.Budget)))
		}
		add(&pd.Policy, "jitter", p.Jitter)
		if len(p.Retryable) > 0 {
			ss := make([]string, len(p.Retryable))
			for i, s := range p.Retryable {
				ss[i] = strconv.Itoa(s)
			}
			add(&pd.Policy, "retries on", strings.Join(ss, ", "))
		}
	}
	if v != nil {
		pd.Verdict = newVerdictView(v)
		if len(v.Figures.Results) > 0 || v.Figures.ServerPaced > 0 || v.Figures.ClientPaced > 0 {
			add(&pd.Figures, "retries paced by Retry-After (analyzer)", fmtCount(v.Figures.ServerPaced))
			add(&pd.Figures, "retries paced by the client (analyzer)", fmtCount(v.Figures.ClientPaced))
		}
	}
	pd.Figures = append(statFacts(rep.Stats), pd.Figures...)
	for _, p := range rep.Plots {
		pv := plotView{Plot: p}
		if p.PNG != "" {
			var err error
			pv.Src, pv.PixWidth, pv.PixHeight, err = pngDataURI(filepath.Join(rep.Dir, p.PNG))
			if err != nil {
				return nil, err
			}
		}
		pd.Plots = append(pd.Plots, pv)
	}
	return pd, nil
}

// statFacts lists a report's own figures for the figures table.
func statFacts(s Stats) []fact {
	pct := fmtOf[int64]
	fs := []fact{
		{"attempts", fmtCount(s.Attempts)},
		{"logical requests", fmtCount(s.Requests)},
		{"retries", pct(s.Retries, s.Attempts)},
		{"2xx", pct(s.OK, s.Attempts)},
		{rateLimitName(s.RateLimitStatuses), pct(s.Throttled, s.Attempts)},
		{"503", pct(s.Unavailable, s.Attempts)},
		{"other 4xx/5xx", pct(s.OtherErrors, s.Attempts)},
		{"faults", pct(s.Faults, s.Attempts)},
	}
	if !math.IsNaN(s.Amplification) {
		fs = append(fs, fact{"amplification (attempts per logical request)", fmtNum(s.Amplification)})
	}
	if s.Outcomes > 0 {
		fs = append(fs, fact{"success rate", fmtShare(s.SuccessRate)})
		results := make([]string, 0, len(s.Results))
		for r := range s.Results {
			results = append(results, r)
		}
		slices.SortFunc(results, func(a, b string) int {
			return resultRank(a) - resultRank(b)
		})
		for _, r := range results {
			fs = append(fs, fact{"result " + r, pct(s.Results[r], s.Outcomes)})
		}
		fs = append(fs, fact{"completion p50", fmtDur(s.P50)}, fact{"completion p99", fmtDur(s.P99)})
	} else {
		fs = append(fs, fact{"outcomes", "none recorded"})
	}
	fs = append(fs,
		fact{"retries after a usable Retry-After", fmtCount(s.RetryAfterRetries)},
		fact{"of which early", pct(s.EarlyRetries, s.RetryAfterRetries)},
		fact{"retries paced by the client's backoff", fmtCount(s.OwnDelays)},
		fact{"timeline span", fmtDur(s.End)},
	)
	return fs
}

func resultRank(r string) int {
	if i := slices.Index(resultOrder, r); i >= 0 {
		return i
	}
	return len(resultOrder)
}

func newVerdictView(v *analyzer.Verdict) *verdictView {
	vv := &verdictView{Pass: v.Pass, Inconclusive: v.Status == analyzer.VerdictInconclusive, Reasons: v.Inconclusive}
	for _, w := range v.Warnings {
		vv.Warnings = append(vv.Warnings, newWarningView(w))
	}
	for _, ch := range v.Checks {
		row := checkRow{ID: ch.ID, Status: ch.Status, Reason: ch.Reason, Samples: ch.Samples}
		switch ch.Status {
		case analyzer.StatusFail:
			vv.Failed++
		case analyzer.StatusPass:
			vv.Passed++
		case analyzer.StatusInconclusive:
			vv.Undecided++
		default:
			vv.Skipped++
		}
		if ch.Status != analyzer.StatusSkip {
			row.Figure = fmtNum(ch.Figure) + unitSuffix(ch.Unit)
			if len(ch.Range) == 2 { // under the host's noise: the range
				row.Figure = fmtNum(ch.Range[0]) + "–" + fmtNum(ch.Range[1]) + unitSuffix(ch.Unit)
			}
			row.Threshold = fmtNum(ch.Threshold) + unitSuffix(ch.Unit)
		}
		for _, ex := range ch.Examples {
			er := exampleRow{Client: ex.Client, Key: ex.Key, Detail: ex.Detail, At: fmtSec(ex.At)}
			if ex.Attempt > 0 {
				er.Attempt = strconv.Itoa(ex.Attempt)
			}
			if ex.Prev != 0 {
				er.Prev = fmtSec(ex.Prev)
			}
			row.Examples = append(row.Examples, er)
		}
		vv.Checks = append(vv.Checks, row)
	}
	return vv
}

func unitSuffix(u string) string {
	if u == "" {
		return ""
	}
	if u == "%" {
		return u
	}
	return " " + u
}

// fmtSec prints an instant (ns since the run's start) in seconds.
func fmtSec(ns int64) string {
	return strconv.FormatFloat(float64(ns)/1e9, 'f', 3, 64) + " s"
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// pngDataURI reads a PNG file into a data URI and returns its pixel size.
func pngDataURI(path string) (uri template.URL, w, h int, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, 0, fmt.Errorf("reports: %w", err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return "", 0, 0, fmt.Errorf("reports: %s: %w", filepath.Base(path), err)
	}
	return template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(b)), cfg.Width, cfg.Height, nil
}
