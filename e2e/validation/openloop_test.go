package validation_test

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/timeline"
)

// The open-loop rows of docs/retry-budgets.md: the built-in
// metastable-open (a server of finite capacity, a trigger that drops it
// to 30 % of its workers, one-request clients arriving at a Poisson rate,
// dealt to processes that each share one client and so one retry budget)
// at several offered loads, for the same three subjects as the
// sustained-failure table.

// openLoads are the offered loads, in % of the server's capacity.
var openLoads = []int{60, 80, 95}

// openScenario is the built-in whose load is varied.
const openScenario = "metastable-open"

// openCell is what one open-loop run shows.
type openCell struct {
	load            int
	subject         string
	first, attempts int64   // the whole run's
	during, after   float64 // attempts per first attempt in the trigger, and after it until the recovery (or the offered load's end)
	overall         float64 // the load-amplification check's figure
	recovered       bool
	recovery        float64 // s after the trigger's end; the time observed when not recovered
	status          string  // the verdict
}

// openLoopScenario is metastable-open at load % of its capacity: the same
// server, trigger, processes and arrival span, the arrival rate (and so
// the clients) scaled.
func openLoopScenario(t testing.TB, load int) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Builtin(openScenario)
	if err != nil {
		t.Fatal(err)
	}
	capRate := float64(sc.Server.Capacity.Concurrency) / sc.Server.Capacity.Service.Seconds()
	span := float64(sc.Fleet.Clients) / sc.Fleet.Start.Rate // s of arrivals
	sc.Fleet.Start.Rate = capRate * float64(load) / 100
	// At a lower rate the recovery check's window (200 first attempts)
	// and hold (5 windows) are longer: the arrivals last until the
	// trigger's end + the threshold + the hold, and 1.5 s more.
	triggerEnd := (sc.Server.Phases[0].For + sc.Server.Phases[1].For).Seconds()
	span = max(span, triggerEnd+openRecoveryBound+5*200/sc.Fleet.Start.Rate+1.5)
	sc.Fleet.Clients = int(math.Round(sc.Fleet.Start.Rate * span))
	sc.Duration = time.Duration((math.Ceil(span) + sc.Fleet.Timeout.Seconds() + 1) * float64(time.Second))
	sc.Name = fmt.Sprintf("%s-%d", openScenario, load)
	return sc
}

// runOpenCell plays subject at load and reads its amplification in and
// after the trigger from the analyzer's capacity series.
func runOpenCell(t *testing.T, load int, subject string) openCell {
	t.Helper()
	sc := openLoopScenario(t, load)
	res := retrylabtest.Run(t, retrylabtest.Custom(sc), retrylabtest.Registered(subject), retrylabtest.WithSeed(*budgetSeed))
	v := res.Verdict
	if v.Status == analyzer.VerdictInconclusive {
		t.Fatalf("verdict INCONCLUSIVE (%s); want a run the analyzer vouches for", strings.Join(v.Inconclusive, "; "))
	}
	c := openCell{load: load, subject: subject, first: v.Figures.Requests, attempts: v.Figures.Attempts, status: v.Status}
	if r := v.Check(analyzer.CheckLoadAmplification); r != nil {
		c.overall = r.Figure
	}
	rec := v.Check(analyzer.CheckRecovery)
	if rec == nil || rec.Status == analyzer.StatusSkip {
		t.Fatalf("recovery not judged (%v)", rec)
	}
	c.recovery = rec.Figure
	c.recovered = !(rec.Status == analyzer.StatusFail && strings.HasPrefix(rec.Reason, "metastable"))

	var a *analyzer.Analyzer
	err := analyzer.ReadTimeline(bytes.NewReader(res.Timeline), true, func(m *timeline.Meta) func(*timeline.Record) {
		a = analyzer.New(m, analyzer.Options{})
		return a.Add
	})
	if err != nil {
		t.Fatal(err)
	}
	l := a.Load()
	if l == nil || len(l.Triggers) != 1 {
		t.Fatalf("capacity series %v; want one trigger", l)
	}
	bin := func(ns int64) int { return int(ns / l.Width) }
	ratio := func(from, to int) float64 {
		var at, f int64
		for i := max(from, 0); i < min(to, len(l.First)); i++ {
			at += l.Attempts[i]
			f += l.First[i]
		}
		if f == 0 {
			return math.NaN()
		}
		return float64(at) / float64(f)
	}
	tr := l.Triggers[0]
	c.during = ratio(bin(tr.Start), bin(tr.End))
	end := len(l.First)
	for end > 0 && l.First[end-1] == 0 {
		end--
	}
	if l.Recovery.Recovered {
		end = bin(l.Recovery.At)
	}
	c.after = ratio(bin(tr.End), end)
	return c
}

// checkOpenCells asserts what the open-loop rows must show: no-retry
// sends one attempt per request and recovers; retrylab's shared budgets
// keep the load within the default load-amplification threshold and it
// recovers, at most openRecoverySlack after no-retry; no-retry-budget's
// storm outlives the trigger at every load.
func checkOpenCells(t *testing.T, cells map[string]openCell) {
	t.Helper()
	for _, load := range openLoads {
		for _, subj := range budgetSubjects {
			c, ok := cells[openKey(load, subj)]
			if !ok {
				continue
			}
			t.Logf("open loop %3d%% %-16s during %.3f after %.3f overall %.3f recovered %v %.2fs %s",
				load, subj, c.during, c.after, c.overall, c.recovered, c.recovery, c.status)
			switch subj {
			case "no-retry":
				if c.attempts != c.first || !c.recovered {
					t.Errorf("no-retry at %d %%: %d attempts for %d requests, recovered %v; want one each and a recovery",
						load, c.attempts, c.first, c.recovered)
				}
			case "retrylab":
				nr := cells[openKey(load, "no-retry")]
				if c.overall > openAmpBound || !c.recovered || c.recovery > nr.recovery+openRecoverySlack {
					t.Errorf("retrylab at %d %%: load amplification %.3f, recovered %v in %.2f s; want ≤ %.1f× and a recovery within %.1f s of no-retry's (%.2f s)",
						load, c.overall, c.recovered, c.recovery, openAmpBound, openRecoverySlack, nr.recovery)
				}
				if nb, ok := cells[openKey(load, "no-retry-budget")]; ok && c.overall >= nb.overall {
					t.Errorf("retrylab at %d %%: load amplification %.3f, not below no-retry-budget's %.3f", load, c.overall, nb.overall)
				}
			case "no-retry-budget":
				if c.recovered || c.overall <= openAmpBound {
					t.Errorf("no-retry-budget at %d %%: recovered %v, load amplification %.3f; want a storm that outlives the trigger, above %.1f×",
						load, c.recovered, c.overall, openAmpBound)
				}
			}
		}
	}
}

// The bounds checkOpenCells holds the rows to: the analyzer's default
// load-amplification threshold; metastable-open's recovery threshold (the
// arrival span makes room for it); and how much later than no-retry
// retrylab may recover, about twice what seeds 1-3 showed at 95 %, where
// the backlog drains slowly whoever the client is
// (docs/benchmarks/tolerances.md).
const (
	openAmpBound      = 1.5
	openRecoveryBound = 5.0
	openRecoverySlack = 3.5
)

func openKey(load int, subj string) string { return fmt.Sprintf("open/%d/%s", load, subj) }

// openMarkdown renders the open-loop section of docs/retry-budgets.md.
func openMarkdown(b *bytes.Buffer, cells map[string]openCell) {
	sc, _ := scenarios.Builtin(openScenario)
	capRate := float64(sc.Server.Capacity.Concurrency) / sc.Server.Capacity.Service.Seconds()
	b.WriteString("\n## Open loop: a server of finite capacity\n\n")
	fmt.Fprintf(b, "The table above has a failure rate that does not depend on the load. Against\n"+
		"a server of finite capacity it does: retries queue behind first attempts,\n"+
		"time out, and are retried again. These rows run the built-in `%s`\n"+
		"(%d workers × %v, %.0f requests/s, a FIFO queue of %d; a trigger from %v to %v\n"+
		"leaves %.0f %% of the workers; per-attempt timeout %v) at offered loads of %s %%\n"+
		"of its capacity: one-request clients arriving at that Poisson rate for %.0f s\n"+
		"(longer at 60 %%, so that the recovery check's longer windows fit),\n"+
		"dealt to %d processes that each share one client, and so one retry budget\n"+
		"(%d tokens a process). Seed %d, virtual time, the same `TestRetryBudgetLiterature`.\n\n",
		openScenario, sc.Server.Capacity.Concurrency, sc.Server.Capacity.Service, capRate, sc.Server.Capacity.Queue,
		sc.Server.Phases[0].For, sc.Server.Phases[0].For+sc.Server.Phases[1].For, 100*sc.Server.Phases[1].Capacity,
		sc.Fleet.AttemptTimeout, joinInts(openLoads), float64(sc.Fleet.Clients)/sc.Fleet.Start.Rate,
		sc.Fleet.ProcessCount(), client.DefaultRetryBudgetCapacity, budgetDocSeed)
	b.WriteString("Amplification is attempts per first attempt the server saw: during the\n" +
		"trigger, after it until the recovery (or until the arrivals end, when there is\n" +
		"none), and over both (the `load-amplification` check's figure, threshold\n" +
		"1.5×). Recovery is the time from the trigger's end until goodput is back at\n" +
		"90 % of the offered load for 5 windows (the `recovery` check; threshold\n" +
		"5 s here); \"never\" when it did not come back while requests arrived.\n\n")
	fmt.Fprintf(b, "The test asserts, at every load: `no-retry` makes one attempt a request and\n"+
		"recovers; `retrylab` stays within %.1f× overall, below `no-retry-budget`,\n"+
		"and recovers at most %.1f s after `no-retry` (twice the largest gap seen\n"+
		"on seeds 1-3, at 95 %%); `no-retry-budget` exceeds %.1f× and never recovers.\n"+
		"Under -race these runs are skipped (too costly there) and the file is\n"+
		"not compared; `make matrix` runs it without -race and compares it.\n\n", openAmpBound, openRecoverySlack, openAmpBound)
	b.WriteString("| offered load | subject | first attempts | attempts | during the trigger | after it | overall | recovery |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, load := range openLoads {
		for _, subj := range budgetSubjects {
			c := cells[openKey(load, subj)]
			rec := fmt.Sprintf("%.2f s", c.recovery)
			if !c.recovered {
				rec = fmt.Sprintf("never (%.1f s seen)", c.recovery)
			}
			fmt.Fprintf(b, "| %d %% | `%s` | %d | %d | %s | %s | %.3f× | %s |\n",
				load, subj, c.first, c.attempts, fmtRatio(c.during), fmtRatio(c.after), c.overall, rec)
		}
	}
	r80, n80 := cells[openKey(80, "retrylab")], cells[openKey(80, "no-retry-budget")]
	fmt.Fprintf(b, "\nAgainst Brooker's figures: his simulations show, qualitatively, that retries\n"+
		"without a bound multiply the work of a system that is already failing, and a\n"+
		"token bucket keeps it near the offered load plus the bucket's deposit rate.\n"+
		"Here the failure is the overload itself, and the multiplication feeds it:\n"+
		"at 80 %% `no-retry-budget` sends %.3f× during the trigger and %s after it,\n"+
		"and the server does not come back although the trigger is over (a\n"+
		"metastable failure); `retrylab` sends %.3f×\n"+
		"during the trigger and %s after it, and recovers in %.2f s, as `no-retry`\n"+
		"does. Its retries during the trigger are paid for mostly by the %d tokens each\n"+
		"of the %d budgets starts with; once they are spent, a failing retry needs 5\n"+
		"or 10 tokens that only first-attempt successes give back, one each, so\n"+
		"once the workers are back the retries add next to nothing, well inside the\n"+
		"server's headroom (1/0.8 = 1.25× at 80 %%).\n"+
		"One budget per simulated client (each process one client) would start each\n"+
		"of the one-request clients with a full budget, and it would bound nothing:\n"+
		"the scope of a budget matters as much as its rule (client/README.md).\n\n"+
		"Against the offered load: the fewer first attempts, the more the budgets'\n"+
		"initial tokens weigh (`retrylab` %.3f× at 60 %%, %.3f× at 95 %%), while\n"+
		"`no-retry-budget` multiplies every load alike (%.3f× to %.3f×). How long\n"+
		"recovery takes is the server's headroom more than the client's: at 95 %%\n"+
		"even `no-retry` needs %.2f s to drain the trigger's backlog with 5 %% to\n"+
		"spare (`retrylab` %.2f s), against %.2f s at 80 %%.\n",
		n80.during, fmtRatio(n80.after), r80.during, fmtRatio(r80.after), r80.recovery, client.DefaultRetryBudgetCapacity, sc.Fleet.ProcessCount(),
		cells[openKey(60, "retrylab")].overall, cells[openKey(95, "retrylab")].overall,
		cells[openKey(60, "no-retry-budget")].overall, cells[openKey(95, "no-retry-budget")].overall,
		cells[openKey(95, "no-retry")].recovery, cells[openKey(95, "retrylab")].recovery, cells[openKey(80, "no-retry")].recovery)
}

func fmtRatio(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.3f×", x)
}
