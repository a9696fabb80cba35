// The control API of serve: under ControlPrefix on serve's listener, a
// test suite in any language resets the stub between its cases and reads
// the verdict and the recording. docs/serve-api.md is its reference.

package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
)

// ControlPrefix is the path prefix reserved for the control API: a request
// under it never reaches the stub (it is not recorded, counted, throttled
// or delayed, and starts no clock).
const ControlPrefix = "/_retrylab/"

// PostedFile names a scenario posted to POST /_retrylab/reset in the
// loader's errors (posted.yaml:3:5: ...).
const PostedFile = "posted.yaml"

// MaxMemoryRecording bounds a recording the control API keeps in memory
// (serve without -o): past it, the rest of the recording is not kept,
// and /verdict and /recording answer 507 saying so.
const MaxMemoryRecording = 64 << 20

// ControlOptions configure the control API.
type ControlOptions struct {
	// AllowRemote lets peers outside loopback use it (default: 403).
	AllowRemote bool
	// Output names where ServeOptions.Record goes, for the status.
	Output string
	// Prepare turns a reset's scenario into the stub's configuration and
	// the meta record's notes (nil: its server section, ServeOptions.Notes);
	// its error answers the reset 400.
	Prepare func(sc *scenarios.Scenario) (stubserver.Config, []string, error)
	// Open opens the writer of recording n (2, 3, ... one per reset) and
	// says where it goes; the Serving closes it when the recording ends.
	// nil: recordings after the first are kept in memory only. Its error
	// answers the reset 409 and the current recording goes on.
	Open func(n int) (io.WriteCloser, string, error)
	// Verdict are the analyzer's options for GET /_retrylab/verdict.
	Verdict analyzer.Options
	// OnReset, when set, sees each new recording (its number, scenario,
	// stub and output) just before it serves.
	OnReset func(n int, sc *scenarios.Scenario, srv *stubserver.Server, where string)
}

// ServeHTTP is the front of a Serving with the control API: a request
// under ControlPrefix is the API's, any other goes to the current
// recording's stub. A request the front hands a stub is recorded in that
// recording even when a reset comes before it is answered: the reset
// waits for it (and releases a hanging or delayed one at once, as
// shutdown does); one that reaches the stub only after the reset sealed
// it is diverted back here, to the next recording's (stubserver.Options.
// Divert). The front adds a prefix check and a pointer load to a
// client's request, nothing it writes.
func (s *Serving) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; len(p) > 1 && p[1] == '_' && (strings.HasPrefix(p, ControlPrefix) || p == "/_retrylab") {
		s.control(w, r)
		return
	}
	s.cur.Load().srv.ServeHTTP(w, r)
}

// apiError is every error's answer.
type apiError struct {
	Error string `json:"error"`
}

// Status is GET /_retrylab/status's answer.
type Status struct {
	Scenario  string  `json:"scenario"`
	Recording int     `json:"recording"`
	Requests  int64   `json:"requests"` // requests recorded
	Elapsed   float64 `json:"elapsed"`  // seconds since time zero (0 before it)
	Started   bool    `json:"started"`  // time zero has come (false: first-request, none yet)
	Output    string  `json:"output,omitempty"`
}

// ResetAnswer is POST /_retrylab/reset's answer.
type ResetAnswer struct {
	Recording int    `json:"recording"`
	Scenario  string `json:"scenario"`
}

// control serves the control API.
func (s *Serving) control(w http.ResponseWriter, r *http.Request) {
	if !s.opts.Control.AllowRemote && !loopbackPeer(r.RemoteAddr) {
		writeJSON(w, http.StatusForbidden, apiError{fmt.Sprintf("the control API answers loopback peers only (%s is not one; serve --allow-remote opens it)", r.RemoteAddr)})
		return
	}
	method := http.MethodGet
	var serve func(http.ResponseWriter, *http.Request)
	switch strings.TrimPrefix(r.URL.Path, "/_retrylab") {
	case "", "/", "/status":
		serve = s.serveStatus
	case "/verdict":
		serve = s.serveVerdict
	case "/recording":
		serve = s.serveRecording
	case "/reset":
		method, serve = http.MethodPost, s.serveReset
	default:
		writeJSON(w, http.StatusNotFound, apiError{fmt.Sprintf("no %s in the control API (GET %s, GET %sstatus, GET %sverdict, GET %srecording, POST %sreset)", r.URL.Path, ControlPrefix, ControlPrefix, ControlPrefix, ControlPrefix, ControlPrefix)})
		return
	}
	if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
		allow := method
		if method == http.MethodGet {
			allow = "GET, HEAD"
		}
		w.Header().Set("Allow", allow)
		writeJSON(w, http.StatusMethodNotAllowed, apiError{fmt.Sprintf("%s %s: want %s", r.Method, r.URL.Path, allow)})
		return
	}
	serve(w, r)
}

// loopbackPeer reports whether addr (a RemoteAddr, host:port) is a
// loopback address.
func loopbackPeer(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func (s *Serving) serveStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Status())
}

// Status is the current recording's status.
func (s *Serving) Status() Status {
	g := s.cur.Load()
	st := g.srv.Stats()
	out := Status{Scenario: g.sc.Name, Recording: g.n, Requests: st.OK + st.Throttled429 + st.Unavailable503 + st.Other + st.Faults}
	if zero, ok := g.srv.Started(); ok {
		out.Started = true
		out.Elapsed = max(0, s.now().Sub(zero).Seconds())
	}
	if g.sink != nil {
		out.Output = g.sink.where
	}
	return out
}

func (s *Serving) serveVerdict(w http.ResponseWriter, r *http.Request) {
	b, status, err := s.Snapshot()
	if err != nil {
		writeJSON(w, status, apiError{err.Error()})
		return
	}
	v, err := analyzer.Analyze(bytes.NewReader(b), s.opts.Control.Verdict)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, apiError{fmt.Sprintf("analyzing the recording: %v", err)})
		return
	}
	var out bytes.Buffer
	if err := analyzer.WriteJSON(&out, v); err != nil {
		writeJSON(w, http.StatusInternalServerError, apiError{fmt.Sprintf("writing the verdict: %v", err)})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(out.Bytes())
}

func (s *Serving) serveRecording(w http.ResponseWriter, r *http.Request) {
	b, status, err := s.Snapshot()
	if err != nil {
		writeJSON(w, status, apiError{err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
}

// Snapshot is the current recording as if it ended now: its meta record,
// every attempt recorded so far, and an end record (completed, at now,
// with the host's noise measured so far: a verdict on a loaded host must
// know it, or noise would decide it). On error, status is the HTTP status
// that says why.
func (s *Serving) Snapshot() (b []byte, status int, err error) {
	for {
		g := s.cur.Load()
		b, status, again, err := s.snapshot(g)
		if !again || s.cur.Load() == g {
			return b, status, err
		}
	}
}

// snapshot is Snapshot of g; again when g ended meanwhile.
func (s *Serving) snapshot(g *generation) (b []byte, status int, again bool, err error) {
	now := s.now()
	g.recMu.Lock()
	defer g.recMu.Unlock()
	if g.sink == nil {
		return nil, http.StatusNotFound, false, errors.New("this serve records nothing")
	}
	if g.ended {
		// Reset or stopped meanwhile: the recording is whole.
		b, err := g.sink.bytes()
		if err != nil {
			return nil, http.StatusInsufficientStorage, true, err
		}
		return b, http.StatusOK, true, nil
	}
	var buf bytes.Buffer
	enc := timeline.NewEncoder(&buf)
	end := timeline.End{Reason: timeline.EndCompleted, Noise: g.meter.Peek()}
	if g.rec == nil {
		// first-request and none yet: as serve's end would write it.
		if err := enc.EncodeMeta(g.meta(s, g.listened, true)); err != nil {
			return nil, http.StatusInternalServerError, false, err
		}
		end.At = max(0, int64(now.Sub(g.listened)))
	} else {
		if g.recErr != nil {
			return nil, http.StatusInternalServerError, false, fmt.Errorf("the recording failed: %v", g.recErr)
		}
		if err := g.rec.Sync(); err != nil {
			return nil, http.StatusInternalServerError, false, fmt.Errorf("the recording failed: %v", err)
		}
		rb, err := g.sink.bytes()
		if err != nil {
			return nil, http.StatusInsufficientStorage, false, err
		}
		buf.Write(rb)
		if zero, ok := g.srv.Started(); ok {
			end.At = max(0, int64(now.Sub(zero)))
		}
	}
	if err := enc.EncodeEnd(&end); err != nil {
		return nil, http.StatusInternalServerError, false, err
	}
	if err := enc.Flush(); err != nil {
		return nil, http.StatusInternalServerError, false, err
	}
	return buf.Bytes(), http.StatusOK, false, nil
}

// yamlTypes are the Content-Types of a posted scenario.
var yamlTypes = map[string]bool{"application/yaml": true, "application/x-yaml": true, "text/yaml": true}

func (s *Serving) serveReset(w http.ResponseWriter, r *http.Request) {
	sc, status, err := resetScenario(r)
	if err != nil {
		writeJSON(w, status, apiError{err.Error()})
		return
	}
	ans, status, err := s.Reset(r.Context(), sc)
	if err != nil {
		writeJSON(w, status, apiError{err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// resetScenario is the scenario a reset asks for: a built-in named by
// ?scenario=NAME, a scenario file posted as YAML, or nil (the same
// again). On error, status is the HTTP status that says why.
func resetScenario(r *http.Request) (*scenarios.Scenario, int, error) {
	q, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	name, named := q["scenario"]
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		body, err = io.ReadAll(io.LimitReader(r.Body, scenarios.MaxFileSize+1))
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("reading the posted scenario: %v", err)
		}
		if len(body) > scenarios.MaxFileSize {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("the posted scenario is larger than %d bytes", scenarios.MaxFileSize)
		}
	}
	posted := false
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !yamlTypes[mt] {
			if len(body) > 0 {
				return nil, http.StatusUnsupportedMediaType, fmt.Errorf("Content-Type %q: post a scenario as application/yaml, application/x-yaml or text/yaml", ct)
			}
		} else {
			posted = true
		}
	} else if len(body) > 0 {
		return nil, http.StatusUnsupportedMediaType, errors.New("a posted scenario needs Content-Type: application/yaml, application/x-yaml or text/yaml")
	}
	switch {
	case named && posted:
		return nil, http.StatusBadRequest, errors.New("give ?scenario=NAME or a posted scenario, not both")
	case named:
		sc, err := scenarios.Builtin(name)
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("?scenario=%s: %v", name, strings.TrimPrefix(err.Error(), "scenarios: "))
		}
		return sc, 0, nil
	case posted:
		sc, err := scenarios.Parse(PostedFile, body)
		if err != nil {
			return nil, http.StatusBadRequest, err
		}
		return sc, 0, nil
	}
	return nil, 0, nil
}

// parseQuery reads a reset's query: scenario once at most, nothing else.
func parseQuery(raw string) (map[string]string, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("query %q: %v", raw, err)
	}
	out := map[string]string{}
	for k, vs := range q {
		if k != "scenario" {
			return nil, fmt.Errorf("query: unknown parameter %q (want scenario=NAME)", k)
		}
		if len(vs) > 1 {
			return nil, fmt.Errorf("query: %s given %d times", k, len(vs))
		}
		out[k] = vs[0]
	}
	return out, nil
}

// Reset ends the current recording (an end record: completed, now) and
// starts recording n+1 of sc (nil: the same scenario) on a fresh stub: a
// new phase clock (time zero now, or at the first request), fresh quotas,
// limiters, capacity queue and draws; the seed stays. Requests the
// current stub is handling are recorded in the current recording first:
// a hanging or delayed one is released at once, as at shutdown. On
// error the current recording goes on, and status says why.
func (s *Serving) Reset(ctx context.Context, sc *scenarios.Scenario) (ResetAnswer, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ResetAnswer{}, http.StatusServiceUnavailable, errors.New("serve is stopping")
	}
	old := s.cur.Load()
	noSource := old.noSource && sc == nil
	if sc == nil {
		sc = old.sc
	}
	cfg, notes := sc.Server, s.opts.Notes
	if sc == old.sc {
		cfg, notes = old.cfg, old.notes
	} else if p := s.opts.Control.Prepare; p != nil {
		var err error
		if cfg, notes, err = p(sc); err != nil {
			return ResetAnswer{}, http.StatusBadRequest, err
		}
	}
	n := old.n + 1
	var (
		w     io.Writer
		c     io.Closer
		where string
	)
	if open := s.opts.Control.Open; open != nil {
		wc, path, err := open(n)
		if err != nil {
			return ResetAnswer{}, http.StatusConflict, fmt.Errorf("recording %d: %v; recording %d goes on", n, err, old.n)
		}
		w, c, where = wc, wc, path
	}
	now := time.Now()
	g, err := s.newGeneration(n, sc, cfg, notes, noSource, w, now, time.Time{})
	if err != nil {
		if c != nil {
			c.Close()
		}
		return ResetAnswer{}, http.StatusBadRequest, fmt.Errorf("scenario %s: %v", sc.Name, err)
	}
	g.closer = c
	if g.sink != nil {
		g.sink.where = where
	}
	if s.measure && g.sink != nil {
		g.meter = serveMeter(g.stamps)
	}
	if s.opts.Control.OnReset != nil {
		s.opts.Control.OnReset(n, sc, g.srv, where)
	}
	s.cur.Store(g) // before Seal: a request old diverts finds g
	s.probeLocal(g)
	if err := s.retire(ctx, old, now); err != nil && s.opts.Logger != nil {
		s.opts.Logger.Warn("serve: ending a recording at a reset", "recording", old.n, "err", err)
	}
	s.past = addStats(s.past, old.srv.Stats())
	return ResetAnswer{Recording: n, Scenario: sc.Name}, http.StatusOK, nil
}

// retire ends old's recording at a reset at now, once the requests its
// stub is handling are recorded: Seal holds (diverts) new arrivals,
// releases hanging and delayed requests and waits for the rest.
func (s *Serving) retire(ctx context.Context, old *generation, now time.Time) error {
	nz := old.meter.Stop()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := old.srv.Seal(wctx)
	if eerr := old.end(s, now, timeline.End{Reason: timeline.EndCompleted, Noise: nz}); err == nil {
		err = eerr
	}
	if serr := old.srv.Shutdown(wctx); err == nil {
		err = serr
	}
	return err
}

// A sink is where a recording goes: the caller's writer, and with the
// control API what Snapshot reads back (the writer itself when it is an
// io.ReaderAt, a file; else a copy in memory, up to MaxMemoryRecording).
type sink struct {
	mu    sync.Mutex
	w     io.Writer
	ra    io.ReaderAt
	n     int64 // bytes written to w
	mem   []byte
	over  bool   // mem passed MaxMemoryRecording
	where string // where w goes, for the status
}

func newSink(w io.Writer) *sink {
	s := &sink{w: w}
	s.ra, _ = w.(io.ReaderAt)
	return s
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		n, err := s.w.Write(p)
		s.n += int64(n)
		if err != nil || s.ra != nil {
			return n, err
		}
	}
	if !s.over && len(s.mem)+len(p) <= MaxMemoryRecording {
		s.mem = append(s.mem, p...)
	} else {
		s.over, s.mem = true, nil
	}
	return len(p), nil
}

// bytes is what was written so far.
func (s *sink) bytes() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ra != nil {
		b := make([]byte, s.n)
		if _, err := s.ra.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("reading the recording back: %v", err)
		}
		return b, nil
	}
	if s.over {
		where := "pass -o FILE to serve to record it whole"
		if s.w != nil {
			where = "it is whole in " + s.where
		}
		return nil, fmt.Errorf("the recording passed %d MiB, more than the control API keeps in memory: %s, or reset more often", MaxMemoryRecording>>20, where)
	}
	return bytes.Clone(s.mem), nil
}
