package validation_test

import (
	"bytes"
	"flag"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/retrylabtest"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

var pacingTable = flag.Bool("pacing-table", false, "print the pacing warm-up measurements of docs/design/pacing.md (every row)")

// layeredLimits is a provider's layered quota as the issue has it: 10/s
// burst 20, 300 a minute, 10,000 a day, one global key, rejections 429.
var layeredLimits = []stubserver.Limit{
	{Name: "second", Algorithm: stubserver.AlgTokenBucket, Limit: 10, Per: time.Second, Burst: 20},
	{Name: "minute", Algorithm: stubserver.AlgFixedWindow, Limit: 300, Per: time.Minute},
	{Name: "day", Algorithm: stubserver.AlgFixedWindow, Limit: 10000, Per: 24 * time.Hour},
}

// layeredMeta is what the timeline's meta says of layeredLimits: every
// limit, and as the quota pacing is judged against the one with the
// lowest sustained rate (the day's).
func layeredMeta() (quota *timeline.Quota, limits []timeline.Quota) {
	for _, l := range layeredLimits {
		q := timeline.Quota{Name: l.Name, Algorithm: l.Algorithm, Rate: l.Limit / l.Per.Seconds(), Burst: l.Burst, Key: "global",
			Limit: int(l.Limit), Window: int64(l.Per)}
		limits = append(limits, q)
	}
	quota = &limits[0]
	for i := range limits {
		if limits[i].Rate < quota.Rate {
			quota = &limits[i]
		}
	}
	return quota, limits
}

const (
	pass = analyzer.StatusPass
	fail = analyzer.StatusFail
)

var (
	passes = [3]string{pass, pass, pass}
	fails  = [3]string{fail, fail, fail}
)

// pacingRow is one measured fleet: a subject whose clients together send
// fleetRate requests a second (burst each) for about phase.
type pacingRow struct {
	subject   string
	fleetRate float64 // requests per second, the whole fleet (0: the subject does not pace)
	burst     int     // per client
	phase     time.Duration
	// want is the verdict pacing must give with each warm-up (2s, 10s, 1m),
	// as docs/design/pacing.md has it.
	want [3]string
}

// TestPacingWarmup measures the pacing check against a layered quota whose
// binding limits are a per-second token bucket and a per-minute fixed
// window, for fleets sized under, at and over the minute's rate and for
// one that does not pace at all, with warm-ups of 2 s (the default), 10 s
// and one minute (the minute's window). docs/design/pacing.md (pacing) has the
// table and the decision it supports; -pacing-table prints every row.
func TestPacingWarmup(t *testing.T) {
	if testing.Short() {
		t.Skip("nine fleets of 90-300 virtual seconds, a validation table: make check")
	}
	rows := []pacingRow{
		{"retrylab", 4.5, 1, 150 * time.Second, passes}, // 90% of the minute's 5/s
		{"retrylab", 4.5, 1, 300 * time.Second, passes},
		// At the minute's rate: the reference client reads RateLimit and
		// spreads what is left, unless its fleet's burst of 30 comes on top
		// (rejected in the second window too: no warm-up excuses it).
		{"retrylab", 5, 1, 150 * time.Second, passes},
		{"retrylab", 5, 1, 300 * time.Second, passes},
		{"retrylab", 5, 3, 150 * time.Second, fails},
		// Under the second's 10/s, over the minute's 5/s: a warm-up of the
		// minute's window passes it on a 90 s run.
		{"retrylab", 8, 1, 90 * time.Second, [3]string{fail, fail, pass}},
		{"retrylab", 8, 1, 150 * time.Second, fails},
		{"retrylab", 8, 1, 300 * time.Second, fails},
		{"no-pacing", 0, 0, 90 * time.Second, fails},
	}
	warmups := []time.Duration{2 * time.Second, 10 * time.Second, time.Minute}
	var table []string
	for _, row := range rows {
		const clients = 10
		base, err := scenarios.Resolve("quota-steady")
		if err != nil {
			t.Fatal(err)
		}
		sc := *base
		sc.Name = "layered"
		sc.Server.Quota = &stubserver.Quota{Limits: layeredLimits}
		sc.Duration = row.phase
		sc.Fleet.Clients, sc.Fleet.Timeout = clients, 2*time.Minute
		perClient := row.fleetRate / clients
		sc.Fleet.Requests = max(1, int(perClient*row.phase.Seconds()*1.2)) // the duration cap ends the run
		if row.fleetRate == 0 {
			sc.Fleet.Requests, sc.Fleet.Think = int(5*row.phase.Seconds()), 200*time.Millisecond
		}
		pol := subjects.Policy{Base: 100 * time.Millisecond, Cap: 2 * time.Second, Budget: 10 * time.Second, Jitter: "full", Rate: perClient, Burst: row.burst}
		res := retrylabtest.Run(t, retrylabtest.Custom(&sc), retrylabtest.Registered(row.subject), retrylabtest.WithPolicy(pol))

		// When the limits rejected, from the timeline itself.
		byLimit := map[string][]int64{}
		dec := timeline.NewDecoder(bytes.NewReader(res.Timeline))
		var rec timeline.Record
		for dec.Decode(&rec) == nil {
			if rec.Type == timeline.TypeAttempt && rec.Attempt.Limit != "" {
				byLimit[rec.Attempt.Limit] = append(byLimit[rec.Attempt.Limit], rec.Attempt.At)
			}
		}
		var rejections []string
		var names []string
		for n := range byLimit {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			ts := byLimit[n]
			rejections = append(rejections, fmt.Sprintf("%s %d (%.0f–%.0f s)", n, len(ts), float64(ts[0])/1e9, float64(ts[len(ts)-1])/1e9))
		}
		if len(rejections) == 0 {
			rejections = []string{"none"}
		}
		var cells []string
		for i, w := range warmups {
			c := pacingVerdict(t, res.Timeline, w)
			cell := fmt.Sprintf("%.2f%% %s", c.Figure, c.Status)
			if c.Status == analyzer.StatusSkip {
				cell = "skip"
			}
			cells = append(cells, cell)
			if c.Status != row.want[i] {
				t.Errorf("%s at %.1f/s (burst %d) for %v, warm-up %v: pacing = %s (%.2f%%: %s); docs/design/pacing.md says %s",
					row.subject, row.fleetRate, row.burst, row.phase, w, c.Status, c.Figure, c.Reason, row.want[i])
			}
		}
		rate := "no pacing"
		if row.fleetRate > 0 {
			rate = fmt.Sprintf("%.1f/s (%.0f%% of the minute's), burst %d × %d clients", row.fleetRate, 100*row.fleetRate/5, row.burst, clients)
		}
		table = append(table, fmt.Sprintf("| `%s` | %s | %v | %s | %s |", row.subject, rate, row.phase, strings.Join(rejections, ", "), strings.Join(cells, " | ")))
	}
	if *pacingTable {
		t.Logf("\n| subject | fleet | run | rejections by limit (first–last) | warm-up 2s | 10s | 1m |\n|---|---|---|---|---:|---:|---:|\n%s", strings.Join(table, "\n"))
	}
}

// pacingVerdict judges a layered run's timeline with pacing expected and
// the given warm-up, the meta stating the layered limits.
func pacingVerdict(t *testing.T, data []byte, warmup time.Duration) *analyzer.CheckResult {
	t.Helper()
	spec, err := analyzer.ParseCheckSpec("pacing:warmup=" + warmup.String())
	if err != nil {
		t.Fatal(err)
	}
	var an *analyzer.Analyzer
	err = analyzer.ReadTimeline(bytes.NewReader(data), true, func(meta *timeline.Meta) func(*timeline.Record) {
		meta.Quota, meta.Limits = layeredMeta()
		an = analyzer.New(meta, analyzer.Options{Checks: []analyzer.CheckSpec{spec}})
		return an.Add
	})
	if err != nil {
		t.Fatal(err)
	}
	return an.Result().Check(analyzer.CheckPacing)
}
