package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrylab/retrylab/internal/redistest"
	"github.com/retrylab/retrylab/timeline"
)

// rehearsalScenario is outage-bare trimmed: a 2 s outage of bare 503s that
// the whole fleet starts into, where full jitter passes and backoff
// without jitter fails on waves.
const rehearsalScenario = `name: rehearsal
description: outage-bare trimmed for a rehearsal of a fleet over several processes
duration: 12s
server:
  latency: 2ms
  headers: none
  phases:
    - {name: outage, for: 2s, respond: {status: 503}, retry_after: none}
    - {name: recovered, respond: ok}
fleet: {clients: 90, start: burst, requests: 1, method: GET, timeout: 10s}
subject:
  name: retrylab
  policy: {base: 200ms, cap: 2s, budget: 9s, jitter: full}
expect:
  checks: [instant-retry, waves, non-retryable, attempts, budget, give-up, amplification]
  require: [instant-retry, waves, give-up]
`

// rehearsalServeArgs are added to both stubs' serve command lines (the
// shared quota is rehearsed apart: TestFleetRehearsalSharedQuota).
var rehearsalServeArgs []string

// verdictJSON is what the rehearsal compares of two verdicts.
type verdictJSON struct {
	Verdict      string   `json:"verdict"`
	Inconclusive []string `json:"inconclusive"`
	Checks       []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"checks"`
}

// noisy reports whether the host's load entered the verdict: a check
// undecided under its noise, or a fleet it started late.
func (v verdictJSON) noisy() bool {
	for _, r := range v.Inconclusive {
		if noiseReason(r) {
			return true
		}
	}
	return false
}

// failed is the verdict and the ids of its failed checks.
func (v verdictJSON) failed() string {
	s := v.Verdict
	for _, c := range v.Checks {
		if c.Status == "fail" {
			s += " " + c.ID
		}
	}
	return s
}

func (v verdictJSON) String() string {
	var b strings.Builder
	b.WriteString(v.Verdict)
	for _, c := range v.Checks {
		fmt.Fprintf(&b, " %s:%s", c.ID, c.Status)
	}
	if len(v.Inconclusive) > 0 {
		fmt.Fprintf(&b, " inconclusive: %q", v.Inconclusive)
	}
	return b.String()
}

func readVerdict(t *testing.T, path string) verdictJSON {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v verdictJSON
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// countRecords counts a timeline's attempts and outcomes, and returns its
// meta.
func countRecords(t *testing.T, path string) (meta timeline.Meta, attempts, outcomes int) {
	t.Helper()
	m, as := readTimeline(t, path)
	f, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return m, len(as), strings.Count(string(f), `{"type":"outcome"`)
}

// TestFleetRehearsal rehearses a run spread over processes on loopback:
// two `serve` stubs and three `run --target` shards (0 and 2 on the first
// stub, 1 on the second) share one epoch; `merge` joins the two
// recordings and three fleet files, and `analyze` judges the result (`report` draws it). Every
// scheduled logical request has its outcome, the merge holds every
// attempt the stubs recorded, and the verdict is the one-process run's,
// for the reference client (PASS) and a negative control (FAIL, waves).
func TestFleetRehearsal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the rehearsal in real time, seconds per subject")
	}
	dir := t.TempDir()
	scFile := filepath.Join(dir, "rehearsal.yaml")
	if err := os.WriteFile(scFile, []byte(rehearsalScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ subject, want string }{{"retrylab", "pass"}, {"exp-no-jitter", "fail"}} {
		t.Run(c.subject, func(t *testing.T) {
			dir := filepath.Join(dir, c.subject)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			// The reference: the same scenario and seed in one process,
			// while the rehearsal runs (the load is small).
			var wg sync.WaitGroup
			var refCode int
			var refOut, refErr string
			wg.Go(func() {
				refCode, refOut, refErr = runCmd(t, "run", scFile, "--subject", c.subject, "--seed", "5", "--quiet", "--no-report",
					"--out", filepath.Join(dir, "ref"), "--json", filepath.Join(dir, "ref.json"))
			})

			// Time for both stubs to listen and three shards to start.
			epoch := time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
			recs := []string{filepath.Join(dir, "stub-a.ndjson"), filepath.Join(dir, "stub-b.ndjson")}
			var urls []string
			var stops []func() error
			for _, rec := range recs {
				url, stop := serveUntilURL(t, append([]string{"--addr", "127.0.0.1:0", "--scenario", scFile, "--seed", "5",
					"--epoch", epoch, "--record", rec}, rehearsalServeArgs...)...)
				urls, stops = append(urls, url), append(stops, stop)
			}
			type shardRun struct {
				code        int
				out, errOut string
			}
			shards := make([]shardRun, 3)
			var sw sync.WaitGroup
			for i := range 3 {
				sw.Go(func() {
					s := &shards[i]
					s.code, s.out, s.errOut = runCmd(t, "run", scFile, "--subject", c.subject, "--seed", "5", "--quiet",
						"--target", urls[i%2], "--shard", fmt.Sprintf("%d/3", i), "--epoch", epoch, "--out", filepath.Join(dir, fmt.Sprint("shard", i)))
				})
			}
			sw.Wait()
			for _, stop := range stops {
				if err := stop(); err != nil {
					t.Errorf("serve: %v", err)
				}
			}
			files := append([]string(nil), recs...)
			for i, s := range shards {
				if s.code != exitOK || !strings.Contains(s.out, "fleet only: merge this timeline") {
					t.Fatalf("shard %d/3: exit %d\nstdout:\n%s\nstderr:\n%s", i, s.code, s.out, s.errOut)
				}
				tl, _ := filepath.Glob(filepath.Join(dir, fmt.Sprint("shard", i), "*-shard-*of3", "timeline.ndjson"))
				if len(tl) != 1 {
					t.Fatalf("shard %d/3 wrote timelines %v; want one, in a directory named for its shard", i, tl)
				}
				files = append(files, tl[0])
			}

			merged := filepath.Join(dir, "merged.ndjson")
			code, out, errOut := runCmd(t, append([]string{"merge", "-o", merged}, files...)...)
			if code != exitOK {
				t.Fatalf("merge: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			if errOut != "" { // every outcome's attempts are in a recording
				t.Errorf("merge of every file warns:\n%s", errOut)
			}
			m, attempts, outcomes := countRecords(t, merged)
			stubAttempts := 0
			for _, rec := range recs {
				_, n, _ := countRecords(t, rec)
				stubAttempts += n
			}
			if m.Scheduled != 90 || outcomes != 90 || attempts != stubAttempts || m.Shard != "" || m.ClockUncertainty != 0 {
				t.Errorf("merged: scheduled %d, %d outcomes, %d attempts (stubs recorded %d), shard %q, clock uncertainty %d; want 90, 90, equal, none, 0 (one host)",
					m.Scheduled, outcomes, attempts, stubAttempts, m.Shard, m.ClockUncertainty)
			}

			if code, out, errOut := runCmd(t, "report", merged, "--out", filepath.Join(dir, "report")); code != exitOK {
				t.Errorf("report of the merged timeline: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			} else if _, err := os.Stat(filepath.Join(dir, "report", "merged", "report.html")); err != nil { // --out is a parent
				t.Errorf("report of the merged timeline: %v", err)
			}
			code, out, errOut = runCmd(t, "analyze", merged, "--json", filepath.Join(dir, "merged.json"))
			wg.Wait()
			// The host's noise may keep a real-time run from a verdict
			// (INCONCLUSIVE, as under the race detector on two cores),
			// never turn it: neither run may then contradict the verdict
			// wanted, and there is no verdict to compare.
			if noiseOnly(refCode, refOut) || noiseOnly(code, out) {
				for _, r := range []struct {
					code int
					out  string
				}{{refCode, refOut}, {code, out}} {
					if (r.code == exitOK && c.want != "pass") || (r.code == exitFailed && c.want != "fail") {
						t.Errorf("a run under host noise gave exit %d; want %s or INCONCLUSIVE\n%s", r.code, c.want, r.out)
					}
				}
				t.Logf("the host's noise kept a run from a verdict; merged exit %d, one-process exit %d", code, refCode)
				return
			}
			if refCode != exitOK && refCode != exitFailed {
				t.Fatalf("one-process run: exit %d\nstdout:\n%s\nstderr:\n%s", refCode, refOut, refErr)
			}
			ref, got := readVerdict(t, filepath.Join(dir, "ref.json")), readVerdict(t, filepath.Join(dir, "merged.json"))
			// Under the host's load two runs may leave different checks
			// undecided: then the verdict and the failed checks must agree.
			same := got.String() == ref.String()
			if ref.noisy() || got.noisy() {
				same = got.failed() == ref.failed()
			}
			if ref.Verdict != c.want || !same || code != refCode {
				t.Errorf("merged verdict (exit %d):\n  %s\none-process verdict (exit %d):\n  %s\nwant both %s\nanalyze stdout:\n%s",
					code, got, refCode, ref, c.want, out)
			}
		})
	}
}

// rehearsalQuota: a global token bucket the fleet offers several times its
// rate without pause: no Retry-After (whole seconds of it would bunch the
// fleet, and a bucket idle for a second keeps only its burst), so the
// clients' jittered backoff keeps the load on.
const rehearsalQuota = `name: rehearsal-quota
description: a global quota two stubs share through Redis, loaded by three fleet shards
duration: 6s
server:
  latency: 1ms
  headers: none
  quota: {algorithm: token-bucket, rate: 100/s, burst: 10, key: global}
  phases:
    - {name: steady, respond: quota, retry_after: none}
fleet: {clients: 300, start: ramp 200ms, requests: 100, method: GET, timeout: 10s}
subject:
  name: retrylab
  policy: {base: 100ms, cap: 1s, budget: 5s, jitter: full}
`

// TestFleetRehearsalSharedQuota: two stubs on one redis-server enforce
// one quota together while three run --target shards load them: the
// merged timeline holds every attempt of both recordings, and the 200s
// both stubs gave add up to the one bucket's tokens over the run (burst +
// rate × span), within 2 %.
func TestFleetRehearsalSharedQuota(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the rehearsal in real time (about 7 s)")
	}
	rs := redistest.Start(t)
	dir := t.TempDir()
	scFile := filepath.Join(dir, "rehearsal-quota.yaml")
	if err := os.WriteFile(scFile, []byte(rehearsalQuota), 0o644); err != nil {
		t.Fatal(err)
	}
	epoch := time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
	recs := []string{filepath.Join(dir, "stub-a.ndjson"), filepath.Join(dir, "stub-b.ndjson")}
	var urls []string
	var stops []func() error
	for _, rec := range recs {
		url, stop := serveUntilURL(t, "--addr", "127.0.0.1:0", "--scenario", scFile, "--seed", "3",
			"--epoch", epoch, "--record", rec, "--redis", rs.URL())
		urls, stops = append(urls, url), append(stops, stop)
	}
	var sw sync.WaitGroup
	codes := make([]int, 3)
	for i := range 3 {
		sw.Go(func() {
			codes[i], _, _ = runCmd(t, "run", scFile, "--seed", "3", "--quiet",
				"--target", urls[i%2], "--shard", fmt.Sprintf("%d/3", i), "--epoch", epoch, "--out", filepath.Join(dir, fmt.Sprint("shard", i)))
		})
	}
	sw.Wait()
	for _, stop := range stops {
		if err := stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	for i, c := range codes {
		if c != exitOK {
			t.Fatalf("shard %d/3 exited %d", i, c)
		}
	}
	merged := filepath.Join(dir, "merged.ndjson")
	if code, out, errOut := runCmd(t, "merge", "-o", merged, dir); code != exitOK {
		t.Fatalf("merge: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	_, as := readTimeline(t, merged)
	perStub := 0
	for _, rec := range recs {
		_, a := readTimeline(t, rec)
		perStub += len(a)
	}
	if len(as) != perStub {
		t.Errorf("merged %d attempts; the stubs recorded %d", len(as), perStub)
	}
	var ok, limited int
	var first, last int64 = -1, 0
	other := map[string]int{}
	for _, a := range as {
		if a.Status != 200 && a.Status != 429 {
			other[fmt.Sprintf("%d %s %s", a.Status, a.Fault, a.Backend)]++
		}
		if first < 0 || a.At < first {
			first = a.At
		}
		last = max(last, a.At)
		switch a.Status {
		case 200:
			ok++
		case 429:
			limited++
		}
	}
	tokens := 10 + 100*time.Duration(last-first).Seconds()
	t.Logf("%d accepted, %d rejected over %v; the bucket held %.0f tokens; other answers %v", ok, limited, time.Duration(last-first), tokens, other)
	// A request whose Redis call failed (its 50 ms timeout, on a host too
	// slow for it: the race detector on two busy cores) was answered 503
	// by the stub and took no token, which the bucket then lost to its
	// burst cap: above 1 % of the attempts, the stubs' own failures, not
	// the shared bucket, set the lower bound, and only the upper one (the
	// quota never exceeded) is judged, as the analyzer judges such a run
	// INCONCLUSIVE.
	closed := 0
	for _, a := range as {
		if a.Backend == timeline.BackendClosed {
			closed++
		}
	}
	low := float64(ok) < tokens*0.98
	if closed*100 > len(as) {
		t.Logf("%d of %d attempts met a failed Redis call (answered 503 by the stub): the lower bound is not judged", closed, len(as))
		low = false
	}
	if limited == 0 || float64(ok) > tokens*1.02 || low {
		t.Errorf("the two stubs accepted %d (and rejected %d) over %v; want the one bucket's %.0f tokens within 2 %%, under a load that it rejects",
			ok, limited, time.Duration(last-first), tokens)
	}
}

// noiseOnly reports whether a verdict's output is INCONCLUSIVE for host
// noise alone: every reason says a check could not judge under it.
func noiseOnly(code int, out string) bool {
	if code != exitError {
		return false
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if r, ok := strings.CutPrefix(strings.TrimSpace(l), "? "); ok {
			if !noiseReason(r) {
				return false
			}
			n++
		}
	}
	return n > 0
}

// noiseReason reports whether an INCONCLUSIVE reason is the host's load.
func noiseReason(r string) bool {
	return strings.Contains(r, "could not decide under this host's noise") || strings.Contains(r, "the fleet started requests late")
}
