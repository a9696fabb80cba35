package reports

import (
	"bytes"
	"html"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/retrylab/retrylab/timeline"
)

// layeredSynth is a synthetic run against a provider's layered quota: a
// per-second token bucket (10/s, burst 20, 429), a per-minute fixed window
// (300/1m, 403 with Retry-After, GitHub's secondary limit) and a daily one
// (10,000/1d). Ten clients share the quota; their traffic runs at 8/s for a
// minute (over the minute's 5/s, under the second's 10/s), at 4/s, then
// bursts to 16/s for ten seconds (over the second's) and settles at 4/s.
// A rejected request is retried once when Retry-After allows. A warm-up
// phase answers every request before the quota begins.
type layeredSynth struct{ seed uint64 }

var layeredLimits = []timeline.Quota{
	{Name: "second", Algorithm: "token-bucket", Rate: 10, Burst: 20, Limit: 10, Window: int64(time.Second), Key: "global"},
	{Name: "minute", Algorithm: "fixed-window", Rate: 5, Burst: 300, Limit: 300, Window: int64(time.Minute), Key: "global"},
	{Name: "day", Algorithm: "fixed-window", Rate: 10000.0 / 86400, Burst: 10000, Limit: 10000, Window: int64(24 * time.Hour), Key: "global"},
}

const layeredWarm = 5 * time.Second

func (s layeredSynth) meta() *timeline.Meta {
	return &timeline.Meta{
		Format: timeline.Format, Recorder: "run", Scenario: "layered-quota", Subject: "synthetic", Seed: int64(s.seed),
		Start:    time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Duration: int64(160 * time.Second),
		Phases: []timeline.Phase{
			{Name: "warm", Start: 0, End: int64(layeredWarm), Respond: "ok"},
			{Name: "quota", Start: int64(layeredWarm), Respond: "quota", RetryAfter: "delta limiter"},
		},
		Fleet:  &timeline.Fleet{Clients: 10, Requests: 100, Method: "GET"},
		Quota:  &layeredLimits[2],
		Limits: slices.Clone(layeredLimits),
	}
}

// rate is the fleet's request rate at t.
func (layeredSynth) rate(t time.Duration) float64 {
	switch {
	case t < 65*time.Second:
		return 8
	case t < 100*time.Second:
		return 4
	case t < 110*time.Second:
		return 16
	}
	return 4
}

// records generates the run, in write order.
func (s layeredSynth) records() []timeline.Record {
	rng := rand.New(rand.NewPCG(s.seed, 13))
	var tokens, last float64 = 20, 0
	var window int64 = -1
	used, day := 0, 0
	// take decides a request at t as the layered quota does.
	take := func(t time.Duration) (status int, limit string, retryIn time.Duration) {
		if t < layeredWarm {
			return 200, "", 0
		}
		sec := t.Seconds()
		tokens = min(20, tokens+10*(sec-last))
		last = sec
		if w := int64((t - layeredWarm) / time.Minute); w != window {
			window, used = w, 0
		}
		switch {
		case tokens < 1:
			return 429, "second", time.Duration((1 - tokens) / 10 * float64(time.Second))
		case used >= 300:
			end := layeredWarm + time.Duration(window+1)*time.Minute
			return 403, "minute", end - t
		case day >= 10000:
			return 429, "day", time.Hour
		}
		tokens--
		used++
		day++
		return 200, "", 0
	}
	type ev struct {
		at  int64
		rec timeline.Record
	}
	var evs []ev
	// Attempts are decided in arrival order: first attempts as a Poisson
	// process, retries queued at the instant Retry-After allows plus up to
	// a second.
	type pending struct {
		at       time.Duration
		n        int
		client   string
		key      string
		start    time.Duration
		attempts int
	}
	var queue []pending
	n := 0
	for t := time.Duration(0); t < 150*time.Second; t += time.Duration(rng.ExpFloat64() / s.rate(t) * float64(time.Second)) {
		client := strconv.Itoa(n % 10)
		queue = append(queue, pending{at: t, n: n, client: client, key: client + "/" + strconv.Itoa(n/10), start: t})
		n++
	}
	less := func(a, b pending) int {
		if a.at != b.at {
			return int(min(max(a.at-b.at, -1), 1))
		}
		return a.n - b.n
	}
	slices.SortFunc(queue, less)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		p.attempts++
		st, lim, wait := take(p.at)
		a := timeline.Attempt{Client: p.client, Key: p.key, Attempt: p.attempts, Method: "GET", Path: "/c/" + p.client + "/r/" + p.key,
			At: int64(p.at), Done: int64(p.at + 2*time.Millisecond), Status: st, Limit: lim, Phase: "quota"}
		if p.at < layeredWarm {
			a.Phase = "warm"
		}
		if st != 200 {
			secs := int64(wait/time.Second) + 1
			a.RetryAfter, a.NotBefore, a.HasNotBefore = strconv.FormatInt(secs, 10), a.Done+secs*int64(time.Second), true
			if st == 403 {
				a.RateLimit = `RateLimit-Policy: "second";q=10;w=1, "minute";q=300;w=60, "day";q=10000;w=86400; RateLimit: "minute";r=0;t=` + strconv.FormatInt(secs, 10)
			}
		}
		evs = append(evs, ev{a.Done, timeline.Record{Type: timeline.TypeAttempt, Attempt: a}})
		if st != 200 && p.attempts < 2 {
			p.at = time.Duration(a.NotBefore) + time.Duration(rng.Int64N(int64(time.Second)))
			i, _ := slices.BinarySearchFunc(queue, p, less)
			queue = slices.Insert(queue, i, p)
			continue
		}
		result := timeline.ResultOK
		if st != 200 {
			result = timeline.ResultGaveUp
		}
		o := timeline.Outcome{Client: p.client, Key: p.key, Scheduled: int64(p.start), Start: int64(p.start), End: a.Done + int64(time.Millisecond), Result: result, Status: st, Attempts: p.attempts}
		evs = append(evs, ev{o.End, timeline.Record{Type: timeline.TypeOutcome, Outcome: o}})
	}
	slices.SortStableFunc(evs, func(a, b ev) int { return int(min(max(a.at-b.at, -1), 1)) })
	recs := []timeline.Record{{Type: timeline.TypeMeta, Meta: s.meta()}}
	for _, e := range evs {
		recs = append(recs, e.rec)
	}
	return append(recs, timeline.Record{Type: timeline.TypeEnd, End: &timeline.End{At: evs[len(evs)-1].at, Reason: timeline.EndCompleted}})
}

// write encodes the run as a timeline.
func (s layeredSynth) write(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := timeline.NewEncoder(&buf)
	recs := s.records()
	for i := range recs {
		r := &recs[i]
		var err error
		switch r.Type {
		case timeline.TypeMeta:
			err = enc.EncodeMeta(r.Meta)
		case timeline.TypeAttempt:
			err = enc.EncodeAttempt(&r.Attempt)
		case timeline.TypeOutcome:
			err = enc.EncodeOutcome(&r.Outcome)
		case timeline.TypeEnd:
			err = enc.EncodeEnd(r.End)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestQuotaPlotGolden draws the layered run's quota plot against its
// golden image, and the report holds it after the attempts plot.
func TestQuotaPlotGolden(t *testing.T) {
	dir := t.TempDir()
	rep, err := WriteFrom(dir, bytes.NewReader(layeredSynth{seed: 1}.write(t)), nil, Options{DPI: goldenDPI})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range rep.Plots {
		names = append(names, p.Name)
	}
	if len(names) < 2 || names[1] != PlotQuota {
		t.Fatalf("plots %v; want the quota plot second", names)
	}
	p := rep.Plots[1]
	if p.PNG == "" {
		t.Fatalf("quota plot not drawn: %s", p.Note)
	}
	checkPlotFiles(t, dir, p)
	html, err := os.ReadFile(rep.HTML)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), `id="plot-quota"`) {
		t.Errorf("report.html has no quota figure")
	}
}

// TestQuotaPlotOnlyWithLimits: a report whose meta lists no limits has no
// quota plot at all.
func TestQuotaPlotOnlyWithLimits(t *testing.T) {
	var buf bytes.Buffer
	if _, err := goldenSynth.write(&buf); err != nil {
		t.Fatal(err)
	}
	c, err := Collect(&buf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range c.plots() {
		if d.Name == PlotQuota {
			t.Errorf("a quota plot for a meta without limits (quota %+v)", c.meta.Quota)
		}
	}
}

// TestQuotaSeries: what the quota plot counts. Accepted requests and
// rejections count only in quota phases; a rejection counts for the limit
// it names ("tier/name" under tiers), for "a limit the meta does not list"
// when the name is unknown, and for "no limit named" when the analyzer's
// rule makes it a rate limit without naming one; a plain 403 and a 503 are
// neither. Folding the time axis keeps every count.
func TestQuotaSeries(t *testing.T) {
	const s = int64(time.Second)
	meta := &timeline.Meta{Recorder: "run",
		Phases: []timeline.Phase{{Name: "down", Start: 0, End: int64(time.Second), Respond: "status 503"}, {Name: "q", Start: int64(time.Second), Respond: "quota"}},
		Limits: []timeline.Quota{{Name: "minute", Tier: "free", Rate: 1, Limit: 60, Window: int64(time.Minute), Key: "client"}, {Name: "minute", Tier: "paid", Rate: 10, Limit: 600, Window: int64(time.Minute), Key: "api-key"}},
		Fleet:  &timeline.Fleet{Clients: 4},
	}
	named := func(r timeline.Record, limit string) timeline.Record { r.Attempt.Limit = limit; return r }
	headers := att("1", "h", 1, 2*s, 2*s+ms, 403)
	headers.Attempt.RateLimit = `RateLimit: "minute";r=0;t=9`
	recs := []timeline.Record{
		att("1", "a", 1, 0, ms, 503),                             // not a quota phase
		att("1", "b", 1, 500*ms, 501*ms, 200),                    // not a quota phase
		att("1", "c", 1, 2*s, 2*s+ms, 200),                       // accepted
		named(att("1", "d", 1, 3*s, 3*s+ms, 429), "free/minute"), // free's minute
		named(att("1", "e", 1, 4*s, 4*s+ms, 403), "paid/minute"), // paid's minute
		named(att("1", "f", 1, 5*s, 5*s+ms, 429), "gold/minute"), // not in the meta
		headers,                                  // a rate limit naming none
		att("1", "g", 1, 6*s, 6*s+ms, 403),       // a refusal
		att("1", "i", 1, 7*s, 7*s+ms, 503),       // unavailable
		att("1", "j", 1, 3000*s, 3000*s+ms, 200), // far out: the axis folds
	}
	c := collect(meta, Options{}, recs...)
	q := c.quota
	if q == nil {
		t.Fatal("no quota series for a meta with limits")
	}
	want := []int64{1, 1, 1, 1} // free/minute, paid/minute, unnamed, other
	if !slices.Equal(q.totals, want) || q.accTotal != 2 {
		t.Errorf("totals %v, accepted %d; want %v, 2", q.totals, q.accTotal, want)
	}
	for i, series := range q.rejected {
		var sum uint64
		for _, n := range series {
			sum += n
		}
		if int64(sum) != q.totals[i] {
			t.Errorf("series %d: bins hold %d after folding; want %d", i, sum, q.totals[i])
		}
	}
	d := c.plotQuota()
	if d.p == nil {
		t.Fatalf("not drawn: %s", d.Note)
	}
	if !strings.Contains(d.Note, "every tier's together") {
		t.Errorf("note %q; want it to say accepted requests are every tier's", d.Note)
	}
	got := drawnText(t, d)
	for _, w := range []string{
		"accepted (2)",
		"free/minute 60/1m (1/s) per client × 4 clients: 1 rejected",
		"paid/minute 600/1m (10/s) per api-key (no line: the keys are unknown): 1 rejected",
		"rejected by a rate limit naming no limit (1)",
		"rejected by limits the meta does not list (1)",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("legend\n%s\nlacks %q", got, w)
		}
	}
	if nc := collect(&timeline.Meta{Recorder: "run", Limits: meta.Limits}, Options{}); nc.plotQuota().Note == "" {
		t.Errorf("an empty run's quota plot has no note saying why it is missing")
	}
}

func TestLimitLabel(t *testing.T) {
	for _, tt := range []struct {
		q    timeline.Quota
		want string
	}{
		{layeredLimits[0], "second 10/s, burst 20"},
		{layeredLimits[1], "minute 300/1m (5/s)"},
		{layeredLimits[2], "day 10,000/1d (0.116/s)"},
		{timeline.Quota{Name: "hour", Rate: 1000.0 / 3600, Limit: 1000, Window: int64(time.Hour), Key: "client"}, "hour 1000/1h (0.278/s) per client"},
		{timeline.Quota{Name: "default", Rate: 2.5}, "default 2.5/s"},
	} {
		if got := limitLabel(&tt.q); got != tt.want {
			t.Errorf("limitLabel(%+v) = %q; want %q", tt.q, got, tt.want)
		}
	}
}

// drawnText is the text a drawn plot writes, from its SVG.
func drawnText(t *testing.T, d drawn) string {
	t.Helper()
	svg := vgsvg.New(d.w, d.h)
	d.p.Draw(draw.New(svg))
	var buf bytes.Buffer
	if _, err := svg.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return html.UnescapeString(buf.String())
}

// TestQuotaPlotAgreesWithPacing: the quota plot's rejections are the
// requests the pacing check counts as rate-limited (with no warm-up, over
// every quota phase): one rule decides both. The retry counts agree too.
func TestQuotaPlotAgreesWithPacing(t *testing.T) {
	data := layeredSynth{seed: 2}.write(t)
	opts := judgedChecks(t, "pacing:warmup=0")
	assertAgree(t, "layered quota", data, opts)
	c, err := Collect(bytes.NewReader(data), Options{Analyzer: opts})
	if err != nil {
		t.Fatal(err)
	}
	var rejected int64
	for _, n := range c.quota.totals {
		rejected += n
	}
	p := c.Verdict().Check("pacing")
	bad := int64(p.Figure*float64(p.Samples)/100 + 0.5)
	if p.Status == "skip" || rejected == 0 || bad != rejected || p.Samples != rejected+c.quota.accTotal {
		t.Errorf("quota plot: %d rejected of %d; pacing: %s, %d of %d (%s)", rejected, rejected+c.quota.accTotal, p.Status, bad, p.Samples, p.Reason)
	}
}

// TestQuotaPlotScale: the y axis fits the traffic and the lowest limit's
// line; a limit far above both is said to be above the plot rather than
// flattening it.
func TestQuotaPlotScale(t *testing.T) {
	meta := &timeline.Meta{Recorder: "run", Limits: []timeline.Quota{
		{Name: "low", Rate: 1, Limit: 1, Window: int64(time.Second)},
		{Name: "high", Rate: 1000, Limit: 1000, Window: int64(time.Second)},
	}}
	var recs []timeline.Record
	for i := range 40 {
		at := int64(i) * 500 * ms // 2/s for 20 s
		recs = append(recs, att("1", strconv.Itoa(i), 1, at, at+ms, 200))
	}
	d := collect(meta, Options{}, recs...).plotQuota()
	p := plotOf(t, d)
	if p.Y.Max < 2 || p.Y.Max > 10 {
		t.Errorf("y axis ends at %v; want it to fit 2/s of traffic and the 1/s line", p.Y.Max)
	}
	text := drawnText(t, d)
	if !strings.Contains(text, "high 1000/s: none rejected (line above the plot)") || strings.Contains(text, "low 1/s: none rejected (line above") {
		t.Errorf("legend %q; want only the 1000/s line above the plot", text)
	}
}
