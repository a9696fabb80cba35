package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/retrylab/retrylab/internal/noise"
	"github.com/retrylab/retrylab/internal/redistest"
	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

// quotaFor is how long TestServeReplicasShareOneQuota loads the stubs.
// The figure is over 10 s (-quota-for 10s); the suite's default is
// shorter.
var quotaFor = flag.Duration("quota-for", 3*time.Second, "how long the shared-quota test loads the serve processes")

// serveChildEnv, when set in a process's environment, makes the test
// binary a `retrylab serve` process instead (TestMain): its flags are
// serve's, its scenario one of childScenarios, named by the variable's
// value. The scenario loader cannot yet express a layered quota or
// on_error, so the scenario is built here; the rest is serve's own code.
const serveChildEnv = "RETRYLAB_TEST_SERVE_CHILD"

func TestMain(m *testing.M) {
	if isProbe(os.Args) { // the probe of a run a test made (probeCommand)
		os.Exit(noise.ProbeMain(os.Args[2:], os.Stdin, os.Stdout))
	}
	if kind := os.Getenv(serveChildEnv); kind != "" {
		os.Exit(serveChild(kind, os.Args[1:]))
	}
	if n := os.Getenv(execClientEnv); n != "" {
		os.Exit(execClient(n))
	}
	os.Exit(m.Run())
}

// serveChild is main for a serve process of the tests.
func serveChild(kind string, args []string) int {
	ctx, stop := notifySignals(context.Background())
	defer stop()
	e := &env{stdout: os.Stdout, stderr: os.Stderr}
	sc, ok := childScenarios[kind]
	if !ok {
		fmt.Fprintf(os.Stderr, "no test scenario %q\n", kind)
		return exitUsage
	}
	if len(args) == 0 || args[0] != "serve" {
		fmt.Fprintf(os.Stderr, "a test serve process takes serve's command line, got %q\n", args)
		return exitUsage
	}
	o, err := parseServe(e, args[1:])
	if err == nil {
		err = serve(ctx, e, o, sc())
	}
	return exitCode(err, os.Stderr)
}

// quotaPhase answers by the quota, Retry-After from the limiter.
var quotaPhase = []stubserver.Phase{{Name: "q", Respond: stubserver.Respond{Kind: stubserver.RespondQuota},
	RetryAfter: stubserver.RetryAfter{Form: stubserver.FormDelta, Value: stubserver.ValueLimiter}}}

// sharedRate and sharedBurst are the binding layer of the "shared"
// scenario: a global token bucket that holds a second of its rate, so
// that a pause of the load shorter than a second loses no token.
const (
	sharedRate  = 300
	sharedBurst = 300
)

var childScenarios = map[string]func() *scenarios.Scenario{
	// shared: three layers, the token bucket binding over seconds.
	"shared": func() *scenarios.Scenario {
		return &scenarios.Scenario{Name: "redis-shared", Server: stubserver.Config{
			Headers: stubserver.HeadersIETF,
			Quota: &stubserver.Quota{Limits: []stubserver.Limit{
				{Name: "second", Algorithm: stubserver.AlgTokenBucket, Limit: sharedRate, Per: time.Second, Burst: sharedBurst},
				{Name: "minute", Algorithm: stubserver.AlgSlidingWindow, Limit: 100_000, Per: time.Minute},
				{Name: "client", Algorithm: stubserver.AlgFixedWindow, Limit: 2000, Per: time.Second, Key: stubserver.KeyClient},
			}},
			Phases: quotaPhase,
		}}
	},
	"closed": func() *scenarios.Scenario { return dyingScenario(stubserver.OnErrorClosed) },
	"open":   func() *scenarios.Scenario { return dyingScenario(stubserver.OnErrorOpen) },
}

// dyingScenario is a small layered quota, so that both 200s and 429s
// come before Redis dies.
func dyingScenario(onError string) *scenarios.Scenario {
	return &scenarios.Scenario{Name: "redis-dies-" + onError, Server: stubserver.Config{
		Headers: stubserver.HeadersIETF,
		Quota: &stubserver.Quota{Limits: []stubserver.Limit{
			{Name: "second", Algorithm: stubserver.AlgTokenBucket, Limit: 40, Per: time.Second, Burst: 10},
			{Name: "minute", Algorithm: stubserver.AlgSlidingWindowLog, Limit: 1000, Per: time.Minute},
		}, OnError: onError},
		Phases: quotaPhase,
	}}
}

// serveProc is one serve process of the tests.
type serveProc struct {
	cmd    *exec.Cmd
	base   string
	record string
	stderr syncBuffer
	done   chan error
}

var serveURLRE = regexp.MustCompile(`serving "[^"]*" on (http://127\.0\.0\.1:\d+)`)

// startServe starts a serve process of scenario kind on Redis at url,
// recording to a file of t's, and waits for its URL. It is stopped (as
// SIGINT would) when t ends if the test has not stopped it.
func startServe(t *testing.T, kind, url string) *serveProc {
	t.Helper()
	p := &serveProc{record: filepath.Join(t.TempDir(), "serve.ndjson"), done: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--duration", "2m", "--record", p.record, "--redis", url)
	p.cmd.Env = append(os.Environ(), serveChildEnv+"="+kind)
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := serveURLRE.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() { p.stop(t) })
	select {
	case p.base = <-urls:
	case err := <-p.done:
		t.Fatalf("serve exited before listening: %v\n%s", err, p.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("serve printed no URL in 60 s\n%s", p.stderr.String())
	}
	return p
}

// stop sends SIGINT and waits for a clean exit (the recording flushed).
func (p *serveProc) stop(t *testing.T) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("serve exited with %v\n%s", err, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		t.Errorf("serve did not stop within 30 s of SIGINT")
	}
}

// response is what the load generator got for one request.
type response struct {
	path       string
	status     int // 0: no response (err)
	retryAfter string
	sent       time.Time
	err        error
}

// load sends GETs to bases in turn from workers goroutines, each request
// on a path of its own (/c/{client}/r/{seq}, clients ids 0-7), until
// stop (or after max requests), and returns every result.
func load(bases []string, workers int, stop time.Time, maxRequests int64) []response {
	return loadUntil(bases, workers, func(int64) bool { return !time.Now().Before(stop) }, maxRequests)
}

// loadUntil is load until done, asked before each request with the
// number of 429s answered so far, says so.
func loadUntil(bases []string, workers int, done func(rejected int64) bool, maxRequests int64) []response {
	var seq, rejected atomic.Int64
	var mu sync.Mutex
	var out []response
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{MaxIdleConnsPerHost: 2}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			var mine []response
			for !done(rejected.Load()) {
				n := seq.Add(1)
				if n > maxRequests {
					break
				}
				r := response{path: fmt.Sprintf("/c/%d/r/%d", n%8, n), sent: time.Now()}
				resp, err := c.Get(bases[(int(n)+w)%len(bases)] + r.path)
				if err != nil {
					r.err = err
				} else {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					r.status, r.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
					if r.status == http.StatusTooManyRequests {
						rejected.Add(1)
					}
				}
				mine = append(mine, r)
			}
			mu.Lock()
			out = append(out, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// checkRecorded: every response the load generator got has exactly one
// attempt record in the processes' recordings, with the status it got.
func checkRecorded(t *testing.T, procs []*serveProc, got []response) {
	t.Helper()
	recorded := map[string][]int{}
	for _, p := range procs {
		_, as := readTimeline(t, p.record)
		for _, a := range as {
			recorded[a.Path] = append(recorded[a.Path], a.Status)
		}
	}
	missing := 0
	for _, r := range got {
		if r.status == 0 {
			continue
		}
		if st := recorded[r.path]; len(st) != 1 || st[0] != r.status {
			if missing++; missing <= 5 {
				t.Errorf("%s: got %d; recorded %v; want one record of %d", r.path, r.status, st, r.status)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d responses lack their one record", missing, len(got))
	}
}

func statuses(rs []response) map[int]int {
	m := map[int]int{}
	for _, r := range rs {
		m[r.status]++
	}
	return m
}

// TestServeReplicasShareOneQuota: two and three `retrylab serve`
// processes on one Redis (--redis), loaded above their layered quota over
// loopback, accept together what one bucket would: at most what the
// quota allows over the load's span (the binding layer, a token bucket of
// 300/s holding 300: 300 + 300·T), and as much as one bucket fed the same
// arrivals (shareBaseline); each alone would accept n times that. Every
// response is in the recordings.
func TestServeReplicasShareOneQuota(t *testing.T) {
	if testing.Short() {
		t.Skip("loads serve processes for seconds: make check")
	}
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d processes", n), func(t *testing.T) {
			srv := redistest.Start(t)
			url := srv.URL() + "?timeout=2s" // the quota's figures, not the host's hiccups, are under test
			var procs []*serveProc
			var bases []string
			for range n {
				p := startServe(t, "shared", url)
				procs = append(procs, p)
				bases = append(bases, p.base)
			}
			// The load lasts -quota-for, and on until the quota has
			// rejected a second of its rate: a host too slow to exceed
			// it at first (the bucket holds a second) gets there later.
			start := time.Now()
			got := loadUntil(bases, 8, func(rejected int64) bool {
				since := time.Since(start)
				return since >= *quotaFor && rejected >= sharedRate || since >= *quotaFor+30*time.Second
			}, 200_000)
			stop := time.Now() // every answer is in: the bucket grants nothing later
			for _, p := range procs {
				p.stop(t)
			}
			first := stop
			for _, r := range got {
				if r.sent.Before(first) {
					first = r.sent
				}
			}
			span := stop.Sub(first)
			want := sharedBurst + sharedRate*span.Seconds()
			one := shareBaseline(t, procs)
			st := statuses(got)
			ok := float64(st[200])
			t.Logf("%d processes, %v: %d requests, %v; %d accepted, quota %.0f (%+.2f%%), one bucket fed the same arrivals %d", n, span.Round(time.Millisecond), len(got), st, st[200], want, 100*(ok-want)/want, one)
			// Over the quota is the bug this test is for (alone, each
			// process would accept it: n×). Under one bucket's share of
			// the same arrivals would be a quota charged twice. A load the
			// host sends late is in both the baseline and the count; the
			// 3 % is the gap between a request's receipt (the baseline's
			// instant) and Redis's TIME (the bucket's).
			if ok > 1.03*want {
				t.Errorf("%d processes accepted %d over %v; want %.0f, 3%% over at most (%d per process alone would be %d×)", n, st[200], span, want, st[200], n)
			}
			if ok < 0.97*float64(one) {
				t.Errorf("%d processes accepted %d; one bucket fed the same arrivals accepts %d: want 3%% under at most", n, st[200], one)
			}
			if st[429] == 0 || st[503] != 0 || st[0] != 0 {
				t.Errorf("statuses %v; want 429s (the load exceeds the quota), no 503 nor transport error", st)
			}
			checkRecorded(t, procs, got)
		})
	}
}

// shareBaseline is how many of the processes' recorded arrivals one
// in-memory token bucket of the "shared" scenario's binding layer would
// accept, fed them in order at their instants of receipt: the same run's
// baseline for a shared quota, whatever the host made of the load.
func shareBaseline(t *testing.T, procs []*serveProc) int {
	t.Helper()
	var at []time.Time
	for _, p := range procs {
		meta, as := readTimeline(t, p.record)
		for _, a := range as {
			at = append(at, meta.Start.Add(time.Duration(a.At)))
		}
	}
	slices.SortFunc(at, time.Time.Compare)
	bucket := rate.NewLimiter(sharedRate, sharedBurst)
	n := 0
	for _, x := range at {
		if bucket.AllowN(x, 1) {
			n++
		}
	}
	return n
}

// TestServeReplicasWhenRedisDies: Redis killed under two serve processes.
// Failing closed, every request after it is answered 503 with Retry-After
// 1; failing open, 200; the failures are counted on /metrics and logged
// at most once a second per process; every response is in the
// recordings.
func TestServeReplicasWhenRedisDies(t *testing.T) {
	if testing.Short() {
		t.Skip("loads serve processes for seconds")
	}
	for _, onError := range []string{stubserver.OnErrorClosed, stubserver.OnErrorOpen} {
		t.Run(onError, func(t *testing.T) {
			srv := redistest.Start(t)
			url := srv.URL() + "?timeout=250ms"
			procs := []*serveProc{startServe(t, onError, url), startServe(t, onError, url)}
			bases := []string{procs[0].base, procs[1].base}
			start := time.Now()
			killedAt := make(chan time.Time, 1)
			kill := time.AfterFunc(time.Second, func() {
				srv.Stop()
				killedAt <- time.Now()
			})
			defer kill.Stop()
			got := load(bases, 6, start.Add(2500*time.Millisecond), 100_000)
			var killed time.Time
			select {
			case killed = <-killedAt:
			default:
				t.Fatal("the load ended before Redis was killed")
			}
			var before, after []response
			for _, r := range got {
				switch {
				case r.sent.Add(5 * time.Millisecond).Before(start.Add(time.Second)):
					before = append(before, r)
				case r.sent.After(killed.Add(100 * time.Millisecond)):
					after = append(after, r)
				}
			}
			if st := statuses(before); st[200] == 0 || st[429] == 0 {
				t.Errorf("before the kill: %v; want 200s and 429s", st)
			}
			if len(after) == 0 {
				t.Fatal("no request after the kill")
			}
			bad := 0
			for _, r := range after {
				if onError == stubserver.OnErrorClosed && (r.status != 503 || r.retryAfter != "1") ||
					onError == stubserver.OnErrorOpen && (r.status != 200 || r.retryAfter != "") {
					if bad++; bad <= 3 {
						t.Errorf("after the kill, %s: %d Retry-After %q (err %v)", r.path, r.status, r.retryAfter, r.err)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d requests after the kill were not answered as on_error %s says (503 with Retry-After 1 closed, 200 open)", bad, len(after), onError)
			}
			var backendErrors float64
			for _, p := range procs {
				backendErrors += metric(t, p.base, "retrylab_stub_quota_backend_errors_total")
			}
			if backendErrors < float64(len(after)) {
				t.Errorf("retrylab_stub_quota_backend_errors_total = %v; want at least the %d requests after the kill", backendErrors, len(after))
			}
			for _, p := range procs {
				p.stop(t)
				took := time.Since(killed)
				logged := strings.Count(p.stderr.String(), "stubserver: quota backend failed")
				if logged < 1 || logged > int(took/time.Second)+1 {
					t.Errorf("%d backend log lines in %v; want at least one, at most one a second:\n%s", logged, took, p.stderr.String())
				}
				if goRedisLog.MatchString(p.stderr.String()) {
					t.Errorf("go-redis's own logging reached stderr:\n%s", p.stderr.String())
				}
			}
			checkRecorded(t, procs, got)
			t.Logf("on_error %s: %d requests, before the kill %v, after %v", onError, len(got), statuses(before), statuses(after))
		})
	}
}

// goRedisLog matches a line of go-redis's own logger.
var goRedisLog = regexp.MustCompile(`(?m)^redis: `)

// metric reads one sample of base's /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var v float64
		if _, err := fmt.Sscanf(sc.Text(), name+" %g", &v); err == nil {
			return v
		}
	}
	t.Fatalf("%s/metrics lacks %s", base, name)
	return 0
}

// TestServeRedisFlagRefuses: --redis that cannot be used is bad input
// naming the flag, before serve listens.
func TestServeRedisFlagRefuses(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--redis", "memory"}, `--redis "memory": want a redis://HOST:PORT/DB`},
		{[]string{"--redis", "redis://u:hunter2@127.0.0.1:1/x"}, "--redis: stubredis: backend redis://u:xxxxx@127.0.0.1:1/x: redis: invalid database number"},
		{[]string{"--redis", "redis://127.0.0.1:1/0?timeout=soon"}, `timeout="soon"`},
		{[]string{"--scenario", "outage-date", "--redis", "redis://127.0.0.1:1/0"}, `--redis: scenario "outage-date" has no quota`},
	} {
		code, stdout, stderr := runCmd(t, append([]string{"serve", "--addr", "127.0.0.1:0"}, tt.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tt.want) || strings.Contains(stdout, "serving") || strings.Contains(stderr, "hunter2") {
			t.Errorf("serve %q: exit %d, stderr %q; want 2 with %q, nothing served, no password", tt.args, code, stderr, tt.want)
		}
	}
}

// TestServeRedisUnreachable: a Redis that does not answer when serve
// starts is bad input (exit 2) naming where it came from (--redis, or the
// scenario's server.quota.backend) and the URL, its password hidden,
// before anything is served.
func TestServeRedisUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	addr := srv.Addr
	srv.Stop() // its port now refuses connections
	dead := "redis://u:hunter2@" + addr + "/0"
	file := writeScenario(t, "name: q\nserver:\n  quota: {algorithm: token-bucket, rate: 10/s, burst: 5, backend: \""+dead+"\"}\n  phases:\n    - respond: quota\n")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", "quota-steady", "--redis", dead}, "--redis redis://u:xxxxx@" + addr + "/0: Redis does not answer (PING within 3s): "},
		{[]string{"--scenario", file}, `scenario "q": server.quota.backend redis://u:xxxxx@` + addr + "/0: Redis does not answer"},
	} {
		start := time.Now()
		code, stdout, stderr := runCmd(t, append([]string{"serve", "--addr", "127.0.0.1:0", "--duration", "1m"}, tt.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tt.want) || strings.Contains(stdout, "serving") || strings.Contains(stderr+stdout, "hunter2") {
			t.Errorf("serve %q: exit %d, stdout %q, stderr %q; want 2 with %q, nothing served, no password", tt.args, code, stdout, stderr, tt.want)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("serve %q took %v to refuse; want within the check's 3 s", tt.args, took)
		}
	}
}

// TestServeHealthzReportsRedis: serve's /healthz answers ok while its
// quota's Redis answers, and 503 naming the backend (password hidden) once
// it stops; the 503s the stub then answers itself are recorded with
// backend closed.
func TestServeHealthzReportsRedis(t *testing.T) {
	srv := redistest.Start(t)
	record := filepath.Join(t.TempDir(), "t.ndjson")
	url := "redis://:hunter2@" + srv.Addr + "/0?timeout=250ms"
	if err := redis.NewClient(&redis.Options{Addr: srv.Addr}).ConfigSet(context.Background(), "requirepass", "hunter2").Err(); err != nil {
		t.Fatal(err)
	}
	base, stop := serveUntilURL(t, "--addr", "127.0.0.1:0", "--scenario", "quota-steady", "--redis", url, "--record", record)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz with Redis up: %d %q; want 200 ok", code, body)
	}
	if code, _ := get("/c/1/r/1"); code != 200 {
		t.Errorf("first request: %d; want 200", code)
	}
	srv.Stop()
	code, body := get("/healthz")
	if code != 503 || !strings.HasPrefix(body, "503 quota backend redis://:xxxxx@"+srv.Addr+"/0") || strings.Contains(body, "hunter2") {
		t.Errorf("/healthz with Redis down: %d %q; want 503 naming the backend, password hidden", code, body)
	}
	if code, _ := get("/c/1/r/2"); code != 503 {
		t.Errorf("request with Redis down: %d; want 503 (on_error closed)", code)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	_, as := readTimeline(t, record)
	if len(as) != 2 || as[0].Backend != "" || as[1].Backend != timeline.BackendClosed || as[1].Status != 503 {
		t.Errorf("records %+v; want a metered 200, then a 503 marked backend closed", as)
	}
}

// TestServeRedisSaysWhere: serve with --redis prints where the quota
// lives and notes it in the recording's meta record.
func TestServeRedisSaysWhere(t *testing.T) {
	srv := redistest.Start(t)
	// The default timeout (50 ms) bounds a stub's Redis call; the first,
	// which dials and loads the script, took longer than that on a loaded
	// host and was answered 503. The note is under test, not the deadline.
	url := srv.URL() + "?timeout=10s"
	record := filepath.Join(t.TempDir(), "t.ndjson")
	base, stop := serveUntilURL(t, "--addr", "127.0.0.1:0", "--scenario", "quota-steady", "--redis", url, "--record", record)
	resp, err := http.Get(base + "/c/1/r/1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("RateLimit") != `"default";r=49;t=1` {
		t.Errorf("first request: %d RateLimit %q; want 200 with 49 left of 50", resp.StatusCode, resp.Header.Get("RateLimit"))
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	meta, _ := readTimeline(t, record)
	want := "quota in Redis " + url + " (--redis), keys under retrylab:quota:quota-steady:, on_error closed"
	if !slices.Contains(meta.Notes, want) {
		t.Errorf("meta notes %q; want %q", meta.Notes, want)
	}
}

// TestRunKeepsQuotaInRedis: run (and so compare) keeps a redis:// quota in
// Redis under the run's own prefix, so each run starts with it whole.
func TestRunKeepsQuotaInRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	srv := redistest.Start(t)
	sc, err := scenarios.Builtin("quota-steady")
	if err != nil {
		t.Fatal(err)
	}
	sc.Server = withBackend(sc.Server, srv.URL())
	// An hour's log: the keys outlive the test, and count each run.
	sc.Server.Quota.Limits = []stubserver.Limit{{Algorithm: stubserver.AlgSlidingWindowLog, Limit: 10_000, Per: time.Hour}}
	subj, err := subjects.Lookup("retrylab")
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	e := &env{stdout: &out, stderr: &out}
	o := runOptions{clients: 4, requests: 3, seed: 1, quiet: true}
	var dirs []string
	for _, name := range []string{"first", "second"} {
		dir, err := runner.NewRunDir(t.TempDir(), name)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := runOnce(context.Background(), e, sc, subj, o, dir)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Requests != 12 || sum.Results["ok"] != 12 {
			t.Errorf("run %s: %+v; want 12 requests ok", name, sum)
		}
		dirs = append(dirs, filepath.Base(dir))
	}
	for _, d := range dirs {
		keys := redisKeys(t, srv.Addr, runPrefix(d)+"*")
		want := runPrefix(d) + "/default/sliding-window-log/"
		if len(keys) != 1 || keys[0] != want {
			t.Errorf("keys of run %s: %q; want its one global log %s", d, keys, want)
			continue
		}
		if n := redisLen(t, srv.Addr, want); n != 12 {
			t.Errorf("run %s logged %d requests; want its own 12", d, n)
		}
	}
}

// redisKeys lists the keys matching pattern in the Redis at addr.
func redisKeys(t *testing.T, addr, pattern string) []string {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// redisLen is the length of a list in the Redis at addr.
func redisLen(t *testing.T, addr, key string) int64 {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	n, err := rdb.LLen(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCheckBackend: run and compare refuse, before any run, a scenario
// whose redis:// backend does not parse: bad input naming the file and
// the key, the password hidden.
func TestCheckBackend(t *testing.T) {
	sc, err := scenarios.Builtin("quota-steady")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkBackend(sc); err != nil {
		t.Errorf("memory backend: %v", err)
	}
	sc.File = "ci.yaml"
	sc.Server = withBackend(sc.Server, "redis://u:hunter2@127.0.0.1:1/x")
	err = checkBackend(sc)
	var out strings.Builder
	if code := exitCode(err, &out); code != exitUsage || !strings.Contains(out.String(), "ci.yaml: server.quota.backend: stubredis: backend redis://u:xxxxx@127.0.0.1:1/x: redis: invalid database number") {
		t.Errorf("bad backend: exit %d, %q; want 2 naming ci.yaml and server.quota.backend, no password", code, out.String())
	}
}
