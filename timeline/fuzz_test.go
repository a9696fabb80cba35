package timeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"testing"
	"time"
)

// FuzzDecoder feeds arbitrary streams to the decoder: it must never panic,
// must name a line for what it rejects, and every record it accepts must
// survive a re-encode and decode unchanged.
func FuzzDecoder(f *testing.F) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	enc.EncodeMeta(sampleMeta())
	for _, a := range sampleAttempts() {
		enc.EncodeAttempt(&a)
	}
	for _, o := range sampleOutcomes() {
		enc.EncodeOutcome(&o)
	}
	enc.EncodeEnd(&End{At: 9, Reason: EndInterrupted, Signal: "SIGINT", InFlight: 2, Errors: []string{"x"}})
	enc.Flush()
	f.Add(buf.Bytes())
	for _, line := range bytes.Split(buf.Bytes(), []byte("\n")) {
		f.Add(line)
	}
	f.Add([]byte(`{"type":"attempt","attempt":1,"x":[{"y":"\u00e9\n"}],"at":-0}`))
	f.Add([]byte(`{"type":"outcome","result":"ok","start":1e2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := NewDecoder(bytes.NewReader(data))
		var rec Record
		for n := 0; n < 1000; n++ {
			err := dec.Decode(&rec)
			if err == io.EOF {
				return
			}
			if err != nil {
				if se, ok := err.(*SyntaxError); !ok || se.Line < 1 {
					t.Fatalf("error %v; want a *SyntaxError with a line", err)
				}
				return
			}
			var out bytes.Buffer
			e := NewEncoder(&out)
			switch rec.Type {
			case TypeAttempt:
				e.EncodeAttempt(&rec.Attempt)
			case TypeOutcome:
				e.EncodeOutcome(&rec.Outcome)
			case TypeEnd:
				e.EncodeEnd(rec.End)
			default:
				continue
			}
			e.Flush()
			var again Record
			if err := NewDecoder(&out).Decode(&again); err != nil {
				t.Fatalf("re-decoding %q: %v", out.Bytes(), err)
			}
			if rec.Type == TypeEnd && !reflect.DeepEqual(again.End, rec.End) {
				t.Fatalf("round trip changed the end record:\n got %+v\nwant %+v", again.End, rec.End)
			}
			if again.Attempt != rec.Attempt || again.Outcome != rec.Outcome {
				t.Fatalf("round trip changed the record:\n got %+v %+v\nwant %+v %+v", again.Attempt, again.Outcome, rec.Attempt, rec.Outcome)
			}
		}
	})
}

// FuzzAppendString checks the encoder's string escaping against
// encoding/json: both must decode to the same string.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `"default";r=0;t=1`, "a\\b\n\r\t\x00\x1f", "é\u2028😀", "\xff\xfe", "a\xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var got, want string
		if err := json.Unmarshal(appendString(nil, s), &got); err != nil {
			t.Fatalf("appendString(%q) = %q: not JSON: %v", s, appendString(nil, s), err)
		}
		m, _ := json.Marshal(s)
		json.Unmarshal(m, &want)
		if got != want {
			t.Fatalf("appendString(%q) decodes to %q; encoding/json gives %q", s, got, want)
		}
	})
}

// FuzzParseWaitClaim: a claim is read or refused, never a panic; one
// read is non-negative, at most a day, and printed back in milliseconds
// with six decimals it reads the same.
func FuzzParseWaitClaim(f *testing.F) {
	for _, s := range []string{"0", "125", "12.5", "0.000001", "86400000", "86400000.000001", "-1", "1e3", " 1", "1.", ".5", "NaN", "999999999.9999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := ParseWaitClaim(s)
		if !ok {
			return
		}
		if d < 0 || d > 24*time.Hour {
			t.Fatalf("ParseWaitClaim(%q) = %v, outside [0, 24h]", s, d)
		}
		back := fmt.Sprintf("%d.%06d", d/time.Millisecond, d%time.Millisecond)
		if d2, ok := ParseWaitClaim(back); !ok || d2 != d {
			t.Fatalf("ParseWaitClaim(%q) = %v; printed %q reads %v, %v", s, d, back, d2, ok)
		}
	})
}
