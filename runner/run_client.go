// One simulated client: its requests in sequence, each under the
// watchdog (the fleet's timeout).

package runner

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

// result is what one call of a Caller came to.
type result struct {
	result   string
	status   int
	attempts int
	err      string
	end      int64
	shed     bool // the subject's retry budget ended it (subjects.ShedByRetryBudget)
}

// client plays one simulated client: requests in sequence, think time
// between them, each under the watchdog (the fleet's timeout). done is
// called once the client has ended (the fleet's WaitGroup).
//
// The client's goroutine makes each call itself: no hand-over to another
// goroutine and back per request. If a call has not returned when the
// watchdog fires, the watchdog's own goroutine claims it, records it
// hung, cancels its context, and carries on with the client's next
// requests; the goroutine stuck in the call exits when (if) the call
// returns, recording nothing (see clientRun.call).
//
// caller is the shared instance of the client's process
// (fleet.processes), whose every logical request then carries a draw
// source of its own (requestRand); nil: the client makes its own
// instance, as one process of its own, drawing from its Params.Rand.
func (r *runner) client(ctx context.Context, id int, at time.Duration, caller subjects.Caller, done func()) {
	sc := r.sc
	c := &clientRun{r: r, ctx: ctx, id: id, caller: caller, shared: caller != nil, done: done,
		clientID: strconv.Itoa(id), apiKey: sc.Fleet.APIKey(id)}
	if !c.shared {
		c.caller = r.subj.New(r.next, r.harnessParams(sc.SubjectParams(id, rand.New(rand.NewPCG(uint64(r.opts.Seed), uint64(id))), r.opts.Virtual)))
	}
	c.run(0, int64(at))
}

// clientRun is one client's state that outlives the goroutine running it
// (a call that hangs leaves the rest of the client to the watchdog's).
type clientRun struct {
	r                *runner
	ctx              context.Context // the run's
	id               int
	caller           subjects.Caller
	shared           bool
	clientID, apiKey string
	done             func()
}

// run makes the client's requests from seq on, the first scheduled at
// scheduled, then calls done; unless a call hangs, when the watchdog
// goes on from the next request and the goroutine stuck returns.
func (c *clientRun) run(seq int, scheduled int64) {
	r, sc := c.r, c.r.sc
	// The calls' context, canceled when this goroutine leaves a hung call
	// or the client ends.
	callCtx, cancel := context.WithCancel(c.ctx)
	var sleep *time.Timer
	g := &callGuard{}
	defer func() {
		if !g.left {
			cancel()
			if g.watchdog != nil {
				g.watchdog.Stop()
			}
			c.done()
		}
	}()
	for ; seq < sc.Fleet.Requests; seq++ {
		if d := time.Duration(scheduled - r.since()); d > 0 {
			if sleep == nil {
				sleep = time.NewTimer(d)
			} else {
				sleep.Reset(d)
			}
			select {
			case <-c.ctx.Done():
				return
			case <-sleep.C:
			}
		}
		if c.ctx.Err() != nil || r.sealed.Load() {
			return
		}
		out := timeline.Outcome{
			Client:    c.clientID,
			Key:       c.clientID + "/" + strconv.Itoa(seq),
			Scheduled: scheduled,
			Start:     r.since(),
		}
		r.late.Add(out.Start - out.Scheduled)
		slot := &r.slots[r.slotOf(c.id)]
		if !slot.begin(&out) {
			return
		}
		res, ok := c.call(g, cancel, out, seq, r.withRequestRand(callCtx, c.shared, c.id, seq))
		if !ok {
			g.left = true // the watchdog has the client now
			return
		}
		out.End, out.Result, out.Status, out.Attempts, out.Error = res.end, res.result, res.status, res.attempts, res.err
		if out.Result == timeline.ResultCanceled && c.ctx.Err() != nil {
			// The run stopped: the slot stays active and seal records it
			// canceled. Writing it here would queue up to 100,000 outcomes
			// on the recorder at once, and seal would wait for them.
			return
		}
		if !slot.end(r, &out) {
			return // the run stopped: seal recorded it canceled
		}
		if res.shed && out.Result == timeline.ResultGaveUp {
			r.shed.Add(1)
		}
		scheduled = out.End + int64(sc.Fleet.Think)
	}
}

// callGuard decides, for one goroutine's calls, whether a call's end is
// the goroutine's (it returned) or the watchdog's (it did not in time).
type callGuard struct {
	// armed is the call in flight's start (r.since()) + 1; 0 when none is
	// in flight, -1 once the watchdog has taken one.
	armed    atomic.Int64
	watchdog *time.Timer // fires watch; made at the first call
	// pending is the call in flight's outcome so far, its seq and cancel,
	// for the watchdog: written before armed is set, read by the
	// watchdog only once it has taken the call.
	pending timeline.Outcome
	seq     int
	cancel  context.CancelFunc
	// left: this goroutine left a hung call to the watchdog (run's).
	left bool
	body io.LimitedReader // drains an answer's body; made once
}

// call makes one logical request with ctx under the watchdog. ok is false
// when the watchdog took it (it did not return within the fleet's
// timeout): the watchdog has recorded it and goes on with the client,
// and the caller must return at once.
func (c *clientRun) call(g *callGuard, cancel context.CancelFunc, out timeline.Outcome, seq int, ctx context.Context) (res result, ok bool) {
	r, sc := c.r, c.r.sc
	req, err := c.newRequest(ctx, r.base+stubserver.RequestPath(c.id, seq))
	if err != nil {
		return result{result: timeline.ResultError, err: err.Error(), end: r.since()}, true
	}
	g.pending, g.seq, g.cancel = out, seq, cancel
	armed := out.Start + 1
	g.armed.Store(armed)
	if g.watchdog == nil {
		g.watchdog = time.AfterFunc(sc.Fleet.Timeout, func() { c.watch(g) })
	} else {
		g.watchdog.Reset(sc.Fleet.Timeout)
	}
	resp, err := c.caller(ctx, req)
	res.end = r.since()
	res.result, res.status, res.attempts = subjects.Classify(resp, err)
	if err != nil {
		res.err = err.Error()
		res.shed = res.result == timeline.ResultGaveUp && subjects.ShedByRetryBudget(err)
	}
	if resp != nil {
		g.body = io.LimitedReader{R: resp.Body, N: 1 << 20}
		io.Copy(io.Discard, &g.body)
		g.body.R = nil
		resp.Body.Close()
	}
	if !g.armed.CompareAndSwap(armed, 0) {
		return result{}, false // the watchdog took it
	}
	g.watchdog.Stop()
	if c.ctx.Err() != nil && res.result != timeline.ResultOK {
		// The run's stop, not the library, ended this call.
		return result{result: timeline.ResultCanceled, end: res.end, err: "the run stopped"}, true
	}
	return res, true
}

// watch is the watchdog: it takes the call in flight if it has run the
// fleet's timeout, records it hung, cancels it, and plays the rest of
// the client on this goroutine. A firing for a call that has returned,
// or that started less than a timeout ago (a firing meant for an earlier
// call, left over from a Stop too late), does nothing.
func (c *clientRun) watch(g *callGuard) {
	r, sc := c.r, c.r.sc
	v := g.armed.Load()
	if v <= 0 || time.Duration(r.since()-(v-1)) < sc.Fleet.Timeout || !g.armed.CompareAndSwap(v, -1) {
		return
	}
	g.cancel()
	if c.ctx.Err() != nil {
		// The run stopped: seal has recorded this request canceled, and
		// the client ends.
		c.done()
		return
	}
	out := g.pending
	out.End, out.Result = r.since(), timeline.ResultHung
	out.Error = fmt.Sprintf("no result within the fleet timeout %v", sc.Fleet.Timeout)
	if !r.slots[r.slotOf(c.id)].end(r, &out) {
		c.done() // the run stopped: seal recorded it canceled
		return
	}
	c.run(g.seq+1, out.End+int64(sc.Fleet.Think))
}

// newRequest is a logical request's first request, with apiKey as its
// Bearer token unless "".
func (c *clientRun) newRequest(ctx context.Context, url string) (*http.Request, error) {
	method := c.r.sc.Fleet.Method
	var body io.Reader
	if method != http.MethodGet && method != http.MethodHead {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	return req, nil
}

// harnessParams adds the harness's own to a subject's Params: its dial
// to the stub, and the context that ends when the run no longer needs
// the instance.
func (r *runner) harnessParams(p subjects.Params) subjects.Params {
	p.Dial, p.Run = r.dial, r.subjRun
	return p
}
