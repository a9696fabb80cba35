package reports

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

const ms = int64(time.Millisecond)

// att is a compact attempt for hand-written timelines.
func att(client, key string, n int, at, done int64, status int) timeline.Record {
	return timeline.Record{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{
		Client: client, Key: key, Attempt: n, Method: "GET", Path: "/c/" + key, At: at, Done: done, Status: status,
	}}
}

func withNB(r timeline.Record, nb int64) timeline.Record {
	r.Attempt.NotBefore, r.Attempt.HasNotBefore = nb, true
	r.Attempt.RetryAfter = "x"
	return r
}

func withRA(r timeline.Record, ra string) timeline.Record {
	r.Attempt.RetryAfter = ra
	return r
}

func out(client, key string, start, end int64, result string) timeline.Record {
	return timeline.Record{Type: timeline.TypeOutcome, Outcome: timeline.Outcome{
		Client: client, Key: key, Start: start, End: end, Result: result,
	}}
}

func collect(meta *timeline.Meta, opts Options, recs ...timeline.Record) *Collector {
	c := NewCollector(meta, opts)
	for i := range recs {
		c.Add(&recs[i])
	}
	return c
}

func TestStats(t *testing.T) {
	meta := &timeline.Meta{Recorder: "run", Policy: &timeline.Policy{Base: 100 * ms, Cap: 400 * ms}}
	c := collect(meta, Options{},
		// k1: 503 with not_before 1s; retried on time (1s), then 200.
		withNB(att("1", "k1", 1, 0, 10*ms, 503), 1000*ms),
		att("1", "k1", 2, 1000*ms, 1010*ms, 200),
		out("1", "k1", 0, 1011*ms, "ok"),
		// k2: 429 with not_before 500ms after; retried 100ms later: early.
		withNB(att("2", "k2", 1, 0, 10*ms, 429), 510*ms),
		att("2", "k2", 2, 110*ms, 120*ms, 429),
		// then own backoff: retry 2 (bound 200ms) after 150ms: within.
		att("2", "k2", 3, 270*ms, 280*ms, 429),
		// retry 3 (bound 400ms) after 500ms: beyond.
		att("2", "k2", 4, 780*ms, 790*ms, 0),
		out("2", "k2", 0, 800*ms, "gave-up"),
		// k3: Retry-After 0 allows an immediate retry: it paces nothing,
		// so the retry's wait is the client's own delay, as the analyzer
		// has it.
		withNB(withRA(att("3", "k3", 1, 0, 5*ms, 503), "0"), 5*ms),
		att("3", "k3", 2, 5*ms, 6*ms, 404),
		out("3", "k3", 0, 7*ms, "non-retryable"),
	)
	s := c.Stats()
	want := Stats{
		Attempts: 8, OK: 1, Throttled: 3, Unavailable: 2, OtherErrors: 1, Faults: 1, Retries: 5,
		Requests: 3, Outcomes: 3, RetryAfterRetries: 2, EarlyRetries: 1, OwnDelays: 3, BeyondBound: 1,
		ServerPaced: 1, ClientPaced: 4, // k1's retry came as Retry-After said
		End: 1011 * time.Millisecond, RateLimitStatuses: []int{429},
	}
	got := s
	got.Results, got.SuccessRate, got.Amplification, got.P50, got.P99 = nil, 0, 0, 0, 0
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Stats() = %+v; want %+v", got, want)
	}
	if s.Results["ok"] != 1 || s.Results["gave-up"] != 1 || s.Results["non-retryable"] != 1 {
		t.Errorf("Stats().Results = %v; want one each of ok, gave-up, non-retryable", s.Results)
	}
	if math.Abs(s.SuccessRate-1.0/3) > 1e-9 {
		t.Errorf("Stats().SuccessRate = %v; want 1/3", s.SuccessRate)
	}
	if s.Amplification != 8.0/3 {
		t.Errorf("Stats().Amplification = %v; want 8/3", s.Amplification)
	}
	// p99 of {1011ms, 800ms, 7ms} is the largest, within 1%.
	if d := s.P99 - 1011*time.Millisecond; d > 11*time.Millisecond || d < -11*time.Millisecond {
		t.Errorf("Stats().P99 = %v; want ≈1.011s", s.P99)
	}
	if len(c.raEarly.items) != 1 || c.raEarly.items[0] != (raPoint{asked: 500 * ms, taken: 100 * ms}) {
		t.Errorf("early points = %v; want [{500ms 100ms}]", c.raEarly.items)
	}
	if got := c.delays[1].items; !slices.Equal(got, []int64{150 * ms}) {
		t.Errorf("delays of retry 2 = %v; want [150ms]", got)
	}
	if got := c.delays[2].items; !slices.Equal(got, []int64{500 * ms}) {
		t.Errorf("delays of retry 3 = %v; want [500ms]", got)
	}
}

func TestStatsServeRecording(t *testing.T) {
	// No outcomes: logical requests are counted by first attempts, the
	// success rate is unknown.
	// A key reused after a success is a new logical request.
	c := collect(&timeline.Meta{Recorder: "serve"}, Options{},
		att("a", "GET /x", 1, 0, ms, 503),
		att("a", "GET /x", 2, 5*ms, 6*ms, 200),
		att("b", "GET /y", 1, 0, ms, 200),
		att("a", "GET /x", 3, 100*ms, 101*ms, 429), // a new request
		att("a", "GET /x", 4, 130*ms, 131*ms, 200), // its first retry
	)
	s := c.Stats()
	if s.Requests != 3 || s.Retries != 2 || s.Outcomes != 0 {
		t.Errorf("Stats() = %d requests, %d retries, %d outcomes; want 3, 2, 0", s.Requests, s.Retries, s.Outcomes)
	}
	if !math.IsNaN(s.SuccessRate) || s.Amplification != 5.0/3 {
		t.Errorf("Stats() success %v, amplification %v; want NaN, 5/3", s.SuccessRate, s.Amplification)
	}
	if got := c.delays[0].items; !slices.Equal(got, []int64{4 * ms, 29 * ms}) {
		t.Errorf("first-retry delays = %v; want [4ms 29ms] (the reused key's retry is retry 1)", got)
	}
	var note string
	for _, d := range c.plots() {
		if d.Name == PlotCompletion {
			if d.p != nil {
				t.Errorf("completion plot drawn for a serve recording")
			}
			note = d.Note
		}
	}
	if !strings.Contains(note, "serve recording") {
		t.Errorf("completion note = %q; want it to explain the serve recording", note)
	}
}

func TestClassOf(t *testing.T) {
	tests := []struct {
		a    timeline.Attempt
		want int
	}{
		{timeline.Attempt{Status: 200}, class2xx},
		{timeline.Attempt{Status: 204}, class2xx},
		{timeline.Attempt{Status: 429}, class429},
		{timeline.Attempt{Status: 503}, class503},
		{timeline.Attempt{Status: 500}, classOther},
		{timeline.Attempt{Status: 404}, classOther},
		{timeline.Attempt{Status: 302}, classOther},
		{timeline.Attempt{Fault: "reset"}, classFault},
		{timeline.Attempt{Status: 200, Fault: "hang"}, classFault},
		{timeline.Attempt{}, classFault},
	}
	for _, tt := range tests {
		if got := classOf(&tt.a); got != tt.want {
			t.Errorf("classOf(status %d, fault %q) = %s; want %s", tt.a.Status, tt.a.Fault, classNames[got], classNames[tt.want])
		}
	}
}

func TestBound(t *testing.T) {
	tests := []struct {
		pol  *timeline.Policy
		n    int
		want float64
		ok   bool
	}{
		{nil, 1, 0, false},
		{&timeline.Policy{}, 1, 0, false},
		{&timeline.Policy{Base: 100 * ms}, 1, float64(100 * ms), true},
		{&timeline.Policy{Base: 100 * ms}, 4, float64(800 * ms), true},
		{&timeline.Policy{Base: 100 * ms, Cap: 300 * ms}, 3, float64(300 * ms), true},
		{&timeline.Policy{Base: 100 * ms, Cap: 300 * ms}, 2000, float64(300 * ms), true},
		{&timeline.Policy{Base: 100 * ms, Cap: 5000 * ms, Jitter: "decorrelated"}, 1, float64(5000 * ms), true},
		{&timeline.Policy{Base: 100 * ms, Jitter: "decorrelated"}, 1, 0, false},
	}
	for _, tt := range tests {
		c := NewCollector(&timeline.Meta{Policy: tt.pol}, Options{})
		got, ok := c.bound(tt.n)
		if got != tt.want || ok != tt.ok {
			t.Errorf("bound(%d) with %+v = %v, %v; want %v, %v", tt.n, tt.pol, got, ok, tt.want, tt.ok)
		}
	}
}

func TestTimeBinsFold(t *testing.T) {
	b := timeBins{width: 10, n: 4}
	counts := make([]uint64, 4)
	add := func(ts int64) {
		counts[b.index(ts, func() { foldSum(counts) })]++
	}
	for _, ts := range []int64{0, 5, 15, 39} {
		add(ts)
	}
	if !slices.Equal(counts, []uint64{2, 1, 0, 1}) || b.width != 10 || b.used != 4 {
		t.Fatalf("before growing: counts %v width %d used %d; want [2 1 0 1] 10 4", counts, b.width, b.used)
	}
	add(70) // beyond 40: the width doubles once, bins fold pairwise
	if !slices.Equal(counts, []uint64{3, 1, 0, 1}) || b.width != 20 || b.used != 4 {
		t.Errorf("after growing: counts %v width %d used %d; want [3 1 0 1] 20 4", counts, b.width, b.used)
	}
	add(-5) // negative times land in bin 0
	if counts[0] != 4 {
		t.Errorf("negative time: counts[0] = %d; want 4", counts[0])
	}
}

func TestNiceWidth(t *testing.T) {
	tests := []struct {
		span int64
		n    int
		want int64
	}{
		{0, 1024, ms},
		{int64(time.Second), 1024, ms},
		{int64(2 * time.Second), 1024, 2 * ms},
		{int64(30 * time.Second), 1024, 50 * ms},
		{int64(time.Hour), 1024, 5000 * ms},
	}
	for _, tt := range tests {
		if got := niceWidth(tt.span, tt.n); got != tt.want {
			t.Errorf("niceWidth(%d, %d) = %d; want %d", tt.span, tt.n, got, tt.want)
		}
	}
}

func TestLogHistQuantile(t *testing.T) {
	var h logHist
	for i := int64(1); i <= 1000; i++ {
		h.add(i * ms)
	}
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 1} {
		exact := float64(int64(math.Ceil(q*1000)) * ms)
		got := h.quantile(q)
		if got < exact || got > exact*1.0101 {
			t.Errorf("quantile(%v) = %v; want within 1%% above %v", q, got, exact)
		}
	}
	if got := (&logHist{}).quantile(0.5); got != 0 {
		t.Errorf("empty quantile = %v; want 0", got)
	}
	xs, ys := h.cdf()
	if len(xs) == 0 || ys[len(ys)-1] != 1 || xs[len(xs)-1] != float64(1000*ms) {
		t.Errorf("cdf ends at (%v, %v); want (1s, 1)", xs[len(xs)-1], ys[len(ys)-1])
	}
	if !slices.IsSorted(xs) || !slices.IsSorted(ys) {
		t.Errorf("cdf is not monotonic")
	}
}

func TestReservoir(t *testing.T) {
	fill := func() []int {
		r := newReservoir[int](100, 42)
		for i := range 10000 {
			r.add(i)
		}
		return r.items
	}
	a, b := fill(), fill()
	if len(a) != 100 {
		t.Fatalf("len(items) = %d; want 100", len(a))
	}
	if !slices.Equal(a, b) {
		t.Errorf("same stream, same seed gave different samples")
	}
	late := 0
	for _, v := range a {
		if v >= 5000 {
			late++
		}
	}
	if late < 30 || late > 70 {
		t.Errorf("%d of 100 samples from the second half; want a uniform sample (~50)", late)
	}
}

func TestRasterSampling(t *testing.T) {
	tests := []struct {
		name    string
		fleet   int // 0: unknown
		clients []string
		max     int
		want    []string // nil: only check the count
		count   int
	}{
		{"all", 5, []string{"4", "0", "2", "1", "3"}, 10, []string{"0", "1", "2", "3", "4"}, 5},
		{"every 3rd", 9, []string{"0", "1", "2", "3", "4", "5", "6", "7", "8"}, 3, []string{"0", "3", "6"}, 3},
		{"numbers before names", 2, []string{"b", "1", "a"}, 5, []string{"1", "a", "b"}, 3},
		{"hash sample", 0, numbered(1000), 50, nil, 50},
	}
	for _, tt := range tests {
		meta := &timeline.Meta{}
		if tt.fleet > 0 {
			meta.Fleet = &timeline.Fleet{Clients: tt.fleet}
		}
		c := NewCollector(meta, Options{MaxClients: tt.max})
		for i, cl := range tt.clients {
			r := att(cl, cl+"/0", 1, int64(i)*ms, int64(i)*ms+1, 200)
			c.Add(&r)
		}
		var got []string
		for _, r := range c.sortedRows() {
			got = append(got, r.client)
		}
		if len(got) != tt.count || (tt.want != nil && !slices.Equal(got, tt.want)) {
			t.Errorf("%s: rows = %v; want %v (%d rows)", tt.name, got, tt.want, tt.count)
		}
	}
	// The hash sample does not depend on arrival order.
	order := func(rev bool) []string {
		c := NewCollector(nil, Options{MaxClients: 20})
		ids := numbered(500)
		if rev {
			slices.Reverse(ids)
		}
		for _, cl := range ids {
			r := att(cl, cl+"/0", 1, 0, 1, 200)
			c.Add(&r)
		}
		var got []string
		for _, r := range c.sortedRows() {
			got = append(got, r.client)
		}
		return got
	}
	if a, b := order(false), order(true); !slices.Equal(a, b) {
		t.Errorf("hash sample depends on order: %v vs %v", a, b)
	}
}

func numbered(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}

func TestRasterRunsBounded(t *testing.T) {
	// 300 rows whose classes alternate every column defeat run merging:
	// the columns must fold until the marks fit.
	const rows, cols = 300, timeBinCount
	cells := make([][]uint8, rows)
	for i := range cells {
		cells[i] = make([]uint8, cols)
		for j := range cells[i] {
			cells[i][j] = 1 << ((i + j) % 2 * class429)
		}
	}
	runs, used, width := rasterRuns(cells, cols, 1)
	if len(runs) > rasterMarks {
		t.Errorf("rasterRuns gave %d marks; want at most %d", len(runs), rasterMarks)
	}
	if used > rasterCols || width < 2 {
		t.Errorf("rasterRuns used %d columns of width %d; want at most %d, folded", used, width, rasterCols)
	}
	// A dense row of one class is one mark.
	one := [][]uint8{slices.Repeat([]uint8{1 << class2xx}, 100)}
	runs, _, _ = rasterRuns(one, 100, 1)
	if len(runs) != 1 || runs[0].from != 0 || runs[0].to != 100 {
		t.Errorf("dense row: runs = %v; want one run [0, 100)", runs)
	}
	// The most alarming class of a cell wins.
	mixed := [][]uint8{{1<<class2xx | 1<<class503, 1<<class2xx | 1<<class429}}
	runs, _, _ = rasterRuns(mixed, 2, 1)
	if len(runs) != 2 || runs[0].class != class503 || runs[1].class != class429 {
		t.Errorf("mixed cells: runs = %v; want 503 then 429", runs)
	}
}

func TestCollectErrors(t *testing.T) {
	if _, err := Collect(strings.NewReader(""), Options{}); !errors.Is(err, ErrEmpty) {
		t.Errorf("Collect(empty) error = %v; want ErrEmpty", err)
	}
	_, err := Collect(strings.NewReader("{\"type\":\"meta\",\"format\":1,\"recorder\":\"run\",\"scenario\":\"x\",\"seed\":0,\"start\":\"0001-01-01T00:00:00Z\"}\n{\"type\":\"attempt\",\"at\":\n"), Options{})
	var se *timeline.SyntaxError
	if !errors.As(err, &se) || se.Line != 2 {
		t.Errorf("Collect(truncated) error = %v; want a *timeline.SyntaxError on line 2", err)
	}
	// A stream without meta still collects.
	var buf bytes.Buffer
	enc := timeline.NewEncoder(&buf)
	a := att("1", "1/0", 1, 0, ms, 200)
	enc.EncodeAttempt(&a.Attempt)
	enc.Flush()
	c, err := Collect(&buf, Options{})
	if err != nil || c.Stats().Attempts != 1 {
		t.Errorf("Collect(no meta) = %v attempts, %v; want 1, nil", c.Stats().Attempts, err)
	}
}

func TestFmt(t *testing.T) {
	durs := []struct {
		d    time.Duration
		want string
	}{
		{0, "0"}, {100 * time.Millisecond, "100ms"}, {2 * time.Second, "2s"}, {2500 * time.Millisecond, "2.5s"},
		{90 * time.Second, "1m30s"}, {1500 * time.Microsecond, "1.5ms"},
		{112411491, "112ms"}, {1234567891, "1.23s"}, {250 * time.Microsecond, "250µs"},
	}
	for _, tt := range durs {
		if got := fmtDur(tt.d); got != tt.want {
			t.Errorf("fmtDur(%v) = %q; want %q", tt.d, got, tt.want)
		}
	}
	nums := []struct {
		f    float64
		want string
	}{
		{3, "3"}, {0.5, "0.5"}, {2.34567, "2.35"}, {math.NaN(), "n/a"}, {math.Inf(1), "∞"}, {-2, "-2"},
		{762.4, "762"}, {1234, "1234"}, {1234.6, "1235"}, {12345, "12,345"}, {1.2e3, "1200"},
	}
	for _, tt := range nums {
		if got := fmtNum(tt.f); got != tt.want {
			t.Errorf("fmtNum(%v) = %q; want %q", tt.f, got, tt.want)
		}
	}
}

// TestRateLimitClass: the report draws what the analyzer's rule calls a
// rate limit with the 429s — a 403 with a usable Retry-After, with
// rate-limit headers at 0, or a limit's rejection — and a plain 403 with
// the other errors; the class's name then lists the statuses.
func TestRateLimitClass(t *testing.T) {
	limit := att("1", "a", 1, 0, ms, 403)
	limit.Attempt.Limit = "minute"
	headers := att("2", "b", 1, 0, ms, 403)
	headers.Attempt.RateLimit = "X-RateLimit-Remaining: 0"
	c := collect(&timeline.Meta{Recorder: "run"}, Options{},
		att("0", "z", 1, 0, ms, 429), limit, headers,
		withNB(att("3", "c", 1, 0, ms, 403), 2*ms), att("4", "d", 1, 0, ms, 403))
	s := c.Stats()
	if s.Throttled != 4 || s.OtherErrors != 1 {
		t.Errorf("throttled %d, other errors %d; want 4 (429 and three 403 rate limits), 1 (the plain 403)", s.Throttled, s.OtherErrors)
	}
	if !reflect.DeepEqual(s.RateLimitStatuses, []int{403, 429}) {
		t.Errorf("RateLimitStatuses = %v; want [403 429]", s.RateLimitStatuses)
	}
	if got, want := c.className(class429), "rate limit 403/429"; got != want {
		t.Errorf("className(429) = %q; want %q", got, want)
	}
	if got := collect(&timeline.Meta{Recorder: "run"}, Options{}, att("0", "z", 1, 0, ms, 429)).className(class429); got != "429" {
		t.Errorf("className(429) with only 429s = %q; want 429", got)
	}
}
