package stubserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Begin starts the run's clock at start unless it has started (see
// Options.StartOnFirstRequest), and returns time zero. A Server started on
// its first request that never got one can be begun by its owner at
// shutdown, so its recording still gets its meta record.
func (s *Server) Begin(start time.Time) time.Time {
	if s.started.Load() {
		return s.start
	}
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if !s.started.Load() {
		s.start = start
		s.startWall = start.Round(0)
		if s.openRecorder != nil {
			s.rec = s.openRecorder(start)
		}
		s.started.Store(true)
	}
	return s.start
}

// Started reports time zero, and whether the clock has started.
func (s *Server) Started() (time.Time, bool) {
	if !s.started.Load() {
		return time.Time{}, false
	}
	return s.start, true
}

// Serve accepts connections on l with a hardened http.Server
// (ReadHeaderTimeout, IdleTimeout, MaxHeaderBytes) until Shutdown, then
// returns nil; other errors are returned as they are. Serve may be called
// for several listeners.
func (s *Server) Serve(l net.Listener) error {
	if s.front != nil {
		return s.front.Serve(l)
	}
	err := s.httpSrv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops the server gracefully: it releases hanging and delayed
// requests, stops accepting, waits for active requests to finish (or ctx to
// end), and returns. After it returns nil every answered request has been
// handed to the Recorder; the caller then closes the Recorder.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.closeOnce.Do(func() { close(s.closing) })
	// http.Server.Shutdown waits 5s for a connection that was opened but
	// never used (a client's spare keep-alive connection): close those now.
	s.fresh.CloseAll()
	var err error
	if s.front != nil {
		err = gracefulStop(ctx, s.front)
	} else {
		err = s.httpSrv.Shutdown(ctx)
	}
	if err == nil {
		err = s.waitHandlers(ctx)
	}
	s.proxy.closeIdle()
	if err != nil {
		return fmt.Errorf("stubserver: shutdown: %w", err)
	}
	return nil
}

// waitHandlers waits until no request is being handled (one held after
// Hold does not count), or ctx ends.
func (s *Server) waitHandlers(ctx context.Context) error {
	for s.inflight.Load() > 0 {
		select {
		case <-s.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Hold makes the server hold every request that arrives from now on,
// unrecorded and uncounted, until its client gives up or Shutdown or Close
// ends it with a 503 (or hands it to Options.Divert); requests already
// being handled go on as before.
// Seal begins with it; a caller holds first when it must stop its clients
// from being answered before it releases the hanging requests.
func (s *Server) Hold() { s.sealed.Store(true) }

// hold answers a request the server holds (Hold, HoldFrom): without a
// record (a client answered at once would retry at once, and keep the CPU
// busy while its run's timeline is judged), when the client gives up or
// the server closes.
func (s *Server) hold(w http.ResponseWriter, r *http.Request) {
	if s.divert != nil && s.sealed.Load() {
		s.divert.ServeHTTP(w, r)
		return
	}
	select {
	case <-r.Context().Done():
	case <-s.closing:
	}
	w.Header()["Connection"] = connClose
	w.WriteHeader(http.StatusServiceUnavailable)
}

// HoldFrom makes the server hold, as Hold does, every request that
// arrives at or after run instant at (time since Options.Start), whenever
// its handler runs. A run that knows its cap says so at its start: a
// request arriving at the very instant the run stops is then never part
// of it, whether its handler or the caller's Hold runs first (in virtual
// time both happen at one instant, in any order).
func (s *Server) HoldFrom(at time.Duration) { s.holdFrom.Store(int64(at)) }

// Seal stops the recording: it holds every new request (Hold), releases
// hanging and delayed requests, and waits for the requests being handled
// to hand their records to the Recorder (or ctx to end). The caller may
// close the Recorder once Seal returns nil, while connections still wind
// down: a run that stopped at its cap writes its timeline whole first,
// then calls Shutdown or Close.
func (s *Server) Seal(ctx context.Context) error {
	s.Hold()
	s.stopOnce.Do(func() { close(s.stopping) })
	if err := s.waitHandlers(ctx); err != nil {
		return fmt.Errorf("stubserver: seal: %w", err)
	}
	return nil
}

// Close stops the server at once: it releases hanging, delayed and held
// requests, closes the listeners and every connection without waiting for
// them to go idle, then waits for the handlers still running to hand their
// records to the Recorder (or ctx to end). A request cut off this way
// before Seal is recorded abandoned, as for a client that went away. The
// runner tears a run down this way once its timeline is written: a
// graceful Shutdown would wait, polling, for thousands of connections to
// wind down one by one.
func (s *Server) Close(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.closeOnce.Do(func() { close(s.closing) })
	var err error
	if s.front != nil {
		s.front.Stop()
	} else {
		err = s.httpSrv.Close()
	}
	if err == nil {
		err = s.waitHandlers(ctx)
	}
	s.proxy.closeIdle()
	if err != nil {
		return fmt.Errorf("stubserver: close: %w", err)
	}
	return nil
}

// connState is the http.Server's ConnState: see FreshConns.
func (s *Server) connState(c net.Conn, st http.ConnState) { s.fresh.Track(c, st, s.stopping) }

// awaitStart holds a request that arrived d before time zero (Options.Start
// in the future) until then; false when its client left or the server
// stopped first.
func (s *Server) awaitStart(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-s.stopping:
	}
	return false
}

// handled ends a request begun in ServeHTTP, waking Shutdown when it was
// the last.
func (s *Server) handled() {
	if s.inflight.Add(-1) == 0 {
		select {
		case <-s.stopping:
			select {
			case s.idle <- struct{}{}:
			default:
			}
		default:
		}
	}
}
