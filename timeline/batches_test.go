package timeline

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"testing/iotest"
)

// decodeAll is what the serial decoder makes of data: each record
// (cloned, as the analyzer would keep it) and the error that stopped it.
func decodeAll(data []byte) ([]string, string) {
	dec := NewDecoder(bytes.NewReader(data))
	var out []string
	for {
		var rec Record
		err := dec.Decode(&rec)
		if err != nil {
			if err.Error() == "EOF" {
				return out, ""
			}
			return out, err.Error()
		}
		out = append(out, show(&rec))
	}
}

func show(r *Record) string {
	return strings.Clone(fmt.Sprintf("%s %+v %+v %+v %+v", r.Type, r.Attempt, r.Outcome, r.Meta, r.End))
}

// batchAll is the same stream through DecodeBatches.
func batchAll(t *testing.T, data []byte, workers, chunk int, borrow bool) ([]string, string) {
	dec := NewDecoder(iotest.HalfReader(bytes.NewReader(data)))
	dec.chunk = chunk
	var out []string
	err := dec.DecodeBatches(workers, borrow, func(recs []Record) {
		if len(recs) == 0 {
			t.Error("fn called with no records")
		}
		for i := range recs {
			out = append(out, show(&recs[i]))
		}
	})
	if err != nil {
		return out, err.Error()
	}
	return out, ""
}

// TestDecodeBatchesMatchesDecode: parsed in chunks on several goroutines, a
// stream gives the records the serial decoder gives, in order, and stops
// with the same error on the same line, whatever the chunk size (chunks
// that cut lines, lines longer than a chunk).
func TestDecodeBatchesMatchesDecode(t *testing.T) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	enc.EncodeMeta(sampleMeta())
	for range 40 {
		for _, a := range sampleAttempts() {
			enc.EncodeAttempt(&a)
		}
		for _, o := range sampleOutcomes() {
			enc.EncodeOutcome(&o)
		}
	}
	enc.EncodeEnd(&End{At: 9, Reason: EndInterrupted, Signal: "SIGINT"})
	enc.Flush()
	good := buf.Bytes()
	lines := bytes.SplitAfter(good, []byte("\n"))
	splice := func(at int, parts ...string) []byte {
		var b []byte
		for _, l := range lines[:at] {
			b = append(b, l...)
		}
		for _, p := range parts {
			b = append(b, p...)
		}
		for _, l := range lines[at:] {
			b = append(b, l...)
		}
		return b
	}
	streams := map[string][]byte{
		"whole":               good,
		"no final newline":    bytes.TrimSuffix(good, []byte("\n")),
		"blank lines":         splice(30, "\n  \n\r\n"),
		"bad line":            splice(57, `{"type":"attempt","attempt":0}`+"\n"),
		"truncated last line": append(append([]byte(nil), good...), `{"type":"attempt","at":`...),
		"second meta":         splice(44, string(lines[0])),
		"after the end":       append(append([]byte(nil), good...), lines[3]...),
		"long line":           splice(20, `{"type":"attempt","attempt":1,"at":1,"done":2,"path":"`+strings.Repeat("x", 3000)+`"}`+"\n"),
		"empty":               nil,
	}
	for name, data := range streams {
		if len(data) > 0 {
			data = data[len(lines[0]):] // as the analyzer: the meta was read by Decode
		}
		want, wantErr := decodeAll(data)
		for _, chunk := range []int{7, 100, 1000, 0} {
			for _, workers := range []int{1, 3} {
				for _, borrow := range []bool{false, true} {
					got, gotErr := batchAll(t, data, workers, chunk, borrow)
					if gotErr != wantErr || strings.Join(got, "\n") != strings.Join(want, "\n") {
						t.Errorf("%s (chunk %d, %d workers, borrow %v): %d records, error %q; want %d, %q",
							name, chunk, workers, borrow, len(got), gotErr, len(want), wantErr)
					}
				}
			}
		}
	}
}

// FuzzDecodeBatches: any stream gives the same records and error through
// DecodeBatches as through Decode.
func FuzzDecodeBatches(f *testing.F) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	for _, a := range sampleAttempts() {
		enc.EncodeAttempt(&a)
	}
	enc.EncodeEnd(&End{At: 9, Reason: EndCompleted})
	enc.Flush()
	f.Add(buf.Bytes(), uint8(5))
	f.Add([]byte("\n{\"type\":\"outcome\",\"result\":\"ok\"}\n{"), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		want, wantErr := decodeAll(data)
		got, gotErr := batchAll(t, data, 2, int(chunk)+1, true)
		if gotErr != wantErr || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%d records, error %q; want %d, %q", len(got), gotErr, len(want), wantErr)
		}
	})
}
