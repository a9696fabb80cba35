package stubserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"
)

// TestSeal: Seal waits for the requests being handled to hand over their
// records (a delayed one is released, not waited out), after which the
// Recorder can be closed while requests still arrive: they are held,
// unrecorded and uncounted, until Close answers them 503.
func TestSeal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Phases: []Phase{{Name: "slow", Latency: time.Hour, Respond: Respond{Kind: RespondOK}}}}, 1)
		serve := func(path string) chan *httptest.ResponseRecorder {
			done := make(chan *httptest.ResponseRecorder, 1)
			go func() {
				w := httptest.NewRecorder()
				h.s.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
				done <- w
			}()
			return done
		}
		before := serve("/c/1/r/1")
		synctest.Wait() // held in its hour of latency
		start := time.Now()
		if err := h.s.Seal(context.Background()); err != nil {
			t.Fatalf("Seal() = %v", err)
		}
		if el := time.Since(start); el != 0 {
			t.Errorf("Seal took %v; want it to release the delayed request at once", el)
		}
		if w := <-before; w.Code != http.StatusOK {
			t.Errorf("request before Seal answered %d; want 200", w.Code)
		}
		as := h.attempts() // closes the Recorder: Seal handed it back
		if len(as) != 1 || as[0].Key != "1/1" || as[0].Status != http.StatusOK {
			t.Fatalf("records = %+v; want the one request made before Seal", as)
		}

		after := serve("/c/2/r/1")
		synctest.Wait()
		select {
		case w := <-after:
			t.Fatalf("request after Seal answered %d at once; want it held", w.Code)
		default:
		}
		if err := h.s.Close(context.Background()); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		if w := <-after; w.Code != http.StatusServiceUnavailable || w.Header().Get("Connection") != "close" {
			t.Errorf("request after Seal answered %d, Connection %q; want 503 and close once the server closes", w.Code, w.Header().Get("Connection"))
		}
		if st := h.s.Stats(); st.Attempts != 1 || st.Unavailable503 != 0 {
			t.Errorf("Stats() = %+v; want the 1 request before Seal counted, none after", st)
		}
	})
}

// TestSealReleasedByClient: a request held after Seal ends when its client
// gives up, without waiting for Close.
func TestSealReleasedByClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, 1)
		if err := h.s.Seal(context.Background()); err != nil {
			t.Fatalf("Seal() = %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		w := httptest.NewRecorder()
		h.s.ServeHTTP(w, httptest.NewRequest("GET", "/c/1/r/1", nil).WithContext(ctx))
		if el := time.Since(start); el != 3*time.Second {
			t.Errorf("held %v; want until the client's 3s timeout", el)
		}
		if as := h.attempts(); len(as) != 0 {
			t.Errorf("records = %+v; want none after Seal", as)
		}
	})
}

// TestHold: Hold holds new requests but leaves the one being handled (a
// hang) alone; Seal then releases the hang, which is recorded, and the
// held request stays unrecorded.
func TestHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{Phases: []Phase{{Name: "down", Respond: Respond{Kind: RespondFault, Fault: FaultHang}}}}, 1)
		serve := func(path string) chan struct{} {
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer func() { recover() }() // a hang ends by aborting the handler
				h.s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
			}()
			return done
		}
		hanging := serve("/c/1/r/1")
		synctest.Wait()
		h.s.Hold()
		held := serve("/c/2/r/1")
		synctest.Wait()
		for name, ch := range map[string]chan struct{}{"the hang": hanging, "the request after Hold": held} {
			select {
			case <-ch:
				t.Errorf("%s ended on Hold; want it still waiting", name)
			default:
			}
		}
		if err := h.s.Seal(context.Background()); err != nil {
			t.Fatalf("Seal() = %v", err)
		}
		<-hanging
		as := h.attempts()
		if len(as) != 1 || as[0].Key != "1/1" || as[0].Fault != FaultHang {
			t.Fatalf("records = %+v; want only the released hang", as)
		}
		if err := h.s.Close(context.Background()); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		<-held
	})
}

// TestSealDiverts: with Options.Divert, a request that arrives once Seal
// has begun is handed to it at once, unrecorded and uncounted here;
// before Seal the stub answers it.
func TestSealDiverts(t *testing.T) {
	diverted := 0
	s, err := New(Config{Phases: []Phase{{Name: "down", Respond: Respond{Kind: RespondStatus, Status: 503}}}}, Options{
		Divert: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			diverted++
			w.WriteHeader(http.StatusTeapot)
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	serve := func() int {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "/c/1/r/1", nil))
		return w.Code
	}
	if code := serve(); code != http.StatusServiceUnavailable || diverted != 0 {
		t.Fatalf("before Seal: %d, %d diverted; want 503 from the stub", code, diverted)
	}
	if err := s.Seal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := serve(); code != http.StatusTeapot || diverted != 1 {
		t.Errorf("after Seal: %d, %d diverted; want the Divert handler's 418", code, diverted)
	}
	if st := s.Stats(); st.Attempts != 1 {
		t.Errorf("stats %+v; want the one request before Seal", st)
	}
	s.Close(context.Background())
}
