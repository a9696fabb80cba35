package runner

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"github.com/retrylab/retrylab/scenarios"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

// busy runs TestBusyHost, the busy-runner suite `make matrix` runs: real
// time, CPU hogs, a minute and a half of wall time.
var (
	busy     = flag.Bool("busy", false, "run TestBusyHost: the built-ins in real time beside CPU hogs")
	busyKeep = flag.String("busy-keep", "", "TestBusyHost writes the timeline of every wrong verdict into this directory")
)

// hogEnv makes the test binary a CPU hog: it spins for the duration it
// names and exits (TestMain).
const hogEnv = "RETRYLAB_TEST_HOG"

// hog spins on one core until d has passed.
func hog(d string) int {
	dd, err := time.ParseDuration(d)
	if err != nil || dd > 5*time.Minute {
		return 2
	}
	end := time.Now().Add(dd)
	x := uint64(1)
	for time.Now().Before(end) {
		for range 1 << 16 {
			x = x*6364136223846793005 + 1
		}
	}
	if x == 0 {
		fmt.Println(x) // keep the loop
	}
	return 0
}

// startHogs starts n spinning processes, each bounded by limit, and stops
// them when the test ends.
func startHogs(t *testing.T, n int, limit time.Duration) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	var cmds []*exec.Cmd
	for range n {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), hogEnv+"="+limit.String())
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	t.Cleanup(func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	})
}

// fakeRetrylab is an exec client built on our own client package: one
// logical request after the other, each through the library with the
// policy the test passes.
func fakeRetrylab(base string, client, n int) int {
	var base0, cap0, budget time.Duration
	fmt.Sscanf(os.Getenv("RETRYLAB_FAKE_POLICY"), "%d,%d,%d", &base0, &cap0, &budget)
	subj, err := subjects.Lookup("retrylab")
	if err != nil {
		return 2
	}
	call := subj.New(&http.Transport{Proxy: nil}, subjects.Params{Client: client, Rand: rand.New(rand.NewPCG(uint64(client), 9)),
		Policy: subjects.Policy{Base: base0, Cap: cap0, Budget: budget, Jitter: "full"}})
	fmt.Println(subjects.ReadyLine)
	for i := range n {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/r/%d", base, i), nil)
		resp, err := call(context.Background(), req)
		switch {
		case err != nil:
			fmt.Printf("fail /r/%d %s\n", i, strings.ReplaceAll(err.Error(), "\n", " "))
		case resp.StatusCode < 300:
			fmt.Printf("ok /r/%d\n", i)
		default:
			fmt.Printf("fail /r/%d status %d\n", i, resp.StatusCode)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
	return 0
}

// TestBusyHost is the busy-runner suite: the built-ins that judge time
// windows, in real time, beside one CPU hog per core (each stops by
// itself after three minutes; the test stops them first). Our own client
// — in process and as an exec program — is never FAIL, and a control is
// never PASS where it FAILs in virtual time; INCONCLUSIVE is allowed, and
// counted in the log: noise may make a verdict INCONCLUSIVE, never FAIL
// or PASS.
func TestBusyHost(t *testing.T) {
	if !*busy {
		t.Skip("the busy-runner suite runs with -args -busy (make matrix)")
	}
	type run struct {
		scenario, subject string
		clients           int
		control           bool
	}
	// Our client on each, and on each the controls whose mistake the
	// scenario's time windows judge (the gate script,
	// docs/benchmarks/gate-under-load.sh, runs every pair).
	runs := []run{
		{"outage-bare", "retrylab", 0, false}, {"outage-bare", "exp-no-jitter", 0, true}, {"outage-bare", "no-backoff", 0, true},
		{"outage-delta", "retrylab", 0, false}, {"outage-delta", "no-retry", 0, true},
		{"flapping", "retrylab", 0, false}, {"flapping", "exp-no-jitter", 0, true}, {"flapping", "no-backoff", 0, true},
		// An exec client ignores the fleet's think time (its loop is
		// its own): in flapping and metastable it is done before the
		// first dip. The outage exercises it.
		{"outage-delta", "exec", 20, false},
		// metastable is the costliest built-in in real time: only our
		// client and the control it is calibrated against.
		{"metastable", "retrylab", 0, false}, {"metastable", "exp-no-jitter", 0, true},
	}
	// Which controls fail in virtual time (the same seed): only those
	// are held to "never PASS" on the busy host.
	virtualFail := map[string]bool{}
	for _, r := range runs {
		if !r.control {
			continue
		}
		sc, err := scenarios.Resolve(r.scenario)
		if err != nil {
			t.Fatal(err)
		}
		subj, err := subjects.Lookup(r.subject)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Test(t, func(t *testing.T) {
			var buf bytes.Buffer
			if _, err := Run(context.Background(), sc, RunOptions{Subject: subj, Seed: 1, Timeline: &buf, Virtual: true, Stagger: time.Microsecond}); err != nil {
				t.Fatal(err)
			}
			v, err := analyzer.Analyze(bytes.NewReader(buf.Bytes()), analyzer.Options{})
			if err != nil {
				t.Fatal(err)
			}
			virtualFail[r.scenario+"/"+r.subject] = v.Status == analyzer.VerdictFail
		})
	}

	startHogs(t, runtime.NumCPU(), 3*time.Minute)
	var mu sync.Mutex
	counts := map[string]map[string]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2) // two runs at once beside the hogs
	for _, r := range runs {
		if r.control && !virtualFail[r.scenario+"/"+r.subject] {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			sc, err := scenarios.Resolve(r.scenario)
			if err != nil {
				t.Error(err)
				return
			}
			var subj subjects.Subject
			var aopts analyzer.Options
			if r.subject == "exec" {
				p := sc.Subject.Policy
				prog := fakeProgram(t, "retrylab")
				prog.Env = append(prog.Env, fmt.Sprintf("RETRYLAB_FAKE_POLICY=%d,%d,%d", p.Base, p.Cap, p.Budget))
				subj = prog
				// A program states no policy: the test states the one
				// the program follows, as our client states it.
				ref, _ := subjects.Lookup("retrylab")
				if st := ref.(subjects.Describer).Describe(subjects.Params{Policy: subjects.Policy{Base: p.Base, Cap: p.Cap, Budget: p.Budget, Jitter: "full"}}).Stated; st != nil {
					aopts.Policy = &timeline.Policy{Base: int64(st.Base), Cap: int64(st.Cap), MaxAttempts: st.MaxAttempts, Budget: int64(st.Budget), Jitter: st.Jitter, Retryable: st.Retryable}
				}
			} else if subj, err = subjects.Lookup(r.subject); err != nil {
				t.Error(err)
				return
			}
			var buf bytes.Buffer
			if _, err := Run(t.Context(), sc, RunOptions{Subject: subj, Seed: 1, Timeline: &buf, Clients: r.clients}); err != nil {
				t.Errorf("%s × %s: %v", r.scenario, r.subject, err)
				return
			}
			v, err := analyzer.Analyze(bytes.NewReader(buf.Bytes()), aopts)
			if err != nil {
				t.Errorf("%s × %s: %v", r.scenario, r.subject, err)
				return
			}
			_, end := decodeEnd(t, buf.Bytes())
			noise := "unmeasured"
			if end != nil && end.Noise != nil {
				noise = fmt.Sprintf("p50 %s p99 %s (%s, cpu pressure %.0f%%)", time.Duration(end.Noise.P50), time.Duration(end.Noise.P99), end.Noise.Source, end.Noise.CPUPressure)
			}
			t.Logf("%s × %s: %s; noise %s; failed %v; inconclusive %q", r.scenario, r.subject, v.Status, noise, v.Failed(), v.Inconclusive)
			wrong := ""
			switch {
			case !r.control && v.Status == analyzer.VerdictFail:
				wrong = fmt.Sprintf("%s × %s (our client) FAILED on a busy host: %v", r.scenario, r.subject, v.Failed())
			case r.control && v.Status == analyzer.VerdictPass:
				wrong = fmt.Sprintf("%s × %s (a control that fails in virtual time) PASSED on a busy host", r.scenario, r.subject)
			}
			if wrong != "" {
				// What each check read, and the recording, for the next
				// engineer to judge again.
				for _, c := range v.Checks {
					if c.Status != analyzer.StatusSkip {
						wrong += fmt.Sprintf("\n\t%s %s: %s", c.ID, c.Status, c.Reason)
					}
				}
				if *busyKeep != "" {
					f := filepath.Join(*busyKeep, fmt.Sprintf("busy-%s-%s-%d.ndjson", r.scenario, r.subject, time.Now().UnixNano()))
					if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
						t.Error(err)
					}
					wrong += "\n\ttimeline: " + f
				}
				t.Error(wrong)
			}
			mu.Lock()
			if counts[r.subject] == nil {
				counts[r.subject] = map[string]int{}
			}
			counts[r.subject][v.Status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	for subj, c := range counts {
		t.Logf("%s: %d pass, %d fail, %d inconclusive", subj, c[analyzer.VerdictPass], c[analyzer.VerdictFail], c[analyzer.VerdictInconclusive])
	}
}
