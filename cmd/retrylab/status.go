package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// serveStatus draws serve's live status line on stderr: the current phase
// and the time left in it, requests by status, the 429s and 503s sent,
// and the retries judged early so far. Early is the analyzer's own rule
// (analyzer.Retry.Early: a retry that arrived more than the retry-after
// tolerance before the previous response's not_before): the attempts are
// streamed through an analyzer.Analyzer on one goroutine. It draws nothing
// when stderr is not a terminal.
type serveStatus struct {
	p      *mpb.Progress
	bar    *mpb.Bar
	srv    atomic.Pointer[stubserver.Server]
	early  atomic.Int64
	missed atomic.Int64 // attempts the analyzer could not keep up with
	feed   chan statusItem
	done   sync.WaitGroup
}

// statusItem is an attempt for the status's analyzer, or (meta set) the
// start of a new recording at a reset of the control API: a fresh
// analyzer and early count, so its requests are not taken for retries of
// the last recording's.
type statusItem struct {
	a    timeline.Attempt
	meta *timeline.Meta
}

func newServeStatus(e *env, meta *timeline.Meta) *serveStatus {
	st := &serveStatus{}
	if !e.tty {
		return st
	}
	st.feed = make(chan statusItem, 4096)
	opts := analyzer.Options{OnRetry: func(r analyzer.Retry) {
		if r.Early {
			st.early.Add(1)
		}
	}}
	an := analyzer.New(meta, opts)
	st.done.Go(func() {
		var rec timeline.Record
		rec.Type = timeline.TypeAttempt
		for it := range st.feed {
			if it.meta != nil {
				an = analyzer.New(it.meta, opts)
				st.early.Store(0)
				st.missed.Store(0)
				continue
			}
			rec.Attempt = it.a
			an.Add(&rec)
		}
	})
	st.p = mpb.New(mpb.WithOutput(e.stderr), mpb.WithAutoRefresh(), mpb.WithRefreshRate(250*time.Millisecond))
	st.bar = st.p.New(0, mpb.NopStyle(), mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return st.line(time.Now()) })))
	return st
}

// onAttempt is stubserver.Options.OnAttempt: it copies the attempt to the
// analyzer's goroutine without waiting (one it cannot take is counted).
func (st *serveStatus) onAttempt(a *timeline.Attempt) {
	if st.feed == nil {
		return
	}
	select {
	case st.feed <- statusItem{a: *a}:
	default:
		st.missed.Add(1)
	}
}

// reset starts judging a new recording, described by meta, once the
// attempts of the last one queued before are judged; srv is its stub.
func (st *serveStatus) reset(srv *stubserver.Server, meta *timeline.Meta) {
	st.srv.Store(srv)
	if st.feed != nil {
		st.feed <- statusItem{meta: meta}
	}
}

// line is the status at now.
func (st *serveStatus) line(now time.Time) string {
	srv := st.srv.Load()
	if srv == nil {
		return "starting"
	}
	phase := "before the first request"
	if start, ok := srv.Started(); ok {
		at := int64(now.Sub(start))
		for _, ph := range srv.Phases() {
			if ph.End == 0 || at < ph.End {
				phase = ph.Name
				if ph.End > 0 {
					phase += fmt.Sprintf(" %v left", time.Duration(ph.End-at).Round(time.Second))
				}
				break
			}
		}
	}
	s := srv.Stats()
	early := fmt.Sprint(st.early.Load())
	if m := st.missed.Load(); m > 0 {
		early += fmt.Sprintf(" (%d unjudged)", m)
	}
	return fmt.Sprintf("%s · %d req · 2xx %d · 429 %d · 503 %d · other %d · fault %d · early %s",
		phase, s.Attempts, s.OK, s.Throttled429, s.Unavailable503, s.Other, s.Faults, early)
}

// finish draws the last frame and stops the analyzer's goroutine; call it
// once the server has stopped handing attempts.
func (st *serveStatus) finish() {
	if st.p == nil {
		return
	}
	close(st.feed)
	st.done.Wait()
	st.bar.Abort(false)
	st.p.Wait()
}
