// One simulated client: its requests in sequence, each on a reusable
// worker goroutine under the watchdog (the fleet's timeout).

package runner

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
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
// between them, each under the watchdog.
//
// The caller runs on a worker goroutine that the client reuses from one
// request to the next (its stack is grown once), so that the client can
// walk away from a call that never returns: it then cancels that call's
// context, abandons the worker and starts a new one for its next request.
//
// caller is the shared instance of the client's process
// (fleet.processes), whose every logical request then carries a draw
// source of its own (requestRand); nil: the client makes its own
// instance, as one process of its own, drawing from its Params.Rand.
func (r *runner) client(ctx context.Context, id int, at time.Duration, caller subjects.Caller) {
	sc := r.sc
	shared := caller != nil
	if !shared {
		caller = r.subj.New(r.next, r.harnessParams(sc.SubjectParams(id, rand.New(rand.NewPCG(uint64(r.opts.Seed), uint64(id))), r.opts.Virtual)))
	}
	clientID := strconv.Itoa(id)
	apiKey := sc.Fleet.APIKey(id)
	scheduled := int64(at)
	var w *worker
	defer func() {
		if w != nil {
			w.stop()
		}
	}()
	var sleep *time.Timer
	for seq := range sc.Fleet.Requests {
		if d := time.Duration(scheduled - r.since()); d > 0 {
			if sleep == nil {
				sleep = time.NewTimer(d)
			} else {
				sleep.Reset(d)
			}
			select {
			case <-ctx.Done():
				return
			case <-sleep.C:
			}
		}
		if ctx.Err() != nil || r.sealed.Load() {
			return
		}
		out := timeline.Outcome{
			Client:    clientID,
			Key:       clientID + "/" + strconv.Itoa(seq),
			Scheduled: scheduled,
			Start:     r.since(),
		}
		r.late.Add(out.Start - out.Scheduled)
		slot := &r.slots[r.slotOf(id)]
		if !slot.begin(&out) {
			return
		}
		if w == nil {
			w = r.newWorker(ctx, caller)
		}
		res, ok := w.call(r.withRequestRand(w.callCtx, shared, id, seq), r, r.base+stubserver.RequestPath(id, seq), apiKey)
		if !ok {
			w.abandon()
			w = nil
		}
		out.End, out.Result, out.Status, out.Attempts, out.Error = res.end, res.result, res.status, res.attempts, res.err
		if out.Result == timeline.ResultCanceled && ctx.Err() != nil {
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

// worker runs one client's calls on a long-lived goroutine.
type worker struct {
	ctx      context.Context // the run's context
	callCtx  context.Context // this worker's calls' context, canceled when abandoned
	cancel   context.CancelFunc
	caller   subjects.Caller
	jobs     chan *http.Request
	results  chan result
	watchdog *time.Timer
}

func (r *runner) newWorker(ctx context.Context, caller subjects.Caller) *worker {
	w := &worker{ctx: ctx, caller: caller, jobs: make(chan *http.Request), results: make(chan result, 1)}
	w.callCtx, w.cancel = context.WithCancel(ctx)
	go func() {
		for req := range w.jobs {
			resp, err := w.caller(req.Context(), req)
			end := r.since()
			res, status, attempts := subjects.Classify(resp, err)
			out := result{result: res, status: status, attempts: attempts, end: end}
			if err != nil {
				out.err = err.Error()
				out.shed = res == timeline.ResultGaveUp && subjects.ShedByRetryBudget(err)
			}
			if resp != nil {
				io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
			}
			w.results <- out
		}
	}()
	return w
}

// stop ends an idle worker.
func (w *worker) stop() {
	close(w.jobs)
	w.cancel()
	if w.watchdog != nil {
		w.watchdog.Stop()
	}
}

// abandon leaves a worker whose call has not returned: its context is
// canceled, and it exits when the call returns.
func (w *worker) abandon() { w.stop() }

// call makes one logical request under the watchdog, with apiKey as its
// Bearer token unless "", in ctx (the worker's callCtx, or a context of
// it). ok is false when the call did not return (hung, or the run
// stopped): the worker is then busy and must be abandoned.
func (w *worker) call(ctx context.Context, r *runner, url, apiKey string) (res result, ok bool) {
	sc := r.sc
	var body io.Reader
	if sc.Fleet.Method != http.MethodGet && sc.Fleet.Method != http.MethodHead {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequestWithContext(ctx, sc.Fleet.Method, url, body)
	if err != nil {
		return result{result: timeline.ResultError, err: err.Error(), end: r.since()}, true
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	w.jobs <- req
	if w.watchdog == nil {
		w.watchdog = time.NewTimer(sc.Fleet.Timeout)
	} else {
		w.watchdog.Reset(sc.Fleet.Timeout)
	}
	select {
	case res := <-w.results:
		w.watchdog.Stop()
		if w.ctx.Err() != nil && res.result != timeline.ResultOK {
			// The run's stop, not the library, ended this call.
			return result{result: timeline.ResultCanceled, end: res.end, err: "the run stopped"}, true
		}
		return res, true
	case <-w.watchdog.C:
		return result{result: timeline.ResultHung, end: r.since(),
			err: fmt.Sprintf("no result within the fleet timeout %v", sc.Fleet.Timeout)}, false
	case <-w.ctx.Done():
		w.watchdog.Stop()
		w.cancel()
		// The run stopped (seal has recorded this request canceled).
		return result{result: timeline.ResultCanceled, end: r.since(), err: "the run stopped"}, false
	}
}

// harnessParams adds the harness's own to a subject's Params: its dial
// to the stub, and the context that ends when the run no longer needs
// the instance.
func (r *runner) harnessParams(p subjects.Params) subjects.Params {
	p.Dial, p.Run = r.dial, r.subjRun
	return p
}
