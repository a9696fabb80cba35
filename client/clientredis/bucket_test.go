package clientredis

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// These tests run the script on a real redis-server (see redis_test.go).
// None sleeps: a permit's instant is the time the Reserve call started plus
// its wait, so a test counts the permits whose instants fall in a window
// instead of waiting for them. Each is bounded well under 15 s.
//
// Tests that must not fall back give their Limiters a Timeout of
// patientTimeout, not the 50 ms default: on a machine busy with other
// tests a call now and then takes longer. TestRedisHung and the synctest
// tests cover the Timeout itself.

const patientTimeout = time.Second

// permitsPer returns the most permits whose instants (µs, any order) fall
// in any window of the given length (end excluded).
func permitsPer(at []int64, window time.Duration) int {
	s := slices.Clone(at)
	slices.Sort(s)
	most, j := 0, 0
	for i := range s {
		for s[i]-s[j] >= window.Microseconds() {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// takeUntil reserves permits for key until one comes later than end (which
// it gives back), and returns the permits' instants and the instants its
// Reserve calls began, in µs of the local clock, and whether any permit
// was granted, in the window or the one after it.
func takeUntil(l *Limiter, key string, end time.Time) (at, calls []int64, granted bool, err error) {
	for {
		now := time.Now()
		calls = append(calls, now.UnixMicro())
		wait, cancel, err := l.Reserve(context.Background(), key, now)
		if err != nil {
			return at, calls, granted, err
		}
		granted = true
		t := now.Add(wait)
		if t.After(end) {
			cancel()
			return at, calls, granted, nil
		}
		at = append(at, t.UnixMicro())
	}
}

// livenessFloor is the fewest permits a shared bucket that starves no one
// grants in [start, end) to callers whose Reserve calls began at calls (µs,
// any order): burst plus share of the rate over the window, less the time
// the callers left the bucket full. That time is the host's: the bucket
// is full from start until the first call, and again in a gap between
// calls longer than burst/rate. Gaps are counted until the first call at
// or after end; a bucket that sent every caller past end early (starving
// them) leaves no late call, so its idle tail is not excused.
func livenessFloor(calls []int64, start, end time.Time, rate float64, burst int, share float64) (floor int, idle time.Duration) {
	s := slices.Clone(calls)
	slices.Sort(s)
	fills := time.Duration(float64(burst) / rate * float64(time.Second))
	prev, allow := start.UnixMicro(), time.Duration(0)
	for _, c := range s {
		c = min(c, end.UnixMicro())
		if g := time.Duration(c-prev) * time.Microsecond; g > allow {
			idle += g - allow
		}
		prev, allow = c, fills
		if c == end.UnixMicro() {
			break
		}
	}
	busy := max(0, end.Sub(start)-idle)
	return burst + int(share*rate*busy.Seconds()), idle
}

// checkQuota asserts that the permits (instants in µs) keep to rate and
// burst in every window of the given lengths, with slack permits for the
// round trip between the local clock and the server's, and that in a
// window of length span starting at the first permit, at least min were
// given.
func checkQuota(t *testing.T, at []int64, rate float64, burst, slack int, windows ...time.Duration) {
	t.Helper()
	for _, w := range windows {
		limit := burst + int(rate*w.Seconds()) + slack
		if got := permitsPer(at, w); got > limit {
			t.Errorf("%d permits in a %v window; want at most burst + rate·%v (+%d slack) = %d", got, w, w, slack, limit)
		} else {
			t.Logf("%d permits at most in any %v window (limit %d)", got, w, limit)
		}
	}
}

// TestSharedRateGoroutines: eight Limiters, each with its own Redis
// client, share one quota key; together their permits keep to the rate
// and burst in every window, and the window is filled.
//
// A Limiter books ahead: takeUntil never waits, so the first Limiters to
// run can book the whole window before a late one asks. Not starving a
// user therefore means every Limiter is granted a permit when it asks,
// inside the window or after it, never that each gets one in the window:
// that would test the scheduler, not the bucket. All start together, on
// warm connections, so none has a head start from being created first.
func TestSharedRateGoroutines(t *testing.T) {
	srv := startRedis(t)
	const (
		rate   = 200.0
		burst  = 10
		n      = 8
		window = time.Second
	)
	limiters := make([]*Limiter, n)
	for i := range n {
		var opts []func(*redis.Options)
		if i%2 == 1 { // both ways of calling Redis
			opts = append(opts, heedDeadline)
		}
		c := srv.client(t, opts...)
		if err := c.Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		limiters[i] = newLimiter(t, c, Options{Rate: rate, Burst: burst, Processes: n, MaxWait: 2 * window, Timeout: patientTimeout})
	}
	var (
		mu      sync.Mutex
		all     []int64
		calls   []int64
		per     [n]int
		granted [n]bool
		wg      sync.WaitGroup
		gate    = make(chan struct{})
		end     time.Time // set before the gate opens
	)
	for i, l := range limiters {
		wg.Go(func() {
			<-gate
			at, cs, ok, err := takeUntil(l, "shared", end)
			if err != nil {
				t.Error(err)
			}
			if l.FellBack() {
				t.Errorf("limiter %d fell back", i)
			}
			mu.Lock()
			all, calls = append(all, at...), append(calls, cs...)
			per[i], granted[i] = len(at), ok
			mu.Unlock()
		})
	}
	start := time.Now()
	end = start.Add(window)
	close(gate)
	wg.Wait()
	t.Logf("%d permits in %v by limiter: %v", len(all), window, per)
	checkQuota(t, all, rate, burst, 2, 100*time.Millisecond, window)
	checkLiveness(t, all, calls, start, end, rate, burst)
	for i, ok := range granted {
		if !ok {
			t.Errorf("limiter %d was granted no permit, in the window or after it", i)
		}
	}
}

// checkLiveness asserts that the permits fill the window but for the time
// the callers left the bucket idle (livenessFloor): the floor is liveness,
// not the quota, with 10 % for the trip between the local clock, which
// times the calls, and Redis's TIME, which grants the permits.
func checkLiveness(t *testing.T, permits, calls []int64, start, end time.Time, rate float64, burst int) {
	t.Helper()
	want, idle := livenessFloor(calls, start, end, rate, burst, 0.9)
	t.Logf("%d permits, %d calls; the callers left the bucket full for %v: floor %d", len(permits), len(calls), idle.Round(time.Millisecond), want)
	if len(permits) < want {
		t.Errorf("%d permits in the %v window; want at least %d (the callers left it idle %v): the shared bucket must not starve its users", len(permits), end.Sub(start), want, idle.Round(time.Millisecond))
	}
}

// TestLivenessFloor: the floor excuses the time before the first call and
// the gaps longer than burst/rate, up to the first call at or after end,
// and never the tail of callers that all stopped early.
func TestLivenessFloor(t *testing.T) {
	start := time.UnixMicro(1_000_000)
	end := start.Add(time.Second)
	us := func(ms ...int64) []int64 {
		var out []int64
		for _, m := range ms {
			out = append(out, start.UnixMicro()+m*1000)
		}
		return out
	}
	for _, tt := range []struct {
		name  string
		calls []int64
		idle  time.Duration
	}{
		{"dense", us(0, 1, 2, 3), 0},
		{"late first call", us(200, 201), 200 * time.Millisecond},
		{"a gap under burst/rate", us(0, 40, 80), 0},
		{"a gap over burst/rate", us(0, 350), 300 * time.Millisecond},
		{"late past end", us(0, 900, 1500), 850*time.Millisecond + 50*time.Millisecond},
		{"stopped early", us(0, 1, 2), 0},
	} {
		floor, idle := livenessFloor(tt.calls, start, end, 100, 5, 1)
		if idle != tt.idle || floor != 5+int(100*(time.Second-tt.idle).Seconds()) {
			t.Errorf("%s: floor %d, idle %v; want idle %v", tt.name, floor, idle, tt.idle)
		}
	}
}

// TestSharedRateProcesses: four processes (this test binary, re-run as
// TestHelperProcess) share one quota key; together their permits keep to
// the rate and burst, and fill the window but for the time the processes
// left the bucket idle.
func TestSharedRateProcesses(t *testing.T) {
	srv := startRedis(t)
	const (
		procs  = 4
		rate   = 100.0
		burst  = 5
		window = 2 * time.Second
	)
	// The window opens once every process is ready (its limiter made and
	// its connection up): none has a head start from starting first, and
	// a process the host starts late is waited for, not counted against
	// the bucket.
	type helper struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   bytes.Buffer // stdout and stderr, complete once done is
		ready chan struct{}
		done  chan error
	}
	hs := make([]*helper, procs)
	for i := range hs {
		h := &helper{ready: make(chan struct{}), done: make(chan error, 1)}
		h.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		h.cmd.Env = append(os.Environ(),
			"CLIENTREDIS_HELPER=1",
			"CLIENTREDIS_ADDR="+srv.Addr,
			fmt.Sprintf("CLIENTREDIS_OPTIONS=%v %d %d", rate, burst, procs))
		pr, pw := io.Pipe()
		h.cmd.Stdout, h.cmd.Stderr = pw, pw
		var err error
		if h.stdin, err = h.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := h.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.cmd.Process.Kill() })
		copied := make(chan struct{})
		go func() {
			defer close(copied)
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				if sc.Text() == "ready" {
					close(h.ready)
				}
				h.out.WriteString(sc.Text() + "\n")
			}
		}()
		go func() {
			err := h.cmd.Wait()
			pw.Close()
			<-copied
			h.done <- err
		}()
		hs[i] = h
	}
	wait := time.NewTimer(60 * time.Second)
	defer wait.Stop()
	for i, h := range hs {
		select {
		case <-h.ready:
		case err := <-h.done:
			t.Fatalf("helper %d ended before it was ready: %v\n%s", i, err, h.out.String())
		case <-wait.C:
			t.Fatalf("helper %d not ready after 60 s", i)
		}
	}
	start := time.Now()
	end := start.Add(window)
	for _, h := range hs {
		fmt.Fprintln(h.stdin, end.UnixMicro())
		h.stdin.Close()
	}
	var all, calls []int64
	for i, h := range hs {
		select {
		case err := <-h.done:
			if err != nil {
				t.Fatalf("helper %d: %v\n%s", i, err, h.out.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("helper %d still running 30 s after its window opened", i)
		}
		n, granted := 0, false
		sc := bufio.NewScanner(&h.out)
		for sc.Scan() {
			granted = granted || sc.Text() == "granted"
			kind, v, _ := strings.Cut(sc.Text(), " ")
			if kind != "permit" && kind != "call" {
				continue
			}
			us, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if kind == "permit" {
				all = append(all, us)
				n++
			} else {
				calls = append(calls, us)
			}
		}
		if !granted { // see TestSharedRateGoroutines for why not n == 0
			t.Errorf("helper %d was granted no permit, in the window or after it:\n%s", i, h.out.String())
		}
		t.Logf("helper %d: %d permits", i, n)
	}
	checkQuota(t, all, rate, burst, 2, 100*time.Millisecond, window)
	checkLiveness(t, all, calls, start, end, rate, burst)
}

// TestHelperProcess is one process of TestSharedRateProcesses: once its
// limiter is made it prints "ready", reads the window's end (µs) from
// stdin, reserves permits until then and prints their instants and its
// calls'.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("CLIENTREDIS_HELPER") != "1" {
		t.Skip("a child process of TestSharedRateProcesses")
	}
	var o Options
	if _, err := fmt.Sscan(os.Getenv("CLIENTREDIS_OPTIONS"), &o.Rate, &o.Burst, &o.Processes); err != nil {
		t.Fatal(err)
	}
	o.MaxWait, o.Timeout = 10*time.Second, patientTimeout
	srv := &redisServer{Addr: os.Getenv("CLIENTREDIS_ADDR")}
	l := newLimiter(t, srv.client(t), o)
	fmt.Println("ready")
	var endUS int64
	if _, err := fmt.Fscan(os.Stdin, &endUS); err != nil {
		t.Fatalf("reading the window's end: %v", err)
	}
	at, calls, granted, err := takeUntil(l, "shared", time.UnixMicro(endUS))
	if err != nil {
		t.Fatal(err)
	}
	if l.FellBack() {
		t.Fatal("fell back")
	}
	if granted {
		fmt.Println("granted")
	}
	for _, v := range at {
		fmt.Printf("permit %d\n", v)
	}
	for _, v := range calls {
		fmt.Printf("call %d\n", v)
	}
}

// TestRedisKilled: Redis killed under load: no caller sees an error, the
// Observer is told once, keys then pace at Rate/N; a new server on the same
// address (empty, no script cached) is taken up again by a probe.
func TestRedisKilled(t *testing.T) {
	srv := startRedis(t)
	ev := &events{}
	l := newLimiter(t, srv.client(t), Options{Rate: 100, Burst: 4, Processes: 4, MaxWait: time.Hour, Timeout: patientTimeout, Observer: ev})
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		calls  int
		killed = make(chan struct{})
	)
	for range 4 {
		wg.Go(func() {
			for i := 0; i < 2000; i++ {
				if i == 1000 {
					<-killed // half the calls after the kill
				}
				if _, _, err := l.Reserve(context.Background(), "load", time.Now()); err != nil {
					t.Errorf("Reserve with Redis killed mid-run: %v", err)
					return
				}
				mu.Lock()
				calls++
				mu.Unlock()
			}
		})
	}
	// Kill once some calls have gone to Redis.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		mu.Lock()
		n := calls
		mu.Unlock()
		if n >= 100 {
			break
		}
		time.Sleep(time.Millisecond) // bounded poll of the load above
	}
	if l.FellBack() {
		t.Fatal("fell back before Redis was killed")
	}
	srv.kill()
	close(killed)
	wg.Wait()
	if !l.FellBack() {
		t.Fatal("FellBack() = false after Redis was killed")
	}
	got := ev.list()
	if len(got) != 1 || !got[0].FellBack || got[0].Err == nil || got[0].Rate != 25 {
		t.Fatalf("events %+v; want one fallback with an error, at 25/s", got)
	}
	t.Logf("fallback: %v", got[0].Err)
	fellAt := time.Now()

	// A new key paces at 100/4 = 25/s, burst 4/4 = 1.
	now := time.Now()
	for i, want := range []time.Duration{0, 40 * time.Millisecond, 80 * time.Millisecond} {
		if wait, _, err := l.Reserve(context.Background(), "fresh", now); err != nil || wait != want {
			t.Errorf("Reserve #%d on a new key after the kill = %v, %v; want %v, nil", i+1, wait, err, want)
		}
	}

	srv.restart()
	for deadline := time.Now().Add(5 * time.Second); l.FellBack() && time.Now().Before(deadline); {
		if _, _, err := l.Reserve(context.Background(), "probe", time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // bounded poll of the restarted server
	}
	if l.FellBack() {
		t.Fatal("still fallen back 5s after Redis came back")
	}
	if took := time.Since(fellAt); took > 3*ProbeInterval {
		t.Errorf("recovered %v after the fallback; want within about %v", took, ProbeInterval)
	}
	got = ev.list()
	if len(got) != 2 || got[1].FellBack || got[1].Key != "probe" {
		t.Errorf("events %+v; want the fallback, then a recovery on key probe", got)
	}
	if n, err := srv.admin(t, "EXISTS", l.Key("probe")).Int(); err != nil || n != 1 {
		t.Errorf("EXISTS %s on the new server = %d, %v; want 1: the probe's permit came from Redis", l.Key("probe"), n, err)
	}
}

// TestRedisHung: a server that holds its connections and answers nothing
// costs a call Timeout, then the Limiter falls back: with go-redis's
// defaults (its 5 s ReadTimeout, the context's deadline not heeded: the
// call runs in a goroutine of its own) and with ContextTimeoutEnabled (the
// call runs in the caller's).
func TestRedisHung(t *testing.T) {
	for _, tt := range []struct {
		name   string
		opts   []func(*redis.Options)
		inline bool
	}{
		{"defaults", nil, false},
		{"ContextTimeoutEnabled", []func(*redis.Options){heedDeadline}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := startRedis(t)
			ev := &events{}
			// The client has a connection open (a PING went through).
			l := newLimiter(t, srv.client(t, tt.opts...), Options{Rate: 100, Observer: ev})
			if l.inline != tt.inline {
				t.Errorf("calls inline: %v; want %v", l.inline, tt.inline)
			}
			srv.pause()
			t.Cleanup(srv.resume) // before the kill (cleanups run last first)
			start := time.Now()
			if _, _, err := l.Reserve(context.Background(), "k", time.Now()); err != nil {
				t.Fatalf("Reserve on a hung server: %v; want no error", err)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("Reserve on a hung server took %v; want about the %v Timeout", took, DefaultTimeout)
			}
			got := ev.list()
			if len(got) != 1 || !errors.Is(got[0].Err, context.DeadlineExceeded) {
				t.Errorf("events %+v; want one fallback for the deadline", got)
			}
		})
	}
}

// TestCancelGivesBack: a reservation given back frees its slot for the
// next caller; one whose instant has passed gives nothing back.
func TestCancelGivesBack(t *testing.T) {
	srv := startRedis(t)
	l := newLimiter(t, srv.client(t), Options{Rate: 10, Burst: 1, Timeout: patientTimeout})
	ctx := context.Background()
	reserve := func() (time.Duration, func()) {
		t.Helper()
		wait, cancel, err := l.Reserve(ctx, "k", time.Now())
		if err != nil || l.FellBack() {
			t.Fatalf("Reserve = %v, FellBack %v", err, l.FellBack())
		}
		return wait, cancel
	}
	if wait, _ := reserve(); wait != 0 {
		t.Fatalf("first Reserve waits %v; want 0 (the burst)", wait)
	}
	wait, cancel := reserve()
	if wait <= 50*time.Millisecond || wait > 100*time.Millisecond {
		t.Fatalf("second Reserve waits %v; want about 100ms", wait)
	}
	cancel()
	if again, _ := reserve(); again <= 50*time.Millisecond || again > wait {
		t.Errorf("Reserve after a cancel waits %v; want about 100ms again (≤ %v), not 200ms", again, wait)
	}
	// A give for an instant already past changes nothing.
	before, err := srv.admin(t, "HGET", l.Key("k"), "tokens").Float64()
	if err != nil {
		t.Fatal(err)
	}
	v, err := l.eval(ctx, "k", "give", "0")
	if err != nil || v[0] != 0 {
		t.Errorf("give for instant 0 = %v, %v; want [0 ...]: nothing given back", v, err)
	}
	if after, err := srv.admin(t, "HGET", l.Key("k"), "tokens").Float64(); err != nil || after > before+0.1 {
		t.Errorf("tokens %v after a late give, %v before; want no permit added (only refill)", after, before)
	}
}

// TestKeysAndTTL: the bucket's key is Prefix+key with a TTL of twice its
// refill time, at least 1 s; nothing else is written.
func TestKeysAndTTL(t *testing.T) {
	srv := startRedis(t)
	l := newLimiter(t, srv.client(t), Options{Rate: 10, Burst: 5, Prefix: "app:q:", MaxWait: time.Minute, Timeout: patientTimeout})
	ctx := context.Background()
	ttl := func() time.Duration {
		t.Helper()
		d, err := srv.admin(t, "PTTL", "app:q:api.test").Int64()
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(d) * time.Millisecond
	}
	l.Reserve(ctx, "api.test", time.Now())
	// 4 tokens left: 0.1 s to refill, twice that is under the 1 s floor.
	if d := ttl(); d <= 900*time.Millisecond || d > time.Second {
		t.Errorf("PTTL after one permit = %v; want the 1s floor", d)
	}
	for range 9 {
		l.Reserve(ctx, "api.test", time.Now())
	}
	// -5 tokens: 1 s to refill to 5, TTL 2 s.
	if d := ttl(); d <= 1800*time.Millisecond || d > 2*time.Second {
		t.Errorf("PTTL after ten permits = %v; want about 2s", d)
	}
	keys, err := srv.admin(t, "KEYS", "*").StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"app:q:api.test"}) {
		t.Errorf("keys %v; want only app:q:api.test", keys)
	}
}

// TestEvalsha: the script runs by EVALSHA; a server without it in its
// cache gets it once by EVAL.
func TestEvalsha(t *testing.T) {
	srv := startRedis(t)
	l := newLimiter(t, srv.client(t), Options{Rate: 1000, Burst: 100, Timeout: patientTimeout})
	ctx := context.Background()
	l.Reserve(ctx, "k", time.Now())
	srv.admin(t, "SCRIPT", "FLUSH")
	srv.admin(t, "CONFIG", "RESETSTAT")
	for range 10 {
		if _, _, err := l.Reserve(ctx, "k", time.Now()); err != nil || l.FellBack() {
			t.Fatalf("Reserve = %v, FellBack %v", err, l.FellBack())
		}
	}
	info, err := srv.admin(t, "INFO", "commandstats").Text()
	if err != nil {
		t.Fatal(err)
	}
	calls := func(cmd string) int {
		for line := range strings.Lines(info) {
			if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
				n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				return n
			}
		}
		return 0
	}
	if e, s := calls("eval"), calls("evalsha"); e != 1 || s != 10 {
		t.Errorf("after SCRIPT FLUSH, 10 reservations made %d EVAL and %d EVALSHA calls; want 1 and 10 (one NOSCRIPT)\n%s", e, s, info)
	}
}
