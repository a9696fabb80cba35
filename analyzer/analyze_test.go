package analyzer

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata and (TestChecksDoc) the checks table of docs/checks.md")

// TestAnalyzeStream: Analyze over NDJSON, decoding on its own goroutine or
// serially, gives the verdict Add gives over the same records.
func TestAnalyzeStream(t *testing.T) {
	s := sim{clients: 200, server: outage(3*s1, ""), delay: noJitter(100*ms, s1), maxAttempts: 8, seed: 2,
		policy: policy(100*ms, s1, 5, 10*s1, "full")}
	recs := s.records()
	want := s.verdict(Options{})
	for _, serial := range []bool{false, true} {
		got, err := Analyze(bytes.NewReader(ndjson(t, recs)), Options{Serial: serial})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Analyze(serial %v) = %s\nwant %s", serial, describe(got), describe(want))
		}
		if got.Pass || !reflect.DeepEqual(got.Failed(), []string{CheckWaves, CheckAttempts, CheckAmplification}) {
			t.Errorf("serial %v: Failed() = %v; want [waves attempts amplification]", serial, got.Failed())
		}
	}
}

func TestAnalyzeErrors(t *testing.T) {
	if _, err := Analyze(strings.NewReader(""), Options{}); !errors.Is(err, ErrNoRecords) {
		t.Errorf("Analyze(empty) error = %v; want ErrNoRecords", err)
	}
	in := "{\"type\":\"meta\",\"format\":1,\"recorder\":\"run\",\"scenario\":\"x\",\"seed\":0,\"start\":\"2026-01-01T00:00:00Z\"}\n" +
		"{\"type\":\"attempt\",\"client\":\"1\",\"key\":\"1/0\",\"attempt\":1,\"method\":\"GET\",\"path\":\"/\",\"at\":1,\"done\":2,\"status\":503}\n" +
		"{\"type\":\"attempt\",\"client\":\"1\",\"key\":\"1/0\",\"attem"
	_, err := Analyze(strings.NewReader(in), Options{})
	var se *timeline.SyntaxError
	if !errors.As(err, &se) || se.Line != 3 {
		t.Errorf("Analyze(truncated) error = %v; want a SyntaxError on line 3", err)
	}
	if _, err := Analyze(strings.NewReader(in), Options{Skip: []string{"nope"}}); !errors.Is(err, ErrUnknownCheck) {
		t.Errorf("Analyze(skip nope) error = %v; want ErrUnknownCheck", err)
	}
	// Without a meta record: judged, with a warning.
	v, err := Analyze(strings.NewReader(strings.SplitN(in, "\n", 2)[1][:strings.Index(strings.SplitN(in, "\n", 2)[1], "\n")+1]), Options{})
	if err != nil || len(v.Warnings) == 0 || v.Warnings[0].ID != WarnNoMeta || v.Figures.Attempts != 1 {
		t.Errorf("Analyze(no meta) = %+v, %v; want one attempt and a no-meta warning", v, err)
	}
}

// TestUnordered: attempts of a logical request written out of order (a
// recorder racing a fast retry) are still paired.
func TestUnordered(t *testing.T) {
	s := sim{clients: 200, server: outage(3*s1, "phase-end"), delay: fullJitter(100*ms, s1), maxAttempts: 8, seed: 4,
		policy: policy(100*ms, s1, 8, 20*s1, "full")}
	recs := s.records()
	want := s.verdict(Options{})
	r := rand.New(rand.NewPCG(1, 1))
	for i := 2; i < len(recs); i++ { // swap neighbours now and then
		if r.IntN(3) == 0 {
			recs[i-1], recs[i] = recs[i], recs[i-1]
		}
	}
	an := New(recs[0].Meta, Options{})
	for i := 1; i < len(recs); i++ {
		an.Add(&recs[i])
	}
	got := an.Result()
	for _, w := range got.Warnings {
		if w.ID == WarnUnordered {
			t.Errorf("warning %q", w.Message)
		}
	}
	for i := range want.Checks {
		if g, w := got.Checks[i], want.Checks[i]; g.Status != w.Status || g.Figure != w.Figure {
			t.Errorf("%s = %s %v in disorder; want %s %v", w.ID, g.Status, g.Figure, w.Status, w.Figure)
		}
	}
}

// TestBoundedState: state is kept per open logical request only, so the
// peak does not grow with the length of the run, with outcomes (dropped when
// they arrive) or without (dropped after IdleTimeout).
func TestBoundedState(t *testing.T) {
	peak := func(requests int, outcomes bool) int {
		s := sim{clients: 50, requests: requests, spread: 5 * s1, think: 200 * ms, seed: 5,
			server: func(at time.Duration) (int, string, time.Duration, bool) {
				if (at/time.Second)%3 == 0 {
					return 503, "", 0, false
				}
				return 200, "", 0, false
			},
			delay: fullJitter(100*ms, s1), maxAttempts: 5, policy: policy(100*ms, s1, 5, 10*s1, "full")}
		recs := s.records()
		an := New(recs[0].Meta, Options{IdleTimeout: 3 * time.Second})
		p := 0
		for i := 1; i < len(recs); i++ {
			if !outcomes && recs[i].Type == timeline.TypeOutcome {
				continue
			}
			an.Add(&recs[i])
			p = max(p, an.OpenRequests())
		}
		t.Logf("requests %d outcomes %v: peak %d", requests, outcomes, p)
		return p
	}
	for _, outcomes := range []bool{true, false} {
		short, long := peak(80, outcomes), peak(320, outcomes)
		if short == 0 || float64(long) > 1.3*float64(short) {
			t.Errorf("outcomes %v: peak open requests = %d for 80 requests per client, %d for 320; want about the same", outcomes, short, long)
		}
	}
}

// goldenVerdict is a fixed verdict with a failure of each kind of evidence,
// a skip and a warning.
func goldenVerdict(t *testing.T) *Verdict {
	s := sim{clients: 50, server: outage(2*s1, "garbage"), delay: fixed(s1), maxAttempts: 4, method: "POST", seed: 9,
		policy: policy(100*ms, 500*ms, 3, 10*s1, "full")}
	recs := s.records()
	recs[0].Meta.Scenario, recs[0].Meta.Subject, recs[0].Meta.SubjectVersion = "outage-garbage", "fixed-delay", "v0.0.0"
	an := New(recs[0].Meta, Options{Examples: 2})
	for i := 1; i < len(recs); i++ {
		an.Add(&recs[i])
	}
	v := an.Result()
	v.Warnings = append(v.Warnings, Warning{ID: WarnServerSync, Message: "server-induced synchronization: example", Remedy: "spread Retry-After"})
	return v
}

func TestGolden(t *testing.T) {
	v := goldenVerdict(t)
	for _, f := range []struct {
		name  string
		write func(io.Writer, *Verdict) error
	}{
		{"verdict.txt", WriteText}, {"verdict.json", WriteJSON}, {"verdict.xml", WriteJUnit}, {"verdict.md", WriteMarkdown},
	} {
		var buf bytes.Buffer
		if err := f.write(&buf, v); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", f.name)
		if *update {
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update)", err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", f.name, buf.String())
		}
	}
}

// TestEncodersParse: JSON round-trips; JUnit XML is well-formed with one
// testcase per check and the right failure and skip counts.
func TestEncodersParse(t *testing.T) {
	v := goldenVerdict(t)
	var buf bytes.Buffer
	if err := WriteJSON(&buf, v); err != nil {
		t.Fatal(err)
	}
	var back Verdict
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || !reflect.DeepEqual(&back, v) {
		t.Errorf("JSON round trip = %+v, %v; want %+v", back, err, v)
	}
	buf.Reset()
	if err := WriteJUnit(&buf, v); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Skipped  int `xml:"skipped,attr"`
		Suite    struct {
			Cases []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("JUnit XML does not parse: %v", err)
	}
	fails, skips := 0, 0
	for i, c := range doc.Suite.Cases {
		if c.Name != v.Checks[i].ID {
			t.Errorf("testcase %d = %q; want %q", i, c.Name, v.Checks[i].ID)
		}
		if (c.Failure != nil) != (v.Checks[i].Status == StatusFail) || (c.Skipped != nil) != (v.Checks[i].Status == StatusSkip) {
			t.Errorf("testcase %s: failure %v skipped %v; want status %s", c.Name, c.Failure != nil, c.Skipped != nil, v.Checks[i].Status)
		}
		if c.Failure != nil {
			fails++
		}
		if c.Skipped != nil {
			skips++
		}
	}
	if doc.Tests != len(v.Checks) || doc.Failures != fails || doc.Skipped != skips || fails == 0 || skips == 0 {
		t.Errorf("testsuites tests=%d failures=%d skipped=%d; want %d, %d, %d (both > 0)", doc.Tests, doc.Failures, doc.Skipped, len(v.Checks), fails, skips)
	}
}

// FuzzAnalyze: any input either fails with an error or yields a verdict
// that every encoder can write.
func FuzzAnalyze(f *testing.F) {
	// Small seeds: the fuzzer minimizes every input that finds new coverage.
	s := sim{clients: 1, server: outage(300*ms, "phase-end"), delay: fullJitter(100*ms, s1), maxAttempts: 3, seed: 1,
		policy: policy(100*ms, s1, 3, 5*s1, "full")}
	f.Add(ndjson(f, s.records()))
	s.server, s.method = outage(300*ms, "garbage"), "POST"
	f.Add(ndjson(f, s.records()))
	f.Add([]byte("{\"type\":\"attempt\",\"client\":\"\\u0001]]>\",\"key\":\"k\",\"attempt\":1,\"method\":\"GET\",\"path\":\"/\",\"at\":0,\"done\":1,\"status\":404}\n" +
		"{\"type\":\"attempt\",\"client\":\"\\u0001]]>\",\"key\":\"k\",\"attempt\":2,\"method\":\"GET\",\"path\":\"/\",\"at\":5,\"done\":6,\"status\":404}\n"))
	f.Add([]byte(`{"type":"meta","format":1,"recorder":"serve","scenario":"x","seed":0,"start":"2026-01-01T00:00:00Z","policy":{"base":-1,"cap":-5,"max_attempts":-2,"jitter":"decorrelated"},"expect":{"checks":["waves","nope"],"thresholds":{"waves":-1,"non-retryable.statuses":404}}}
{"type":"attempt","client":"a","key":"k","attempt":7,"method":"GET","path":"/","at":100,"done":50,"status":200}
{"type":"attempt","client":"a","key":"k","attempt":5,"method":"GET","path":"/","at":9223372036854775807,"done":-9223372036854775808,"status":503,"not_before":-1}
{"type":"attempt","client":"a","key":"k","attempt":6,"method":"PATCH","path":"/","at":-5,"done":0,"status":999,"retry_after":"-0"}
{"type":"outcome","client":"a","key":"k","scheduled":0,"start":5,"end":-9223372036854775808,"result":"hung"}
`))
	// A capacity model with odd values: negative and huge times, a phase
	// ending before it starts, shares out of range.
	f.Add([]byte(`{"type":"meta","format":1,"recorder":"run","scenario":"m","seed":0,"start":"2026-01-01T00:00:00Z","capacity":{"concurrency":-2,"queue":-5,"service":-3},"phases":[{"name":"s","start":0,"end":100,"respond":"ok"},{"name":"t","start":100,"end":50,"respond":"ok","capacity":0.3},{"name":"a","start":50,"respond":"ok","capacity":2}]}
{"type":"attempt","client":"a","key":"k","attempt":1,"method":"GET","path":"/","at":9223372036854775000,"done":1,"status":200,"queue":9223372036854775807,"service":9223372036854775807}
{"type":"attempt","client":"a","key":"k","attempt":2,"method":"GET","path":"/","at":-5,"done":0,"status":503,"limit":"capacity","queue":-7,"service":-1}
{"type":"attempt","client":"b","key":"b","attempt":1,"method":"GET","path":"/","at":120,"done":130,"status":200,"fault":"abandoned","queue":3,"service":5}
`))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Serial: one goroutine per exec keeps the fuzzer's workers busy.
		v, err := Analyze(bytes.NewReader(data), Options{Serial: true})
		if err != nil {
			return
		}
		for _, w := range []func(io.Writer, *Verdict) error{WriteText, WriteJSON, WriteMarkdown} {
			if err := w(io.Discard, v); err != nil {
				t.Fatalf("encoding the verdict of %q: %v", data, err)
			}
		}
		var junit bytes.Buffer
		if err := WriteJUnit(&junit, v); err != nil {
			t.Fatalf("WriteJUnit: %v", err)
		}
		var doc struct{}
		if err := xml.Unmarshal(junit.Bytes(), &doc); err != nil {
			t.Fatalf("the JUnit XML of %q does not parse: %v\n%s", data, err, junit.Bytes())
		}
		// FAIL when a check failed, else INCONCLUSIVE when there are
		// reasons, else PASS; Pass only for PASS.
		want := VerdictPass
		switch {
		case len(v.Failed()) > 0:
			want = VerdictFail
		case len(v.Inconclusive) > 0:
			want = VerdictInconclusive
		}
		if v.Status != want || v.Pass != (want == VerdictPass) {
			t.Fatalf("verdict %s, Pass %v with failed checks %v and reasons %v; want %s", v.Status, v.Pass, v.Failed(), v.Inconclusive, want)
		}
	})
}

// TestReadTimeline: start sees the meta (or nil) before any record, every
// other record reaches add once and in order, serially or not; an empty
// stream is ErrNoRecords without a call, a bad line the decoder's error.
func TestReadTimeline(t *testing.T) {
	s := sim{clients: 30, server: outage(s1, "phase-end"), honorRA: true, delay: fullJitter(100*ms, s1), maxAttempts: 5, seed: 3}
	recs := s.records()
	data := ndjson(t, recs)
	noMeta := data[bytes.IndexByte(data, '\n')+1:]
	for _, serial := range []bool{false, true} {
		for _, tt := range []struct {
			name     string
			in       []byte
			wantMeta bool
			want     int
		}{{"with meta", data, true, len(recs) - 1}, {"without meta", noMeta, false, len(recs) - 1}} {
			var metas []*timeline.Meta
			var ats []int64
			err := ReadTimeline(bytes.NewReader(tt.in), serial, func(m *timeline.Meta) func(*timeline.Record) {
				metas = append(metas, m)
				return func(r *timeline.Record) {
					if r.Type == timeline.TypeMeta {
						t.Errorf("%s: the meta record reached add", tt.name)
					}
					ats = append(ats, r.Attempt.At+r.Outcome.End)
				}
			})
			if err != nil || len(metas) != 1 || (metas[0] != nil) != tt.wantMeta || len(ats) != tt.want {
				t.Errorf("%s, serial %v: err %v, start called with %v, %d records; want nil, once with meta %v, %d", tt.name, serial, err, metas, len(ats), tt.wantMeta, tt.want)
				continue
			}
			for i, r := range recs[1:] {
				if want := r.Attempt.At + r.Outcome.End; ats[i] != want {
					t.Errorf("%s, serial %v: record %d out of order", tt.name, serial, i)
					break
				}
			}
		}
		called := false
		start := func(*timeline.Meta) func(*timeline.Record) { called = true; return func(*timeline.Record) {} }
		if err := ReadTimeline(strings.NewReader("\n\n"), serial, start); err != ErrNoRecords || called {
			t.Errorf("serial %v: empty stream: %v, start called %v; want ErrNoRecords, not called", serial, err, called)
		}
		var se *timeline.SyntaxError
		if err := ReadTimeline(bytes.NewReader(append(data, "{\"type\":\"attempt\",\"at\":\n"...)), serial, start); !errors.As(err, &se) {
			t.Errorf("serial %v: truncated stream: %v; want a *timeline.SyntaxError", serial, err)
		}
	}
}
