package noise

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// ProbeArg, as a process's first argument, asks it to be a noise probe:
// `retrylab __noise-probe PERIOD` (cmd/retrylab's main, or the TestMain
// of a test binary that runs meters with a probe, calls ProbeMain). The
// Meter starts Options.Probe with the period (a Go duration) appended.
const ProbeArg = "__noise-probe"

// probeWait is how long Stop waits for the report of a probe that said it
// was ready; probeStartWait for one that had not yet (a probe started
// late, on a loaded host, may still be starting: it reports a period
// after it runs).
const (
	probeWait      = 2 * time.Second
	probeStartWait = 10 * time.Second
)

// probeMaxLife ends a probe whose parent neither closed its stdin nor
// signaled it (stdin's end comes when the parent dies, so only a parent
// that leaks the pipe and lives on reaches it).
const probeMaxLife = 24 * time.Hour

// ProbeMain is a probe process's main, for the process whose arguments
// after ProbeArg are args (the period): it runs the sleep loop, in the
// kernel on a thread of its own, writes "ready" on a line to stdout after
// its first wake-up, and when stdin ends or SIGTERM comes writes its
// report (a line of JSON) and returns the exit status: 0, 1 when the
// report could not be written, 2 for arguments that are not a positive
// period. SIGINT, which a terminal sends the whole process group, is
// ignored: the parent decides when the probe stops. It changes the
// process's signal handling, so only a main may call it.
func ProbeMain(args []string, stdin io.Reader, stdout io.Writer) int {
	if len(args) != 1 {
		return 2
	}
	period, err := time.ParseDuration(args[0])
	if err != nil || period <= 0 {
		return 2
	}
	signal.Ignore(os.Interrupt)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	defer signal.Stop(term)
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		io.Copy(io.Discard, stdin)
		once.Do(func() { close(stop) })
	}()
	go func() {
		<-term
		once.Do(func() { close(stop) })
	}()
	if err := runProbe(period, stop, stdout); err != nil {
		return 1
	}
	return 0
}

// probeReport is the probe's one line on stdout: its lateness, ns.
type probeReport struct {
	Samples int64 `json:"samples"`
	P50     int64 `json:"p50"`
	P90     int64 `json:"p90"`
	P99     int64 `json:"p99"`
	Max     int64 `json:"max"`
}

// runProbe runs the sleep loop until stop (or probeMaxLife) and writes its
// report to out.
func runProbe(period time.Duration, stop <-chan struct{}, out io.Writer) error {
	first := make(chan struct{})
	s := startSleeper(period, inKernel, 1, first)
	life := time.NewTimer(probeMaxLife)
	defer life.Stop()
	for done := false; !done; {
		select {
		case <-first:
			first = nil
			if _, err := io.WriteString(out, probeReady+"\n"); err != nil {
				s.halt()
				return err
			}
		case <-stop:
			done = true
		case <-life.C:
			done = true
		}
	}
	s.halt() // the nap under way is measured: a probe stopped early has its sample
	var rep probeReport
	if src, ok := histSource(timeline.NoiseProbe, s.hist); ok {
		rep = probeReport{Samples: src.samples, P50: src.p50, P90: src.p90, P99: src.p99, Max: src.max}
		if first != nil { // stopped before it said it was ready: it is now
			if _, err := io.WriteString(out, probeReady+"\n"); err != nil {
				return err
			}
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	_, err = out.Write(append(b, '\n'))
	return err
}

// probeReady is the probe's first line, once it has a sample.
const probeReady = "ready"

// parseProbe reads a probe's output: the ready line, then its report; false
// when the output is not that, the report holds no sample, or its
// quantiles are out of order.
func parseProbe(b []byte) (source, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(probeReady+"\n"))
	if !ok {
		return source{}, false
	}
	var rep probeReport
	if err := json.Unmarshal(rest, &rep); err != nil {
		return source{}, false
	}
	if rep.Samples <= 0 || rep.P50 < 0 || rep.P50 > rep.P90 || rep.P90 > rep.P99 || rep.P99 > rep.Max {
		return source{}, false
	}
	return source{name: timeline.NoiseProbe, p50: rep.P50, p90: rep.P90, p99: rep.P99, max: rep.Max, samples: rep.Samples}, true
}

// probe is a running probe process, seen from its parent.
type probe struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	out    capped
	waited chan error
}

// newProbe starts the command argv, with the period appended, as a
// probe; ready, when not nil, is closed when the probe says it is ready.
func newProbe(argv []string, period time.Duration, ready chan struct{}) (*probe, error) {
	if len(argv) == 0 {
		return nil, errors.New("noise: no probe command")
	}
	p := &probe{waited: make(chan error, 1), out: capped{max: 4 << 10, ready: ready}}
	p.cmd = exec.Command(argv[0], append(slices.Clip(argv[1:]), period.String())...)
	p.cmd.Stdout = &p.out
	p.cmd.WaitDelay = time.Second
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	p.stdin = stdin
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.waited <- p.cmd.Wait() }()
	return p, nil
}

// wait is how long stop should wait for the probe's report: probeWait,
// or probeStartWait before it said it was ready.
func (p *probe) wait() time.Duration {
	if p.out.sawLine() {
		return probeWait
	}
	return probeStartWait
}

// stop closes the probe's stdin and waits up to wait for its report; nil
// when it did not give one (it is then killed).
func (p *probe) stop(wait time.Duration) *source {
	p.stdin.Close()
	t := time.NewTimer(wait)
	defer t.Stop()
	var err error
	select {
	case err = <-p.waited:
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.waited
		return nil
	}
	if err != nil {
		return nil
	}
	s, ok := parseProbe(p.out.bytes())
	if !ok {
		return nil
	}
	return &s
}

// capped keeps the first max bytes written to it (the probe's output is
// two short lines). When ready is not nil it is closed at the first
// line's end.
type capped struct {
	mu    sync.Mutex
	max   int
	b     []byte
	ready chan struct{}
}

// sawLine says whether a whole line was written.
func (c *capped) sawLine() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.IndexByte(c.b, '\n') >= 0
}

var errCapped = errors.New("noise: probe output too long")

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.b)+len(p) > c.max {
		return 0, errCapped
	}
	c.b = append(c.b, p...)
	if c.ready != nil && bytes.IndexByte(c.b, '\n') >= 0 {
		close(c.ready)
		c.ready = nil
	}
	return len(p), nil
}

func (c *capped) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b
}
