// Progress reports while a run lasts.

package runner

import (
	"time"
)

// progress starts the progress reporter; the returned func stops it after
// a last report.
func (r *runner) progress() (stop func()) {
	if r.opts.Progress == nil {
		return func() {}
	}
	every := r.opts.ProgressEvery
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				r.opts.Progress(r.snapshot())
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
		r.opts.Progress(r.snapshot())
	}
}

func (r *runner) snapshot() Progress {
	st := r.stubStats()
	return Progress{Done: r.done.Load(), Total: r.total, Attempts: st.Attempts,
		Throttled429: st.Throttled429, Unavailable503: st.Unavailable503, Elapsed: time.Since(r.start)}
}
