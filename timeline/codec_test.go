package timeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func sampleMeta() *Meta {
	return &Meta{
		Format:   Format,
		Tool:     "test",
		Recorder: "run",
		Scenario: "outage-date",
		Source:   json.RawMessage(`{"name":"outage-date"}`),
		Subject:  "retrylab",
		Policy:   &Policy{Base: int64(100 * time.Millisecond), Cap: int64(5 * time.Second), MaxAttempts: 5, Jitter: "full", Retryable: []int{429, 503}},
		Seed:     42,
		Start:    time.Date(2026, 11, 30, 23, 0, 0, 123, time.UTC),
		Phases:   []Phase{{Name: "outage", Start: 0, End: int64(5 * time.Second), Respond: "status 503", RetryAfter: "date phase-end"}, {Name: "recovered", Start: int64(5 * time.Second), Respond: "quota", Capacity: 0.3}},
		Fleet:    &Fleet{Clients: 1000, Requests: 3, Method: "GET"},
		Quota:    &Quota{Algorithm: "token-bucket", Rate: 100, Burst: 20, Key: "global"},
		Limits:   []Quota{{Algorithm: "token-bucket", Rate: 10, Burst: 20, Name: "second", Limit: 10, Window: 1e9}, {Algorithm: "leaky-bucket", Rate: 5, Burst: 5, Key: "api-key", Name: "minute", Limit: 300, Window: 60e9, Tier: "free", Mode: "shape"}},
		Capacity: &Capacity{Concurrency: 50, Queue: 100, Service: 20e6, Dist: "exponential", Discipline: "lifo", CancelOnDisconnect: true},
		Expect:   &Expect{Checks: []string{"waves"}, Thresholds: map[string]float64{"amplification": 3}},
	}
}

func sampleAttempts() []Attempt {
	return []Attempt{
		{Client: "17", Key: "17/42", Attempt: 1, Method: "GET", Path: "/c/17/r/42", At: 1, Done: 2, Status: 503, Phase: "outage", RetryAfter: "Mon, 30 Nov 2026 23:00:05 GMT", NotBefore: 5e9, HasNotBefore: true},
		{Client: "17", Key: "17/42", Attempt: 2, Method: "GET", Path: "/c/17/r/42", At: 5e9, Done: 5e9 + 7, Status: 200, Phase: "recovered", RateLimit: `RateLimit: "default";r=19;t=1`},
		{Client: "17", Key: "17/43", Attempt: 1, Method: "GET", Path: "/c/17/r/43", At: 6e9, Done: 6e9 + 7, Status: 403, RetryAfter: "60", NotBefore: 66e9, HasNotBefore: true, Limit: "free/minute"},
		{Client: "3", Key: "3/0", Attempt: 1, Method: "POST", Path: "/c/3/r/0", At: 10, Done: 20, Fault: FaultReset, Idempotent: true, IdemKey: KeyDigest("order-7")},
		{Client: "3", Key: "3/1", Attempt: 1, Method: "GET", Path: "/c/3/r/1", At: 11, Done: 21, Status: 503, RetryAfter: "1", Backend: BackendClosed},
		{Client: "3", Key: "3/1", Attempt: 2, Method: "GET", Path: "/c/3/r/1", At: 40, Done: 41, Status: 200, WaitClaim: "12.5"},
		{Client: "4", Key: "4/0", Attempt: 1, Method: "GET", Path: "/c/4/r/0", At: 10, Done: 90, Fault: FaultAbandoned, Status: 200, Queue: 60, Service: 20},
		{Client: "x\"y\\z\n\u00e9", Key: "idem:ä", Attempt: 3, Method: "GET", Path: "/odd path?q=\x01", At: 0, Done: 0, Status: 429, NotBefore: 0, HasNotBefore: true},
		{Client: "9", Key: "9/1", Attempt: 1, Method: "GET", Path: "/c/9/r/1", At: 5, Done: 1<<63 - 1, Status: 429, RetryAfter: "garbage"},
		{Client: "127.0.0.1", Key: "POST /v1/orders 127.0.0.1", Attempt: 1, Method: "POST", Path: "/v1/orders", At: 7, Done: 9, Status: 201, Upstream: UpstreamRelayed},
		{Client: "127.0.0.1", Key: "POST /v1/orders 127.0.0.1", Attempt: 2, Method: "POST", Path: "/v1/orders", At: 11, Done: 12, Status: 502, Upstream: UpstreamFailed, Waited: 8_000_000},
		// gRPC: the mapped status, the code, each form of the wait, the
		// client's own count of its earlier attempts.
		{Client: "5", Key: "5/0", Attempt: 2, Method: "GRPC", Path: "/c/5/r/0", At: 30, Done: 31, Status: 503, GRPCCode: "UNAVAILABLE", Pushback: "1500", NotBefore: 1500000031, HasNotBefore: true, PreviousAttempts: 1},
		{Client: "5", Key: "5/1", Attempt: 1, Method: "GRPC", Path: "/c/5/r/1", At: 40, Done: 41, Status: 429, GRPCCode: "RESOURCE_EXHAUSTED", RetryInfo: "2.250s", NotBefore: 2250000041, HasNotBefore: true},
		{Client: "5", Key: "5/2", Attempt: 1, Method: "GRPC", Path: "/c/5/r/2", At: 50, Done: 51, Status: 429, GRPCCode: "RESOURCE_EXHAUSTED", Pushback: "-1"},
		{Client: "5", Key: "5/3", Attempt: 1, Method: "GRPC", Path: "/c/5/r/3", At: 60, Done: 61, Status: 200, GRPCCode: "OK"},
	}
}

func sampleOutcomes() []Outcome {
	return []Outcome{
		{Client: "17", Key: "17/42", Scheduled: 0, Start: 1, End: 5e9 + 8, Result: ResultOK, Status: 200, Attempts: 2},
		{Client: "3", Key: "3/0", Scheduled: 5, Start: 10, End: 30, Result: ResultError, Error: "read: connection reset by peer"},
	}
}

func encodeSample(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	if err := enc.EncodeMeta(sampleMeta()); err != nil {
		t.Fatal(err)
	}
	for _, a := range sampleAttempts() {
		if err := enc.EncodeAttempt(&a); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range sampleOutcomes() {
		if err := enc.EncodeOutcome(&o); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	data := encodeSample(t)
	dec := NewDecoder(bytes.NewReader(data))
	var rec Record
	if err := dec.Decode(&rec); err != nil {
		t.Fatal(err)
	}
	if rec.Type != TypeMeta || !reflect.DeepEqual(rec.Meta, sampleMeta()) {
		t.Fatalf("meta = %+v; want %+v", rec.Meta, sampleMeta())
	}
	for i, want := range sampleAttempts() {
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		if rec.Type != TypeAttempt || rec.Attempt != want {
			t.Errorf("attempt %d = %+v; want %+v", i, rec.Attempt, want)
		}
	}
	for i, want := range sampleOutcomes() {
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("outcome %d: %v", i, err)
		}
		if rec.Type != TypeOutcome || rec.Outcome != want {
			t.Errorf("outcome %d = %+v; want %+v", i, rec.Outcome, want)
		}
	}
	if err := dec.Decode(&rec); err != io.EOF {
		t.Fatalf("Decode at end = %v; want io.EOF", err)
	}
}

// Every line the encoder writes is valid JSON that encoding/json reads to
// the same values: the hand-written encoder and parser agree with it.
func TestEncoderWritesStandardJSON(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(string(encodeSample(t)), "\n"), "\n")
	atts := sampleAttempts()
	for i, a := range atts {
		var got struct {
			Attempt
			Type      string `json:"type"`
			NotBefore *int64 `json:"not_before"`
		}
		if err := json.Unmarshal([]byte(lines[1+i]), &got); err != nil {
			t.Fatalf("line %d: %v", 2+i, err)
		}
		if got.Type != TypeAttempt || got.Client != a.Client || got.Path != a.Path || got.At != a.At || got.Done != a.Done ||
			got.GRPCCode != a.GRPCCode || got.Pushback != a.Pushback || got.RetryInfo != a.RetryInfo || got.PreviousAttempts != a.PreviousAttempts || got.WaitClaim != a.WaitClaim {
			t.Errorf("line %d decoded by encoding/json = %+v; want %+v", 2+i, got.Attempt, a)
		}
		if (got.NotBefore != nil) != a.HasNotBefore || (got.NotBefore != nil && *got.NotBefore != a.NotBefore) {
			t.Errorf("line %d not_before = %v; want %d (set %v)", 2+i, got.NotBefore, a.NotBefore, a.HasNotBefore)
		}
	}
}

func TestDecodeErrorsNameTheLine(t *testing.T) {
	const meta = `{"type":"meta","format":1,"recorder":"run","scenario":"x","seed":1,"start":"2026-11-30T23:00:00Z"}`
	const end = `{"type":"end","at":9,"reason":"completed"}`
	good := `{"type":"attempt","client":"1","key":"1/0","attempt":1,"method":"GET","path":"/c/1/r/0","at":1,"done":2,"status":200}`
	tests := []struct {
		name, in string
		line     int
		msg      string
	}{
		{"truncated last line", good + "\n" + good[:40], 2, "truncated"},
		{"not json", good + "\nhello\n", 2, "want '{'"},
		{"no type", `{"client":"1"}`, 1, `no "type"`},
		{"string for number", "\n\n" + strings.Replace(good, `"at":1`, `"at":"1"`, 1), 3, `key "at"`},
		{"fraction for number", strings.Replace(good, `"at":1`, `"at":1.5`, 1), 1, "integer"},
		{"attempt zero", strings.Replace(good, `"attempt":1`, `"attempt":0`, 1), 1, `"attempt" >= 1`},
		{"outcome without result", `{"type":"outcome","client":"1","key":"1/0"}`, 1, `"result"`},
		{"trailing data", good + ` {}`, 1, "after the record"},
		{"bad meta", `{"type":"meta","seed":"x"}`, 1, "meta"},
		{"type after bad field", `{"at":"x","type":"attempt","attempt":1}`, 1, `key "at"`},
		{"bad escape", `{"type":"attempt","client":"\q","attempt":1}`, 1, "bad string"},
		{"unknown type", good + "\n" + `{"type":"future-record"}`, 2, `unknown record type "future-record"`},
		{"meta not first", good + "\n" + meta, 2, "must be the first record"},
		{"two metas", meta + "\n" + good + "\n" + meta, 3, "a second meta record (the first is line 1)"},
		{"record after end", meta + "\n" + end + "\n" + good, 3, "after the end record (line 2)"},
		{"two ends", meta + "\n" + end + "\n" + end, 3, "after the end record"},
		{"end without reason", `{"type":"end","at":5}`, 1, `"reason"`},
		{"negative arrival", strings.Replace(good, `"at":1`, `"at":-1`, 1), 1, "before the run's start"},
		{"answered before arrival", strings.Replace(good, `"done":2`, `"done":0`, 1), 1, "before it arrived"},
		{"outcome ends before start", `{"type":"outcome","client":"1","key":"1/0","scheduled":0,"start":9,"end":3,"result":"ok"}`, 1, "before it started"},
		{"outcome before the run", `{"type":"outcome","client":"1","key":"1/0","scheduled":-4,"start":0,"end":3,"result":"ok"}`, 1, "before the run's start"},
		{"newer format", `{"type":"meta","format":99,"recorder":"run","scenario":"x","seed":1,"start":"2026-11-30T23:00:00Z"}`, 1, "newer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := NewDecoder(strings.NewReader(tt.in))
			var rec Record
			var err error
			for err == nil {
				err = dec.Decode(&rec)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Decode error = %v; want a *SyntaxError", err)
			}
			if se.Line != tt.line || !strings.Contains(se.Error(), tt.msg) {
				t.Errorf("error = %q (line %d); want line %d and %q", se, se.Line, tt.line, tt.msg)
			}
		})
	}
}

func TestDecodeTolerance(t *testing.T) {
	in := strings.Join([]string{
		`{"type":"meta","format":1,"recorder":"serve","scenario":"x","seed":1,"start":"2026-11-30T23:00:00Z","new_meta_field":{"a":[1,2]}}`,
		``,
		`{"attempt":2,"type":"attempt","client":"a","key":"k","method":"GET","path":"/","at":1e3,"done":2000,"new_field":[true,false,null,"s",{"n":-1.5e3}],"status":429}`,
	}, "\n")
	dec := NewDecoder(strings.NewReader(in))
	var rec Record
	if err := dec.Decode(&rec); err != nil || rec.Meta == nil || rec.Meta.Recorder != "serve" {
		t.Fatalf("meta: %v, %+v", err, rec.Meta)
	}
	if err := dec.Decode(&rec); err != nil {
		t.Fatal(err)
	}
	want := Attempt{Client: "a", Key: "k", Attempt: 2, Method: "GET", Path: "/", At: 1000, Done: 2000, Status: 429}
	if rec.Attempt != want {
		t.Errorf("attempt = %+v; want %+v", rec.Attempt, want)
	}
	if dec.Line() != 3 {
		t.Errorf("Line() = %d; want 3", dec.Line())
	}
}

func TestDecodeLongLine(t *testing.T) {
	long := strings.Repeat("x", 600<<10) // longer than the reader's buffer
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	a := Attempt{Client: "1", Key: "1/0", Attempt: 1, Method: "GET", Path: "/" + long, At: 1, Done: 2, Status: 200}
	if err := enc.EncodeAttempt(&a); err != nil {
		t.Fatal(err)
	}
	if err := enc.EncodeAttempt(&a); err != nil {
		t.Fatal(err)
	}
	enc.Flush()
	dec := NewDecoder(&buf)
	var rec Record
	for i := 0; i < 2; i++ {
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		if rec.Attempt.Path != a.Path {
			t.Fatalf("record %d: path of %d bytes; want %d", i, len(rec.Attempt.Path), len(a.Path))
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestEncoderReportsWriteErrors(t *testing.T) {
	enc := NewEncoder(failWriter{})
	a := Attempt{Attempt: 1}
	enc.EncodeAttempt(&a)
	if err := enc.Flush(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Flush = %v; want the write error", err)
	}
	if err := enc.EncodeAttempt(&a); err == nil {
		t.Fatal("EncodeAttempt after a failed write = nil; want the sticky error")
	}
}

// Strings of decoded records share blocks with their neighbours; they must
// stay intact however many lines are decoded after them.
func TestDecodedStringsStayValid(t *testing.T) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	const n = 5000
	for i := 0; i < n; i++ {
		a := Attempt{Client: strconv.Itoa(i), Key: strconv.Itoa(i) + "/0", Attempt: 1, Method: "GET",
			Path: "/c/" + strconv.Itoa(i) + "/r/0" + strings.Repeat("x", i%300), At: int64(i), Done: int64(i)}
		enc.EncodeAttempt(&a)
	}
	enc.Flush()
	dec := NewDecoder(&buf)
	var keys, paths []string
	for {
		var rec Record
		err := dec.Decode(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, rec.Attempt.Key)
		paths = append(paths, rec.Attempt.Path)
	}
	for i := 0; i < n; i++ {
		wantPath := "/c/" + strconv.Itoa(i) + "/r/0" + strings.Repeat("x", i%300)
		if keys[i] != strconv.Itoa(i)+"/0" || paths[i] != wantPath {
			t.Fatalf("record %d after decoding all: key %q path %q; want %q %q", i, keys[i], paths[i][:min(40, len(paths[i]))], strconv.Itoa(i)+"/0", wantPath[:min(40, len(wantPath))])
		}
	}
}

func TestEndAndHarnessRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	o := Outcome{Client: "1", Key: "1/0", Start: 1, End: 2, Result: ResultError, Error: "exec: not found", Harness: true}
	end := End{At: 10, Reason: EndInterrupted, Signal: "interrupt", InFlight: 3, Unstarted: 4, DialErrors: 5, FleetReady: 6, Errors: []string{"x"},
		Noise: &Noise{Source: NoiseSched + "+" + NoiseSleep, P50: 1e5, P99: 3e6, Max: 9e6, Samples: 400, CPUPressure: 12.5, Batch: 3}}
	if err := enc.EncodeMeta(sampleMeta()); err != nil {
		t.Fatal(err)
	}
	if err := enc.EncodeOutcome(&o); err != nil {
		t.Fatal(err)
	}
	if err := enc.EncodeEnd(&end); err != nil {
		t.Fatal(err)
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	dec := NewDecoder(&buf)
	var rec Record
	for _, typ := range []string{TypeMeta, TypeOutcome, TypeEnd} {
		if err := dec.Decode(&rec); err != nil || rec.Type != typ {
			t.Fatalf("Decode = %v, type %q; want %q", err, rec.Type, typ)
		}
		if typ == TypeOutcome && rec.Outcome != o {
			t.Errorf("outcome = %+v; want %+v", rec.Outcome, o)
		}
	}
	if rec.End == nil || !reflect.DeepEqual(*rec.End, end) {
		t.Errorf("end = %+v; want %+v", rec.End, end)
	}
	if err := dec.Decode(&rec); err != io.EOF {
		t.Errorf("after end: %v; want io.EOF", err)
	}
}

// TestKeyDigest: equal keys give equal digests, different keys different
// ones, the digest never holds the key, and no key gives "".
func TestKeyDigest(t *testing.T) {
	a, b := KeyDigest("order-7"), KeyDigest("order-8")
	if a != KeyDigest("order-7") || a == b || len(a) != 16 || strings.Contains(a, "order") {
		t.Errorf("KeyDigest: %q, %q; want 16 hex digits, equal for equal keys only", a, b)
	}
	if KeyDigest("") != "" {
		t.Errorf(`KeyDigest(""): %q; want ""`, KeyDigest(""))
	}
}
