package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrylab/retrylab/internal/loghist"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

// DefaultReadyTimeout bounds the start barrier of an exec fleet whose
// RunOptions.ReadyTimeout is zero.
const DefaultReadyTimeout = 60 * time.Second

// An exec fleet (subjects.Program) runs one process per simulated client,
// or, with fleet.processes N below fleet.clients, N processes, process p
// playing clients p, p+N, p+2N… (scenarios.Fleet.ProcessOf) through
// subjects.Program.RunClients. Interpreters take seconds to start
// (BENCHMARKS.md, "exec: many clients per process"), so the runner starts
// every process first and opens
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
	prog     subjects.Program // its Timeout set (see startPrograms)
	requests int              // per process
	timeout  time.Duration    // fleet.timeout: the watchdog is requests × timeout
	// readyWait bounds the start barrier (RunOptions.ReadyTimeout or
	// DefaultReadyTimeout).
	readyWait time.Duration
	gate      *gateListener
	// stamps is what the stub saw of each logical request: its outcome's
	// start, and how late its result line was read (see programOutcomes).
	stamps *requestStamps
	// readerLag: for each result line, how long after the stub answered
	// its request's latest attempt the runner read it (End.Noise's
	// ReaderP90, ReaderP99). Written by programOutcomes alone.
	readerLag *loghist.Hist
	clients   int           // fleet.clients
	multi     bool          // a process plays several clients (RunClients)
	ready     []atomic.Bool // by process
	nReady    atomic.Int64
	allReady  chan struct{}
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

// process is one program run: one client's, or with fleet.processes,
// several clients'.
type process struct {
	index   int   // the process's number, 0 … len(procs)-1
	clients []int // the clients it plays, in increasing order
	lines   []subjects.ProgramLine
	err     error
	ended   time.Time
	done    chan struct{} // closed when the fields above are set
	sent    atomic.Bool   // the stub saw a request from one of its clients
	// lateAtBarrier: the start barrier timed out before this process was
	// ready, and opened without it.
	lateAtBarrier atomic.Bool
}

// errWatchdog is the cause a process is killed with when its requests ×
// the fleet timeout have passed since the barrier.
var errWatchdog = errors.New("the fleet watchdog (requests × the fleet timeout) passed")

// startPrograms starts every process (they cannot be answered until the
// barrier: the gate holds their connections) and returns the fleet.
func (r *runner) startPrograms(ctx context.Context, prog subjects.Program, l net.Listener) *programFleet {
	n, nproc := r.sc.Fleet.Clients, r.sc.Fleet.ProcessCount()
	readyWait := r.opts.ReadyTimeout
	if readyWait <= 0 {
		readyWait = DefaultReadyTimeout
	}
	requests, timeout := r.sc.Fleet.Requests, r.sc.Fleet.Timeout
	prog.Timeout = programTimeout(prog.Timeout, readyWait, timeout*time.Duration(requests))
	pf := &programFleet{prog: prog, requests: requests, timeout: timeout, readyWait: readyWait,
		clients: n, multi: nproc < n, ready: make([]atomic.Bool, nproc),
		allReady: make(chan struct{}), opened: make(chan struct{}), procs: make([]*process, nproc),
		stamps: newRequestStamps(n, requests), readerLag: loghist.New(latenessLayout)}
	pf.ctx, pf.cancel = context.WithCancelCause(ctx)
	for i := range nproc {
		pf.procs[i] = &process{index: i, done: make(chan struct{})}
	}
	for id := range n {
		p := pf.procs[r.sc.Fleet.ProcessOf(id)]
		p.clients = append(p.clients, id)
	}
	var keys map[string]int // a client may be told by its API key alone
	if len(r.sc.Fleet.APIKeys) > 0 {
		keys = make(map[string]int, n)
		for id := range n {
			keys[r.sc.Fleet.APIKey(id)] = id
		}
	}
	pf.gate = newGate(l, pf.sent, n, keys)
	prefix := strings.TrimSuffix(r.base+stubserver.RequestPath(0, 0), "0/r/0") // …/c/
	for i, p := range pf.procs {
		pf.wg.Add(1)
		go func() {
			defer pf.wg.Done()
			ready := func() { pf.markReady(i) }
			if pf.multi {
				p.lines, p.err = prog.RunClients(pf.ctx, prefix, p.clients, requests, apiKeysEnv(&r.sc.Fleet, p.clients), ready)
			} else {
				id := p.clients[0]
				var env []string
				if key := r.sc.Fleet.APIKey(id); key != "" {
					env = []string{"RETRYLAB_API_KEY=" + key}
				}
				p.lines, p.err = prog.RunReady(pf.ctx, prefix+strconv.Itoa(id), id, requests, env, ready)
			}
			p.ended = time.Now()
			close(p.done)
			// A process that exits before the barrier does not hold it up;
			// one that exits after it never was ready (FleetReady).
			select {
			case <-pf.opened:
			default:
				pf.markReady(i)
			}
		}()
	}
	return pf
}

// apiKeysEnv is a multi-client process's RETRYLAB_API_KEYS: its clients'
// API keys, comma-separated in the order of RETRYLAB_CLIENTS (a key holds
// no comma), or nothing when the scenario gives none.
func apiKeysEnv(f *scenarios.Fleet, clients []int) []string {
	if len(f.APIKeys) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("RETRYLAB_API_KEYS=")
	for i, id := range clients {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.APIKey(id))
	}
	return []string{b.String()}
}

// programTimeout is the Timeout a fleet's Program runs with: its own when
// set, else one that fires only after the barrier's wait and the watchdog
// (subjects.DefaultProgramTimeout, 5 minutes, could kill a process before
// a longer watchdog, and the outcome would blame the wrong bound).
func programTimeout(own, readyWait, watchdog time.Duration) time.Duration {
	if own > 0 {
		return own
	}
	return readyWait + watchdog + time.Minute
}

// sent notes that client id's request reached the stub: its process is
// ready.
func (pf *programFleet) sent(id int) {
	if id < 0 || id >= pf.clients {
		return
	}
	i := id % len(pf.procs) // scenarios.Fleet.ProcessOf
	pf.procs[i].sent.Store(true)
	pf.markReady(i)
}

// markReady notes that process i is ready.
func (pf *programFleet) markReady(i int) {
	if pf.ready[i].Swap(true) {
		return
	}
	pf.lastAt.Store(time.Now().UnixNano())
	if pf.nReady.Add(1) == int64(len(pf.procs)) {
		close(pf.allReady)
	}
}

// open waits for the barrier (every process ready, ctx ended, or the ready
// timeout) and is called with r.start unset; it sets it and lets the held
// requests through.
func (pf *programFleet) open(r *runner) {
	t := time.NewTimer(pf.readyWait)
	select {
	case <-pf.allReady:
	case <-t.C:
		late := 0
		for id, p := range pf.procs {
			if !pf.ready[id].Load() {
				p.lateAtBarrier.Store(true)
				late++
			}
		}
		if late > 0 { // else every process got ready just now
			r.harnessError(fmt.Sprintf("start barrier: %d of %d exec processes were not ready (no \"ready\" line, no request, not exited) within its %v timeout; it opened without them", late, len(pf.procs), pf.readyWait))
		}
	case <-pf.ctx.Done():
	}
	t.Stop()
	r.start = time.Now()
	pf.readyAt = 1
	close(pf.opened)
	pf.gate.open()
	watchdog := time.AfterFunc(pf.timeout*time.Duration(pf.requests), func() { pf.cancel(errWatchdog) })
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
	for _, p := range pf.procs {
		select {
		case <-p.done:
			r.programOutcomes(pf, p, runCtx.Err() != nil)
		default:
			// Still running past the grace: its requests were in flight
			// and get no outcome.
			r.dropped.Add(int64(r.sc.Fleet.Requests * len(p.clients)))
		}
	}
	pf.cancel(nil)
}

// allReadyNow reports whether every process has got ready.
func (pf *programFleet) allReadyNow() bool { return pf.nReady.Load() == int64(len(pf.procs)) }

// abortPrograms kills the processes of a run that could not start.
func (r *runner) abortPrograms(pf *programFleet) {
	if pf == nil {
		return
	}
	pf.cancel(errors.New("the run could not start"))
	pf.gate.open()
	pf.wg.Wait()
}

// programOutcomes records one outcome per logical request of each
// client of process p: from its result lines, else from what happened to
// the process (fault judges it; runStopped: the run stopped before every
// process ended, so a process killed then was cut short, not hung). A
// process that broke the exec contract is the plumbing's failure, not the
// library's: its outcomes are Harness, and the end record gets one
// plumbing error per distinct text. docs/exec.md states the rules.
//
// Each outcome is stamped from the evidence of its own request (see
// stampProcess), not with the process's start and exit.
func (r *runner) programOutcomes(pf *programFleet, p *process, runStopped bool) {
	r.recordOutcomes(pf, p, runStopped, pf.stampProcess)
}

// stamper stamps the outcomes of a process (programFleet.stampProcess;
// BenchmarkExecOutcomes measures it against the stamps it replaced).
type stamper func(r *runner, p *process, kept []keptLine, exited int64) [][]stamp

// keptLine is a result line kept for an outcome: of the client
// p.clients[client], for its request seq, read at read.
type keptLine struct {
	client, seq int
	read        time.Time
}

// recordOutcomes is programOutcomes, its outcomes stamped by stamp.
func (r *runner) recordOutcomes(pf *programFleet, p *process, runStopped bool, stamp stamper) {
	sc := r.sc
	exited := max(0, p.ended.Sub(r.start).Nanoseconds())
	pos := make(map[int]int, len(p.clients)) // client → its index in p.clients
	for j, id := range p.clients {
		pos[id] = j
	}
	bySeq := make([][]*subjects.ProgramLine, len(p.clients))
	printed := make([]int, len(p.clients))
	total := 0
	for j := range bySeq {
		bySeq[j] = make([]*subjects.ProgramLine, sc.Fleet.Requests)
	}
	kept := make([]keptLine, 0, len(p.lines)) // in the order they were read
	for i := range p.lines {
		j, ok := 0, true
		if pf.multi {
			j, ok = pos[p.lines[i].Client()]
		}
		if seq := p.lines[i].Seq(); ok && seq >= 0 && seq < sc.Fleet.Requests && bySeq[j][seq] == nil {
			bySeq[j][seq] = &p.lines[i]
			printed[j]++
			total++
			kept = append(kept, keptLine{client: j, seq: seq, read: p.lines[i].Read})
		}
	}
	stamps := stamp(r, p, kept, exited)
	prefix := "exec " + pf.prog.Path + ": "
	whole := pf.multi && pf.brokeProcess(p)
	if pf.multi {
		prefix = fmt.Sprintf("exec %s (process %d of %d, %s): ", pf.prog.Path, p.index, len(pf.procs), plural(len(p.clients), "client"))
	}
	for j, id := range p.clients {
		clientID := strconv.Itoa(id)
		u := unit{requests: sc.Fleet.Requests * len(p.clients), printed: total, sent: p.sent.Load(),
			req: func(seq int) string { return "/r/" + strconv.Itoa(seq) }}
		if pf.multi {
			u.req = func(seq int) string { return "/c/" + clientID + "/r/" + strconv.Itoa(seq) }
			if !whole {
				u.requests, u.printed, u.client = sc.Fleet.Requests, printed[j], true
			}
		}
		f := pf.fault(p, u, runStopped)
		for seq, l := range bySeq[j] {
			o := timeline.Outcome{Client: clientID}
			o.Key, o.Start, o.End = stamps[j][seq].key, stamps[j][seq].start, stamps[j][seq].end
			// The program keeps its own schedule: no fleet schedule to
			// be late against (the probe measures how late it ran).
			o.Scheduled = o.Start
			switch {
			case l != nil:
				o.Result = l.Result()
				if !l.OK {
					o.Error = l.Reason
				}
				if f.harness {
					o.Harness, o.Error = true, prefix+f.summary+reasonSuffix(l)
				}
			default:
				o.Result, o.Error = f.missing(seq)
				o.Error = prefix + o.Error
				o.Harness = f.harness
			}
			r.finish(&o)
		}
		if f.harness {
			r.plumbingError(prefix + f.summary)
		}
	}
}

// stamp is one outcome's key and instants (ns since time zero).
type stamp struct {
	key        string
	start, end int64
}

// stampProcess stamps the outcomes of process p, whose kept result lines
// are kept (in the order they were read) and which exited at exited (ns
// since time zero):
//
//   - End is the instant the runner read the request's result line (the
//     library's call had returned by then; how much later the read came
//     is measured, see programFleet.readerLag); a request without a line
//     ends when the process exited (or was killed), or at its client's
//     last line read after that.
//   - Start is the arrival of the request's first attempt at the stub.
//     The client began it a little earlier (its own send, the loopback),
//     so a duration is short by that much, never long. A request the stub
//     saw no attempt of has no evidence of its start: it starts at the
//     read of its client's previous result line (a client's requests
//     follow each other), else at time zero — the latest instant it can
//     have begun, so a duration made up for lack of evidence is never
//     longer than the request's, and cannot fail budget by itself.
//   - A start later than the end (a line printed before the request was
//     sent: a claim the analyzer checks against the stub's records) is
//     the end.
//
// A line read before time zero (before the start barrier) is at time
// zero. The key is the one the stub recorded the request's attempts
// under (requestStamps).
func (pf *programFleet) stampProcess(r *runner, p *process, kept []keptLine, exited int64) [][]stamp {
	n := pf.requests
	seen := make([]seenRequest, len(p.clients)*n)
	pf.stamps.fill(p.clients, seen)
	flat := make([]stamp, len(p.clients)*n)
	for i := range flat {
		flat[i].end = -1 // not stamped yet
	}
	prev := make([]int64, len(p.clients)) // each client's previous line's read
	for _, k := range kept {
		i, s := k.client*n+k.seq, &seen[k.client*n+k.seq]
		end := max(0, k.read.Sub(r.start).Nanoseconds())
		start := prev[k.client]
		if s.hasFirst {
			start = s.first
		}
		flat[i] = stamp{start: min(start, end), end: end}
		if s.hasAnswered && end >= s.answered {
			pf.readerLag.Add(end - s.answered)
		}
		prev[k.client] = max(prev[k.client], end)
	}
	out := make([][]stamp, len(p.clients))
	for j, id := range p.clients {
		out[j] = flat[j*n : (j+1)*n]
		for seq := range out[j] {
			st, s := &out[j][seq], &seen[j*n+seq]
			st.key = s.key(id, seq)
			if st.end >= 0 {
				continue
			}
			// No line: it ended with the process.
			st.end = max(exited, prev[j])
			st.start = prev[j]
			if s.hasFirst {
				st.start = s.first
			}
			st.start = min(st.start, st.end)
		}
	}
	return out
}

// brokeProcess reports whether process p broke the contract as a whole:
// it could not start, broke the line protocol, could not be read, or
// ended other than by exit status 0 or the fleet's kill.
func (pf *programFleet) brokeProcess(p *process) bool {
	var perr *subjects.ProgramError
	if !errors.As(p.err, &perr) {
		return p.err != nil
	}
	return perr.Start != nil || perr.Output != nil || perr.Read != nil ||
		perr.Killed == nil && (perr.ExitCode != 0 || perr.Wait != nil)
}

// unit is what fault judges: a whole process, or one client of a process
// that plays several.
type unit struct {
	requests int  // the result lines it owes
	printed  int  // those it printed
	sent     bool // the stub saw a request from the process
	// client: one client of a process that plays several; the texts say
	// "this client's" lines and "the process" made a request.
	client bool
	req    func(seq int) string // names request seq: /r/K, or /c/C/r/K
}

// plural says "1 request", "2 requests".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func reasonSuffix(l *subjects.ProgramLine) string {
	if l.OK || l.Reason == "" {
		return ""
	}
	return "; its line's reason: " + l.Reason
}

// processResult is what one process's run says about its outcomes.
type processResult struct {
	// harness: the process broke the contract; every outcome is Harness
	// and summary says how (it goes to the end record).
	harness bool
	summary string
	// missing gives the result and the error (without the "exec PATH: "
	// prefix) of a request the process printed no line for.
	missing func(seq int) (result, msg string)
}

// fault judges one ended process, or one client u of it: whether it broke
// the exec contract (harness, with summary saying how) and what each
// request it printed no line for gets (missing). The texts are the
// contract's, listed in docs/exec.md ("Broken contract: harness
// outcomes", and per client under "Many clients per process").
func (pf *programFleet) fault(p *process, u unit, runStopped bool) processResult {
	var perr *subjects.ProgramError
	errors.As(p.err, &perr)
	if perr == nil && p.err != nil { // not expected: Run returns only *ProgramError
		perr = &subjects.ProgramError{Read: p.err}
	}
	requests, printed := u.requests, u.printed
	whose, forIt, it := "its", "", "it"
	if u.client {
		whose, forIt, it = "this client's", " for this client", "the process"
	}
	var res processResult
	fromSummary := false // res.missing quotes res.summary
	stderr := ""         // quoted last in the texts of an exit or a signal
	plumbing := func(summary string) {
		res.harness, res.summary, fromSummary = true, summary, true
		res.missing = func(seq int) (string, string) {
			s := strings.TrimSuffix(res.summary, stderr)
			return timeline.ResultError, fmt.Sprintf("%s; no result line for %s%s", s, u.req(seq), stderr)
		}
	}
	if perr != nil && (perr.ExitCode != 0 || perr.Wait != nil) && perr.Killed == nil {
		if tail := strings.TrimSpace(perr.Stderr); tail != "" {
			stderr = "; stderr: " + lastLine(tail)
		}
	}
	printedWhat := func() string {
		switch {
		case printed == requests:
			return "after printing all " + whose + " result lines"
		case printed == 0:
			return "without printing a result line" + forIt
		}
		return fmt.Sprintf("after printing %d of %s %s", printed, whose, plural(requests, "result line"))
	}
	killed := perr != nil && perr.Killed != nil
	watchdog := killed && errors.Is(perr.Killed, errWatchdog)
	switch {
	case perr == nil && printed == requests:
		// Clean: exit status 0, one line per request.
	case perr != nil && perr.Start != nil:
		plumbing("could not start the program: " + perr.Start.Error())
	case perr != nil && perr.Output != nil:
		plumbing("the program broke the line protocol: stdout " + perr.Output.Error())
	case perr != nil && perr.Read != nil:
		plumbing("reading the program's stdout failed: " + perr.Read.Error())
	case killed && runStopped && !watchdog:
		res.missing = func(seq int) (string, string) {
			return timeline.ResultCanceled, fmt.Sprintf("the run stopped (%v) before the program printed a result line for %s", perr.Killed, u.req(seq))
		}
	case killed:
		bound := fmt.Sprintf("the fleet watchdog (%s × fleet.timeout %v = %v after the start barrier)",
			plural(pf.requests, "request"), pf.timeout, pf.timeout*time.Duration(pf.requests))
		if !watchdog {
			bound = fmt.Sprintf("the exec program's own timeout (%v after it started)", pf.prog.Timeout)
		}
		if printed == 0 && !u.sent {
			res.harness = true
			res.summary = "the program printed no result line" + forIt + " within " + bound + " and made no request at all"
			res.missing = func(seq int) (string, string) {
				return timeline.ResultHung, fmt.Sprintf("the program printed no result line for %s within %s and made no request at all", u.req(seq), bound)
			}
			break
		}
		did := it + " had made a request"
		if !u.sent {
			did = "it had printed " + plural(printed, "result line") + forIt
		}
		res.missing = func(seq int) (string, string) {
			return timeline.ResultHung, fmt.Sprintf("the program printed no result line for %s within %s; %s, so its library is taken to have hung", u.req(seq), bound, did)
		}
	case perr != nil && perr.ExitCode > 0:
		plumbing(fmt.Sprintf("the program exited with status %d %s%s", perr.ExitCode, printedWhat(), stderr))
	case perr != nil && perr.ExitCode < 0:
		plumbing(fmt.Sprintf("the program was ended by a signal (%v) %s%s", perr.Wait, printedWhat(), stderr))
	case perr != nil && perr.Wait != nil:
		plumbing(fmt.Sprintf("the program exited with status 0 %s, but a process it started kept its stdout or stderr open over 1s after it exited (%v)%s", printedWhat(), perr.Wait, stderr))
	default:
		plumbing(fmt.Sprintf("the program exited with status 0 %s", printedWhat()))
	}
	if p.lateAtBarrier.Load() {
		note := fmt.Sprintf("the program was not ready at the start barrier, which opened without it after its %v timeout: its requests ran late against the scenario", pf.readyWait)
		either := fmt.Sprintf("; it was not ready at the start barrier either (timeout %v)", pf.readyWait)
		switch {
		case res.missing == nil:
			plumbing(note)
		case fromSummary:
			res.summary = strings.TrimSuffix(res.summary, stderr) + either + stderr
		default:
			if res.harness {
				res.summary += either
			} else {
				res.harness, res.summary = true, note
			}
			missing := res.missing
			res.missing = func(seq int) (string, string) {
				result, msg := missing(seq)
				return result, msg + either
			}
		}
	}
	if res.missing == nil {
		res.missing = func(seq int) (string, string) { // not reached: a clean process printed every line
			return timeline.ResultError, "no result line for " + u.req(seq)
		}
	}
	return res
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

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// gateListener holds the connections of an exec fleet until the barrier,
// and notes, for every connection, the client whose first request it
// carries (every identity the stub accepts, and the fleet's API keys: see
// clientOfHead), so that a first request makes its process ready.
type gateListener struct {
	net.Listener
	sent    func(client int)
	clients int            // fleet.clients
	keys    map[string]int // the fleet's API keys, to their clients
	conns   chan net.Conn
	opened  chan struct{}
	once    sync.Once
	closed  chan struct{}
	cOnce   sync.Once
	mu      sync.Mutex
	held    map[net.Conn]struct{}
}

func newGate(l net.Listener, sent func(int), clients int, keys map[string]int) *gateListener {
	g := &gateListener{Listener: l, sent: sent, clients: clients, keys: keys, conns: make(chan net.Conn),
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
	if id, ok := clientOfHead(peekHead(c), g.clients, g.keys); ok {
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

// clientOfHead is the fleet's client whose request head h is (as
// peekHead returns it: maybe cut short), identified as the stub will
// (stubserver.IdentifyClient: the path's /c/{client}/, else X-Client-Id),
// else by its API key (keys: each of the fleet's keys to its client);
// false when it names none of the fleet's clients 0 … clients-1.
func clientOfHead(h []byte, clients int, keys map[string]int) (int, bool) {
	if req, _ := h2Head(h); req != nil {
		return clientOfRequest(req, clients, keys)
	}
	if !bytes.Contains(h, []byte("\n\n")) && !bytes.Contains(h, []byte("\n\r\n")) {
		// Cut short: its whole lines, then the end of the head.
		i := bytes.LastIndexByte(h, '\n')
		if i < 0 {
			return 0, false
		}
		h = append(h[:i+1:i+1], "\r\n"...)
	}
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(h)))
	if err != nil {
		return 0, false
	}
	return clientOfRequest(req, clients, keys)
}

// clientOfRequest is clientOfHead's client of a parsed request head.
func clientOfRequest(req *http.Request, clients int, keys map[string]int) (int, bool) {
	if id := canonicalID(stubserver.IdentifyClient(req)); id >= 0 && id < clients {
		return id, true
	}
	if key := stubserver.APIKey(req); key != "" {
		id, ok := keys[key]
		return id, ok
	}
	return 0, false
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
