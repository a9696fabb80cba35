package sharedbucket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrylab/retrylab/client"
	"github.com/retrylab/retrylab/client/clientredis"
	"github.com/retrylab/retrylab/internal/redistest"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
)

const (
	procs   = 4  // client processes
	workers = 16 // goroutines per process, each sending as fast as it may
	// requests per process: about 4 s at the shared 160/s; the control
	// needs fewer to overrun the quota.
	requests        = 150
	controlRequests = 60
)

// TestFourProcessesShareQuota starts the stub of the built-in quota-steady
// scenario (a token bucket of 200 requests/s, burst 50, for all callers) on
// loopback, then four processes of this test binary (TestHelperProcess),
// each a client.Transport driving 16 closed-loop workers, far more than the
// quota. Paced by one clientredis bucket at 80% of the quota, shared in
// Redis, the stub answers no 429 and the arrivals stay under the quota in
// every second. The control, the same processes each pacing on its own
// in-process bucket at that rate (the seeds' "per-process limits when a
// fleet shares one quota"), draws 429s: the test can see a fleet that
// overruns the quota.
func TestFourProcessesShareQuota(t *testing.T) {
	if testing.Short() {
		t.Skip("four processes against Redis in real time for seconds; on a loaded host a Redis call times out and its process falls back: make check")
	}
	sc, err := scenarios.Builtin("quota-steady")
	if err != nil {
		t.Fatal(err)
	}
	q := sc.Server.Quota.Limits[0]
	quota := q.Limit / q.Per.Seconds()
	if q.Key != stubserver.KeyGlobal || quota != 200 {
		t.Fatalf("quota-steady's quota is %+v; this test expects 200/s for all callers", q)
	}
	redisSrv := redistest.Start(t)

	t.Run("shared", func(t *testing.T) {
		arrivals, outs := runFleet(t, sc, redisSrv.Addr, "shared", requests)
		total := 0
		for i, out := range outs {
			if out.ok != requests || out.fallbacks != 0 {
				t.Errorf("process %d: %d of %d requests ok, %d fallbacks; want all ok through Redis\n%s", i, out.ok, requests, out.fallbacks, out.text)
			}
			total += out.ok
		}
		var n429 int
		var at []int64
		for _, a := range arrivals {
			at = append(at, a.At)
			if a.Status == http.StatusTooManyRequests {
				n429++
			}
		}
		if n429 > 0 {
			t.Errorf("the stub answered %d 429s of %d attempts; want none", n429, len(arrivals))
		}
		if len(arrivals) != total {
			t.Errorf("the stub saw %d attempts for %d requests; want one each", len(arrivals), total)
		}
		perSecond := mostIn(at, time.Second)
		rate := quota * client.DefaultQuotaShare
		t.Logf("%d attempts over %v, at most %d in any second (quota %v/s, bucket %v/s burst %d)",
			len(at), time.Duration(slices.Max(at)-slices.Min(at)), perSecond, quota, rate, burst)
		// The bucket grants at most rate + burst a second; arrivals jitter
		// by the processes' scheduling, which the quota's headroom absorbs.
		if perSecond >= int(quota) {
			t.Errorf("%d attempts in one second; want under the quota, %v", perSecond, quota)
		}
	})

	t.Run("per-process control", func(t *testing.T) {
		arrivals, _ := runFleet(t, sc, "", "local", controlRequests)
		n429 := 0
		for _, a := range arrivals {
			if a.Status == http.StatusTooManyRequests {
				n429++
			}
		}
		t.Logf("%d attempts, %d answered 429", len(arrivals), n429)
		if n429 == 0 {
			t.Errorf("four processes pacing alone at %v/s each drew no 429 of %d attempts: the test cannot see a fleet overrun the quota", quota*client.DefaultQuotaShare, len(arrivals))
		}
	})
}

// burst is the shared bucket's burst: small against the stub's 50, so the
// arrivals' jitter on a loaded machine does not reach the stub's limit.
const burst = 10

// outcome is what one helper process reported.
type outcome struct {
	ok, fallbacks int
	text          string
}

// runFleet serves sc's stub on loopback, runs the helper processes against
// it (mode "shared": through Redis at addr; "local": each on its own
// bucket), and returns the stub's recorded attempts and each process's
// report. The processes are bounded: killed after 10 s.
func runFleet(t *testing.T, sc *scenarios.Scenario, addr, mode string, requests int) ([]timeline.Attempt, []outcome) {
	t.Helper()
	var rec bytes.Buffer
	recorder := timeline.NewRecorder(timeline.NewEncoder(&rec), 256)
	stub, err := stubserver.New(sc.Server, stubserver.Options{Recorder: recorder})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- stub.Serve(ln) }()

	q := sc.Server.Quota.Limits[0]
	prefix := fmt.Sprintf("sharedbucket-test:%d:", time.Now().UnixNano())
	var (
		cmds [procs]*exec.Cmd
		outs [procs]bytes.Buffer
	)
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(),
			"SHAREDBUCKET_HELPER="+mode,
			"SHAREDBUCKET_URL=http://"+ln.Addr().String(),
			"SHAREDBUCKET_REDIS="+addr,
			"SHAREDBUCKET_PREFIX="+prefix,
			"SHAREDBUCKET_CLIENT="+strconv.Itoa(i),
			"SHAREDBUCKET_REQUESTS="+strconv.Itoa(requests),
			"SHAREDBUCKET_QUOTA="+strconv.FormatFloat(q.Limit/q.Per.Seconds(), 'g', -1, 64))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	deadline := time.After(10 * time.Second)
	var res [procs]outcome
	for i, cmd := range cmds {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-deadline:
			for _, c := range cmds {
				c.Process.Kill()
			}
			err = <-done
			err = fmt.Errorf("killed after 10s: %v", err)
		}
		res[i].text = outs[i].String()
		if err != nil {
			t.Errorf("helper %d: %v\n%s", i, err, res[i].text)
		}
		for _, line := range strings.Split(res[i].text, "\n") {
			fmt.Sscanf(line, "ok %d", &res[i].ok)
			fmt.Sscanf(line, "fallbacks %d", &res[i].fallbacks)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := stub.Shutdown(ctx); err != nil {
		t.Error(err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.Error(err)
	}
	if err := recorder.Close(); err != nil {
		t.Fatal(err)
	}
	var arrivals []timeline.Attempt
	dec := timeline.NewDecoder(&rec)
	for {
		var r timeline.Record
		err := dec.Decode(&r)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.Type == timeline.TypeAttempt {
			arrivals = append(arrivals, r.Attempt)
		}
	}
	return arrivals, res[:]
}

// mostIn returns the most instants (ns) in any window of the given length.
func mostIn(at []int64, window time.Duration) int {
	s := slices.Clone(at)
	slices.Sort(s)
	most, j := 0, 0
	for i := range s {
		for s[i]-s[j] >= int64(window) {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// TestHelperProcess is one client process of TestFourProcessesShareQuota:
// a Transport paced at 80% of the quota, through the Redis bucket or its
// own, sends its requests from 16 workers as fast as pacing lets them,
// and prints how many ended ok and how many times the limiter fell back.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("SHAREDBUCKET_HELPER")
	if mode == "" {
		t.Skip("a child process of TestFourProcessesShareQuota")
	}
	quota, err := strconv.ParseFloat(os.Getenv("SHAREDBUCKET_QUOTA"), 64)
	if err != nil {
		t.Fatal(err)
	}
	id, err := strconv.Atoi(os.Getenv("SHAREDBUCKET_CLIENT"))
	if err != nil {
		t.Fatal(err)
	}
	requests, err := strconv.Atoi(os.Getenv("SHAREDBUCKET_REQUESTS"))
	if err != nil {
		t.Fatal(err)
	}
	obs := &fallbacks{}
	cfg := client.Config{Quota: quota, Burst: burst, Budget: 10 * time.Second,
		Key: func(*http.Request) string { return "quota-steady" }}
	if mode == "shared" {
		rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("SHAREDBUCKET_REDIS"), ContextTimeoutEnabled: true})
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := rdb.Ping(ctx).Err(); err != nil { // a connection open before the first request
			t.Fatal(err)
		}
		lim, err := clientredis.New(rdb, clientredis.Options{
			Rate: quota * client.DefaultQuotaShare, Burst: burst, Processes: procs,
			Prefix: os.Getenv("SHAREDBUCKET_PREFIX"), Observer: obs,
			// Not the 50 ms default: on a machine running other tests at
			// once, a call now and then takes longer, and the fallback
			// (tested in clientredis) would blur what this test shows.
			Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Limiter = lim
	}
	tr := client.New(nil, cfg)
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	base := os.Getenv("SHAREDBUCKET_URL")
	var (
		next, ok atomic.Int64
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for seq := next.Add(1) - 1; seq < int64(requests); seq = next.Add(1) - 1 {
				resp, err := hc.Get(base + stubserver.RequestPath(id, int(seq)))
				if err != nil {
					fmt.Printf("error %v\n", err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("ok %d\nfallbacks %d\n", ok.Load(), obs.n.Load())
}

// fallbacks counts a Limiter's fallbacks.
type fallbacks struct{ n atomic.Int64 }

func (f *fallbacks) LimiterFallback(e client.LimiterEvent) {
	if e.FellBack {
		f.n.Add(1)
		fmt.Printf("fell back: %v\n", e.Err)
	} else {
		fmt.Printf("recovered\n")
	}
}
