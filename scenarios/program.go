package scenarios

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

// DefaultReadyTimeout bounds the start barrier of an exec fleet whose
// RunOptions.ReadyTimeout is zero.
const DefaultReadyTimeout = 60 * time.Second

// An exec fleet (subjects.Program) runs one process per simulated client.
// Interpreters take seconds to start (100 Node or Python processes took
// 7-47 s on 2 cores), so the runner starts every process first and opens
// the scenario — time zero, when the stub's phase clock starts — only when
// all are ready: the start barrier. A process is ready when it prints
// subjects.ReadyLine, when its first request reaches the stub (a request
// that arrives before the barrier is held, unread, until the barrier), or
// when it exits; past RunOptions.ReadyTimeout the barrier opens anyway and
// End.FleetReady says when the last process got ready.
//
// Every process then has requests × the fleet timeout, counted from the
// barrier, before the watchdog kills it. The fleet's start schedule does
// not apply: every process starts before time zero.
type programFleet struct {
	prog     subjects.Program
	gate     *gateListener
	clients  int
	ready    []atomic.Bool
	nReady   atomic.Int64
	allReady chan struct{}
	// readyAt is End.FleetReady: ns since time zero when the last process
	// got ready, at least 1 (0 means unknown).
	readyAt int64
	lastAt  atomic.Int64 // unix ns of the last readiness

	ctx    context.Context // the processes' context
	cancel context.CancelCauseFunc
	opened chan struct{} // closed at the barrier
	wg     sync.WaitGroup
	procs  []*process
}

// process is one client's program run.
type process struct {
	started time.Time
	lines   []subjects.ProgramLine
	err     error
	ended   time.Time
	done    chan struct{} // closed when the fields above are set
	sent    atomic.Bool   // the stub saw a request from this client
}

// errWatchdog is the cause a process is killed with when its requests ×
// the fleet timeout have passed since the barrier.
var errWatchdog = errors.New("the fleet watchdog (requests × the fleet timeout) passed")

// startPrograms starts every process (they cannot be answered until the
// barrier: the gate holds their connections) and returns the fleet.
func (r *runner) startPrograms(ctx context.Context, prog subjects.Program, l net.Listener) *programFleet {
	n := r.sc.Fleet.Clients
	pf := &programFleet{prog: prog, clients: n, ready: make([]atomic.Bool, n),
		allReady: make(chan struct{}), opened: make(chan struct{}), procs: make([]*process, n)}
	pf.ctx, pf.cancel = context.WithCancelCause(ctx)
	for id := range n {
		pf.procs[id] = &process{done: make(chan struct{})}
	}
	pf.gate = newGate(l, pf.sent)
	base := strings.TrimSuffix(r.base+stubserver.RequestPath(0, 0), "/c/0/r/0")
	for id, p := range pf.procs {
		p.started = time.Now()
		pf.wg.Add(1)
		go func() {
			defer pf.wg.Done()
			url := base + strings.TrimSuffix(stubserver.RequestPath(id, 0), "/r/0")
			var env []string
			if key := r.sc.Fleet.APIKey(id); key != "" {
				env = []string{"RETRYLAB_API_KEY=" + key}
			}
			p.lines, p.err = prog.RunReady(pf.ctx, url, id, r.sc.Fleet.Requests, env, func() { pf.markReady(id) })
			p.ended = time.Now()
			close(p.done)
			// A process that exits before the barrier does not hold it up;
			// one that exits after it never was ready (FleetReady).
			select {
			case <-pf.opened:
			default:
				pf.markReady(id)
			}
		}()
	}
	return pf
}

// sent notes that client id's request reached the stub.
func (pf *programFleet) sent(id int) {
	if id < 0 || id >= pf.clients {
		return
	}
	pf.procs[id].sent.Store(true)
	pf.markReady(id)
}

func (pf *programFleet) markReady(id int) {
	if pf.ready[id].Swap(true) {
		return
	}
	pf.lastAt.Store(time.Now().UnixNano())
	if pf.nReady.Add(1) == int64(pf.clients) {
		close(pf.allReady)
	}
}

// open waits for the barrier (every process ready, ctx ended, or the ready
// timeout) and is called with r.start unset; it sets it and lets the held
// requests through.
func (pf *programFleet) open(r *runner) {
	wait := r.opts.ReadyTimeout
	if wait <= 0 {
		wait = DefaultReadyTimeout
	}
	t := time.NewTimer(wait)
	select {
	case <-pf.allReady:
	case <-t.C:
		r.harnessError(fmt.Sprintf("start barrier: %d of %d exec processes were not ready after %v", int64(pf.clients)-pf.nReady.Load(), pf.clients, wait))
	case <-pf.ctx.Done():
	}
	t.Stop()
	r.start = time.Now()
	pf.readyAt = 1
	close(pf.opened)
	pf.gate.open()
	timeout := r.sc.Fleet.Timeout * time.Duration(r.sc.Fleet.Requests)
	watchdog := time.AfterFunc(timeout, func() { pf.cancel(errWatchdog) })
	go func() {
		<-pf.ctx.Done()
		watchdog.Stop()
	}()
}

// wait waits for every process (killing them when runCtx ends) and turns
// their output into outcomes.
func (pf *programFleet) wait(runCtx context.Context, r *runner) {
	stop := context.AfterFunc(runCtx, func() { pf.cancel(context.Cause(runCtx)) })
	defer stop()
	done := make(chan struct{})
	go func() {
		pf.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-runCtx.Done():
		// Killed processes die at once; their pipes are closed within
		// exec's WaitDelay (1 s).
		t := time.NewTimer(fleetGrace + time.Second)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	if pf.allReadyNow() {
		pf.readyAt = max(1, pf.lastAt.Load()-r.start.UnixNano())
	} else {
		pf.readyAt = 0 // some process never got ready: unknown
	}
	for id, p := range pf.procs {
		select {
		case <-p.done:
			r.programOutcomes(pf, id, p, runCtx.Err() != nil)
		default:
			// Still running past the grace: its requests were in flight
			// and get no outcome.
			r.dropped.Add(int64(r.sc.Fleet.Requests))
		}
	}
	pf.cancel(nil)
}

// allReadyNow reports whether every process has got ready.
func (pf *programFleet) allReadyNow() bool { return pf.nReady.Load() == int64(pf.clients) }

// abortPrograms kills the processes of a run that could not start.
func (r *runner) abortPrograms(pf *programFleet) {
	if pf == nil {
		return
	}
	pf.cancel(errors.New("the run could not start"))
	pf.gate.open()
	pf.wg.Wait()
}

// programOutcomes records one outcome per logical request of client id:
// from its result lines, else from what happened to the process. A
// failure of the plumbing (the program could not start, broke the line
// protocol, exited non-zero, printed nothing for a request) is marked
// Harness: it says nothing about the library's retry logic.
//
// runStopped says the run stopped (cap, signal, write error) before every
// process ended: a process killed then, not by the fleet watchdog, was cut
// short by the run and its missing requests are canceled.
func (r *runner) programOutcomes(pf *programFleet, id int, p *process, runStopped bool) {
	sc := r.sc
	clientID := strconv.Itoa(id)
	start := max(0, p.started.Sub(r.start).Nanoseconds())
	end := max(start, p.ended.Sub(r.start).Nanoseconds())
	seen := make([]bool, sc.Fleet.Requests)
	for _, l := range p.lines {
		seq := l.Seq()
		if seq < 0 || seq >= len(seen) || seen[seq] {
			continue
		}
		seen[seq] = true
		o := timeline.Outcome{Client: clientID, Key: clientID + "/" + strconv.Itoa(seq),
			Start: start, End: end, Result: l.Result()}
		if !l.OK {
			o.Error = l.Reason
		}
		r.finish(&o)
	}
	var perr *subjects.ProgramError
	errors.As(p.err, &perr)
	killed := perr != nil && perr.Killed != nil
	plumbing := ""
	for seq, ok := range seen {
		if ok {
			continue
		}
		o := timeline.Outcome{Client: clientID, Key: clientID + "/" + strconv.Itoa(seq),
			Start: start, End: end, Result: timeline.ResultError}
		switch {
		case killed && runStopped && !errors.Is(perr.Killed, errWatchdog):
			o.Result, o.Error = timeline.ResultCanceled, "the run stopped"
		case perr != nil && perr.Start != nil:
			o.Error, o.Harness = "exec "+pf.prog.Path+": could not start: "+perr.Start.Error(), true
		case perr != nil && perr.Output != nil:
			o.Error, o.Harness = "exec "+pf.prog.Path+": broke the line protocol: "+protocolFault(perr), true
		case killed:
			// The watchdog: a process that sent requests and never
			// finished them is the library hanging (budget judges it); one
			// that printed nothing and sent nothing is plumbing.
			o.Result = timeline.ResultHung
			o.Error = fmt.Sprintf("exec %s: no result line within requests × the fleet timeout (%v)", pf.prog.Path, sc.Fleet.Timeout*time.Duration(sc.Fleet.Requests))
			if len(p.lines) == 0 && !p.sent.Load() {
				o.Harness = true
				o.Error += "; it printed nothing and sent no request"
			}
		case perr != nil && perr.ExitCode != 0:
			o.Error, o.Harness = fmt.Sprintf("exec %s: exited with status %d", pf.prog.Path, perr.ExitCode), true
			if tail := strings.TrimSpace(perr.Stderr); tail != "" {
				o.Error += "; stderr: " + lastLine(tail)
			}
		case perr != nil && perr.Read != nil:
			o.Error, o.Harness = "exec "+pf.prog.Path+": reading its output: "+perr.Read.Error(), true
		default:
			o.Error, o.Harness = fmt.Sprintf("exec %s: printed no result line for r/%d", pf.prog.Path, seq), true
		}
		if o.Harness && plumbing == "" {
			plumbing = o.Error
		}
		r.finish(&o)
	}
	if plumbing != "" {
		r.plumbingError(plumbing)
	}
}

// plumbingError records one subject plumbing failure in words, once per
// distinct text (client ids aside).
func (r *runner) plumbingError(msg string) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if r.plumbingSeen == nil {
		r.plumbingSeen = map[string]bool{}
	}
	if r.plumbingSeen[msg] || len(r.plumbingSeen) >= 20 {
		return
	}
	r.plumbingSeen[msg] = true
	r.harnessErrs = append(r.harnessErrs, "subject plumbing: "+msg)
}

func protocolFault(e *subjects.ProgramError) string {
	if e.BadLine != "" {
		return strconv.Quote(e.BadLine)
	}
	return e.Output.Error()
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// gateListener holds the connections of an exec fleet until the barrier,
// and notes, for every connection, the client whose first request it
// carries (from the request line's /c/{client}/ path), so that a first
// request makes its process ready.
type gateListener struct {
	net.Listener
	sent   func(client int)
	conns  chan net.Conn
	opened chan struct{}
	once   sync.Once
	closed chan struct{}
	cOnce  sync.Once
	mu     sync.Mutex
	held   map[net.Conn]struct{}
}

func newGate(l net.Listener, sent func(int)) *gateListener {
	g := &gateListener{Listener: l, sent: sent, conns: make(chan net.Conn),
		opened: make(chan struct{}), closed: make(chan struct{}), held: map[net.Conn]struct{}{}}
	go g.acceptLoop()
	return g
}

func (g *gateListener) acceptLoop() {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-g.closed:
				return
			case <-time.After(5 * time.Millisecond): // EMFILE: let descriptors free up
			}
			continue
		}
		g.track(c, true)
		go g.peek(c)
	}
}

func (g *gateListener) track(c net.Conn, add bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if add {
		g.held[c] = struct{}{}
	} else {
		delete(g.held, c)
	}
}

// peek notes the client of the connection's first request (without
// consuming it) and hands the connection to Accept once the gate is open.
func (g *gateListener) peek(c net.Conn) {
	if id, ok := clientOfRequestLine(peekRequestLine(c)); ok {
		g.sent(id)
	}
	select {
	case <-g.opened:
	case <-g.closed:
		c.Close()
		return
	}
	select {
	case g.conns <- c:
		g.track(c, false)
	case <-g.closed:
		c.Close()
	}
}

// clientOfRequestLine parses "GET /c/17/r/0 HTTP/1.1".
func clientOfRequestLine(s string) (int, bool) {
	_, rest, ok := strings.Cut(s, " ")
	if !ok {
		return 0, false
	}
	path, _, _ := strings.Cut(rest, " ")
	if i := strings.Index(path, "://"); i >= 0 { // absolute form
		j := strings.IndexByte(path[i+3:], '/')
		if j < 0 {
			return 0, false
		}
		path = path[i+3+j:]
	}
	tail, ok := strings.CutPrefix(path, "/c/")
	if !ok {
		return 0, false
	}
	id, _, _ := strings.Cut(tail, "/")
	n, err := strconv.Atoi(id)
	return n, err == nil
}

func (g *gateListener) open() { g.once.Do(func() { close(g.opened) }) }

func (g *gateListener) Accept() (net.Conn, error) {
	select {
	case c := <-g.conns:
		return c, nil
	case <-g.closed:
		return nil, net.ErrClosed
	}
}

func (g *gateListener) Close() error {
	var err error
	g.cOnce.Do(func() {
		close(g.closed)
		err = g.Listener.Close()
		g.mu.Lock()
		for c := range g.held {
			c.Close()
		}
		g.mu.Unlock()
	})
	return err
}
