package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/timeline"
)

// ctlScenario answers 503 for an hour: every client request is recorded.
const ctlScenario = "name: ctl\nserver: {phases: [{name: down, for: 1h, respond: {status: 503}}]}\n"

// closingBuffer is a recording the control API opened: a buffer that
// says when it was closed.
type closingBuffer struct {
	bytes.Buffer
	closed bool
}

func (b *closingBuffer) Close() error { b.closed = true; return nil }

// ctlServe is a Serving of src with the control API, recording 1 to
// the returned buffer and each later recording to a buffer of opened, its
// clock fixed at a constant instant for the end records of snapshots. Its
// cleanup stops it.
func ctlServe(t *testing.T, src string, opts ServeOptions) (*Serving, *bytes.Buffer, map[int]*closingBuffer) {
	t.Helper()
	var rec1 bytes.Buffer
	opened := map[int]*closingBuffer{}
	var mu sync.Mutex
	if opts.Control == nil {
		opts.Control = &ControlOptions{}
	}
	opts.Record = &rec1
	opts.Control.Open = func(n int) (io.WriteCloser, string, error) {
		mu.Lock()
		defer mu.Unlock()
		b := &closingBuffer{}
		opened[n] = b
		return b, "buffer", nil
	}
	sv, err := NewServe(mustParse(t, src), opts)
	if err != nil {
		t.Fatal(err)
	}
	fixed := time.Now().Add(time.Second)
	sv.now = func() time.Time { return fixed }
	t.Cleanup(func() {
		if _, err := sv.stop(context.Background(), time.Now(), nil); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return sv, &rec1, opened
}

// do sends one request to the front from a loopback peer (or from peer).
func do(sv *Serving, method, target, contentType, body string, peer ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, target, rd)
	r.RemoteAddr = "127.0.0.1:40000"
	if len(peer) > 0 {
		r.RemoteAddr = peer[0]
	}
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	sv.ServeHTTP(w, r)
	return w
}

// jsonAnswer decodes a JSON answer after checking its status and type.
func jsonAnswer(t *testing.T, w *httptest.ResponseRecorder, status int, v any) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d (%s); want %d", w.Code, w.Body, status)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q; want application/json", ct)
	}
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatalf("answer %q: %v", w.Body, err)
	}
}

// The status counts the recorded requests only; /verdict, /recording and
// /status are never recorded, and /verdict is exactly the analyzer's JSON
// (what `analyze --json` writes) of what /recording answers.
func TestControlStatusRecordingVerdict(t *testing.T) {
	sv, _, _ := ctlServe(t, ctlScenario, ServeOptions{Seed: 4})
	for i := range 3 {
		if w := do(sv, "GET", "/c/1/r/"+string(rune('0'+i)), "", ""); w.Code != 503 {
			t.Fatalf("client request: %d; want 503", w.Code)
		}
		do(sv, "GET", "/_retrylab/status", "", "")
		do(sv, "GET", "/_retrylab/verdict", "", "")
	}
	for _, path := range []string{"/_retrylab/", "/_retrylab/status", "/_retrylab"} {
		var st Status
		jsonAnswer(t, do(sv, "GET", path, "", ""), 200, &st)
		if st.Scenario != "ctl" || st.Recording != 1 || st.Requests != 3 || !st.Started || st.Elapsed <= 0 {
			t.Errorf("GET %s = %+v; want ctl, recording 1, 3 requests, started, elapsed > 0", path, st)
		}
	}

	w := do(sv, "GET", "/_retrylab/recording", "", "")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("GET recording: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	rec := w.Body.Bytes()
	d := decode(t, rec)
	if len(d.atts) != 3 || d.end == nil || d.end.Reason != timeline.EndCompleted || d.meta.Recorder != "serve" || d.meta.Seed != 4 {
		t.Fatalf("recording: meta %+v, %d attempts, end %+v; want serve's with seed 4, 3 attempts, end completed", d.meta, len(d.atts), d.end)
	}
	for _, a := range d.atts {
		if strings.HasPrefix(a.Path, "/_retrylab") {
			t.Errorf("recorded a control request: %+v", a)
		}
	}

	v, err := analyzer.Analyze(bytes.NewReader(rec), analyzer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := analyzer.WriteJSON(&want, v); err != nil {
		t.Fatal(err)
	}
	w = do(sv, "GET", "/_retrylab/verdict", "", "")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET verdict: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	if !bytes.Equal(w.Body.Bytes(), want.Bytes()) {
		t.Errorf("GET verdict:\n%s\nwant the analyzer's JSON of GET recording:\n%s", w.Body, want.Bytes())
	}
	if w := do(sv, "HEAD", "/_retrylab/verdict", "", ""); w.Code != 200 {
		t.Errorf("HEAD verdict: %d", w.Code)
	}
}

// Unknown paths under the prefix are 404, wrong methods 405 with Allow;
// both are JSON errors.
func TestControlErrors(t *testing.T) {
	sv, _, _ := ctlServe(t, ctlScenario, ServeOptions{})
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/_retrylab/nope", 404, ""},
		{"GET", "/_retrylab/reset/x", 404, ""},
		{"GET", "/_retrylab/reset", 405, "POST"},
		{"POST", "/_retrylab/verdict", 405, "GET, HEAD"},
		{"DELETE", "/_retrylab/", 405, "GET, HEAD"},
		{"PUT", "/_retrylab/recording", 405, "GET, HEAD"},
	} {
		var e apiError
		w := do(sv, tc.method, tc.path, "", "")
		jsonAnswer(t, w, tc.status, &e)
		if e.Error == "" || w.Header().Get("Allow") != tc.allow {
			t.Errorf("%s %s: error %q, Allow %q; want an error, Allow %q", tc.method, tc.path, e.Error, w.Header().Get("Allow"), tc.allow)
		}
	}
	if st := sv.Status(); st.Requests != 0 {
		t.Errorf("status after control requests only: %+v; want nothing recorded", st)
	}
}

// Only loopback peers use the API unless AllowRemote.
func TestControlRefusesRemote(t *testing.T) {
	for _, allow := range []bool{false, true} {
		sv, _, _ := ctlServe(t, ctlScenario, ServeOptions{Control: &ControlOptions{AllowRemote: allow}})
		for _, peer := range []string{"192.0.2.7:5000", "[2001:db8::1]:5000", "garbage"} {
			w := do(sv, "POST", "/_retrylab/reset", "", "", peer)
			if allow && w.Code != 200 || !allow && w.Code != 403 {
				t.Errorf("allow-remote %v, reset from %s: %d %s", allow, peer, w.Code, w.Body)
			}
			if !allow {
				var e apiError
				jsonAnswer(t, w, 403, &e)
			}
		}
		for _, peer := range []string{"127.0.0.1:1", "[::1]:1", "[::ffff:127.0.0.1]:1"} {
			if w := do(sv, "GET", "/_retrylab/status", "", "", peer); w.Code != 200 {
				t.Errorf("status from %s: %d", peer, w.Code)
			}
		}
		if want := map[bool]int{false: 1, true: 4}[allow]; sv.Status().Recording != want {
			t.Errorf("allow-remote %v: recording %d; want %d", allow, sv.Status().Recording, want)
		}
	}
}

// A reset ends the recording (its end record, nothing lost) and starts
// the next on the same scenario, a built-in, or a posted file; a bad one
// is refused with the loader's place and the recording goes on.
func TestControlReset(t *testing.T) {
	sv, rec1, opened := ctlServe(t, ctlScenario, ServeOptions{Seed: 9})
	do(sv, "GET", "/c/1/r/0", "", "")
	do(sv, "GET", "/c/2/r/0", "", "")

	var ans ResetAnswer
	jsonAnswer(t, do(sv, "POST", "/_retrylab/reset", "", ""), 200, &ans)
	if ans != (ResetAnswer{Recording: 2, Scenario: "ctl"}) {
		t.Errorf("reset = %+v; want recording 2 of ctl", ans)
	}
	d1 := decode(t, rec1.Bytes())
	if len(d1.atts) != 2 || d1.end == nil || d1.end.Reason != timeline.EndCompleted {
		t.Fatalf("recording 1: %d attempts, end %+v; want 2 and an end record", len(d1.atts), d1.end)
	}
	if w := do(sv, "GET", "/c/1/r/0", "", ""); w.Code != 503 {
		t.Errorf("after the reset: %d; want 503", w.Code)
	}

	jsonAnswer(t, do(sv, "POST", "/_retrylab/reset?scenario=outage-bare", "", ""), 200, &ans)
	if ans != (ResetAnswer{Recording: 3, Scenario: "outage-bare"}) {
		t.Errorf("reset ?scenario=outage-bare = %+v; want recording 3 of outage-bare", ans)
	}
	d2 := decode(t, opened[2].Bytes())
	if !opened[2].closed || len(d2.atts) != 1 || d2.atts[0].Attempt != 1 || d2.end == nil || !slices.ContainsFunc(d2.meta.Notes, func(n string) bool { return strings.Contains(n, "recording 2") }) {
		t.Errorf("recording 2: closed %v, %d attempts, end %+v, notes %q; want closed, one first attempt, an end record, a note naming it", opened[2].closed, len(d2.atts), d2.end, d2.meta.Notes)
	}
	if st := sv.Status(); st.Scenario != "outage-bare" || st.Recording != 3 || st.Requests != 0 {
		t.Errorf("status = %+v; want outage-bare, recording 3, nothing recorded", st)
	}

	const posted = "name: posted\nserver:\n  phases:\n    - name: up\n      respond: ok\n"
	for _, ct := range []string{"application/yaml", "application/x-yaml", "text/yaml; charset=utf-8"} {
		jsonAnswer(t, do(sv, "POST", "/_retrylab/reset", ct, posted), 200, &ans)
		if ans.Scenario != "posted" {
			t.Errorf("reset with %s: %+v; want scenario posted", ct, ans)
		}
	}
	if w := do(sv, "GET", "/c/1/r/0", "", ""); w.Code != 200 {
		t.Errorf("the posted scenario answered %d; want 200", w.Code)
	}
	d := decode(t, do(sv, "GET", "/_retrylab/recording", "", "").Body.Bytes())
	if d.meta.Scenario != "posted" || !strings.Contains(string(d.meta.Source), `"up"`) {
		t.Errorf("recording of the posted scenario: meta %q with source %q", d.meta.Scenario, d.meta.Source)
	}

	for _, tc := range []struct {
		query, ct, body string
		status          int
		want            string
	}{
		{"", "application/yaml", "name: bad\nserver:\n  phases:\n    - name: x\n      respond: {status: 99}\n", 400, "posted.yaml:5:"},
		{"", "application/yaml", "server: [", 400, "posted.yaml:1:"},
		{"", "application/yaml", "name: x\nserver:\n  nope: 1\n", 400, "posted.yaml:3:3"},
		{"?scenario=no-such-thing", "", "", 400, `"no-such-thing"`},
		{"?scenario=../etc/passwd", "", "", 400, "unknown scenario"},
		{"?scenario=outage-bare", "application/yaml", posted, 400, "not both"},
		{"?scenario=outage-bare&scenario=flapping", "", "", 400, "2 times"},
		{"?seed=3", "", "", 400, `"seed"`},
		{"", "application/json", "{}", 415, "application/yaml"},
		{"", "", posted, 415, "Content-Type"},
		{"", "application/yaml", strings.Repeat("#", 1<<20+1), 413, "larger"},
	} {
		var e apiError
		w := do(sv, "POST", "/_retrylab/reset"+tc.query, tc.ct, tc.body)
		jsonAnswer(t, w, tc.status, &e)
		if !strings.Contains(e.Error, tc.want) {
			t.Errorf("reset %s %s: error %q; want it to contain %q", tc.query, tc.ct, e.Error, tc.want)
		}
	}
	if st := sv.Status(); st.Scenario != "posted" || st.Recording != 6 || st.Requests != 1 {
		t.Errorf("after refused resets: %+v; want the posted scenario's recording 6 going on with its request", st)
	}
}

// A reset gives the next recording a fresh quota: the requests the last
// one spent do not count.
func TestControlResetRefreshesQuota(t *testing.T) {
	const src = "name: q\nserver:\n  quota: {algorithm: token-bucket, rate: 1/h, burst: 2, key: global}\n  phases:\n    - name: steady\n      respond: quota\n"
	sv, _, _ := ctlServe(t, src, ServeOptions{})
	codes := func() []int {
		var out []int
		for i := range 3 {
			out = append(out, do(sv, "GET", "/c/1/r/"+string(rune('0'+i)), "", "").Code)
		}
		return out
	}
	want := []int{200, 200, 429}
	if got := codes(); !slices.Equal(got, want) {
		t.Fatalf("recording 1: %v; want %v", got, want)
	}
	do(sv, "POST", "/_retrylab/reset", "", "")
	if got := codes(); !slices.Equal(got, want) {
		t.Errorf("after a reset: %v; want %v (a fresh quota)", got, want)
	}
}

// Control requests never start the clock of --start first-request, and a
// recording before any request still has its meta record.
func TestControlFirstRequest(t *testing.T) {
	sv, _, _ := ctlServe(t, ctlScenario, ServeOptions{StartOnFirstRequest: true})
	for range 3 {
		do(sv, "GET", "/_retrylab/status", "", "")
		do(sv, "GET", "/_retrylab/verdict", "", "")
	}
	if st := sv.Status(); st.Started || st.Elapsed != 0 || st.Requests != 0 {
		t.Errorf("status after control requests = %+v; want not started", st)
	}
	d := decode(t, do(sv, "GET", "/_retrylab/recording", "", "").Body.Bytes())
	if len(d.atts) != 0 || d.end == nil || !slices.ContainsFunc(d.meta.Notes, func(n string) bool { return strings.Contains(n, "no request arrived") }) {
		t.Errorf("recording before any request: %d attempts, end %+v, notes %q", len(d.atts), d.end, d.meta.Notes)
	}
	do(sv, "GET", "/c/1/r/0", "", "")
	if st := sv.Status(); !st.Started || st.Requests != 1 {
		t.Errorf("status after a client request = %+v; want started, 1 request", st)
	}
	do(sv, "POST", "/_retrylab/reset", "", "")
	if st := sv.Status(); st.Started {
		t.Errorf("status after a reset = %+v; want its clock waiting for the first request", st)
	}
}

// A request in flight across a reset is recorded in the recording it
// arrived in: the reset releases its latency and waits for it.
func TestControlResetInFlight(t *testing.T) {
	const src = "name: slow\nserver: {phases: [{name: slow, for: 1h, latency: 1h, respond: {status: 503}}]}\n"
	sv, rec1, opened := ctlServe(t, src, ServeOptions{})
	answered := make(chan int, 1)
	go func() { answered <- do(sv, "GET", "/c/1/r/0", "", "").Code }()
	for i := 0; sv.Stub().Stats().Attempts == 0; i++ {
		if i > 1e7 {
			t.Fatal("the request never arrived")
		}
		runtime.Gosched()
	}
	var ans ResetAnswer
	jsonAnswer(t, do(sv, "POST", "/_retrylab/reset", "", ""), 200, &ans)
	select {
	case code := <-answered:
		if code != 503 {
			t.Errorf("the request in flight got %d; want 503", code)
		}
	default:
		t.Fatal("the reset returned before the request in flight was answered")
	}
	d := decode(t, rec1.Bytes())
	if len(d.atts) != 1 || d.atts[0].Status != 503 || d.end == nil {
		t.Errorf("recording 1: %+v, end %+v; want the request in flight, then the end record", d.atts, d.end)
	}
	if st := sv.Status(); st.Recording != 2 || st.Requests != 0 || opened[2] == nil {
		t.Errorf("status = %+v; want recording 2, empty", st)
	}
}

// FuzzResetRequest throws arbitrary queries, Content-Types and bodies at
// the reset's request parsing: it never panics, and a refusal is a
// client error.
func FuzzResetRequest(f *testing.F) {
	f.Add("scenario=outage-bare", "", []byte(nil))
	f.Add("", "application/yaml", []byte("name: x\nserver: {phases: [{name: a, respond: ok}]}\n"))
	f.Add("scenario=%zz", "text/yaml", []byte("server: ["))
	f.Add("a=b&scenario=", "multipart/form-data; boundary=x", []byte("--x--"))
	f.Add("", "application/x-yaml;;", []byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, query, ct string, body []byte) {
		r := httptest.NewRequest("POST", "/_retrylab/reset", bytes.NewReader(body))
		r.URL.RawQuery = query
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		sc, status, err := resetScenario(r)
		switch {
		case err != nil && (status < 400 || status > 499):
			t.Errorf("refused with status %d: %v", status, err)
		case err == nil && sc != nil && sc.Name == "":
			t.Errorf("a scenario without a name")
		}
	})
}

// A request that reaches the last recording's stub after a reset sealed
// it (the front had handed it over just before) is diverted to the next
// recording, not held nor lost.
func TestControlResetDivertsLateRequests(t *testing.T) {
	sv, rec1, _ := ctlServe(t, ctlScenario, ServeOptions{})
	old := sv.Stub()
	do(sv, "POST", "/_retrylab/reset", "", "")
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/c/1/r/0", nil)
	r.RemoteAddr = "127.0.0.1:40000"
	old.ServeHTTP(w, r)
	if w.Code != 503 {
		t.Errorf("late request: %d; want 503 from the next recording's stub", w.Code)
	}
	if d := decode(t, rec1.Bytes()); len(d.atts) != 0 {
		t.Errorf("recording 1 holds %d attempts; want none", len(d.atts))
	}
	if st := sv.Status(); st.Recording != 2 || st.Requests != 1 {
		t.Errorf("status %+v; want recording 2 with the late request", st)
	}
}

// A snapshot's end record carries the host's noise measured so far when
// serve measures it (Serve does): a verdict asked of a recording that
// goes on on a loaded host must know how loaded, or noise would decide it.
func TestControlSnapshotCarriesNoise(t *testing.T) {
	sv, _, _ := ctlServe(t, ctlScenario, ServeOptions{Seed: 4})
	do(sv, "GET", "/c/1/r/0", "", "")
	g := sv.cur.Load()
	g.meter = serveMeter(g.stamps) // as Serve starts it
	t.Cleanup(func() { g.meter.Stop() })
	d := decode(t, do(sv, "GET", "/_retrylab/recording", "", "").Body.Bytes())
	if d.end == nil || d.end.Noise == nil {
		t.Fatalf("snapshot end %+v; want the noise measured so far", d.end)
	}
}
