package analyzer

import (
	"strings"
	"testing"

	"github.com/retrylab/retrylab/timeline"
)

// writes builds a timeline of POSTs: each (client, path, key digest)
// answered 201 at once, in order, by a run or a serve recording.
func writes(recorder string, w ...[3]string) []timeline.Record {
	recs := []timeline.Record{{Type: timeline.TypeMeta, Meta: &timeline.Meta{Format: timeline.Format, Recorder: recorder, Scenario: "writes",
		Expect: &timeline.Expect{Checks: []string{CheckIdempotency}}}}}
	for i, x := range w {
		at := int64(i+1) * int64(ms)
		recs = append(recs, timeline.Record{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: x[0], Key: x[1], Attempt: 1, Method: "POST",
			Path: x[1], At: at, Done: at + int64(ms), Status: 201, IdemKey: x[2]}})
	}
	return recs
}

// TestIdempotencyKeyNamesOneWrite: one Idempotency-Key sent for two
// different writes (another path, within a client or across clients)
// FAILs idempotency, naming both; a key per write passes; the same
// write's key seen again is not a reuse.
func TestIdempotencyKeyNamesOneWrite(t *testing.T) {
	for _, rec := range []string{"run", "serve"} {
		v, _ := judgeRecords(writes(rec, [3]string{"3", "/c/3/r/0", "aaaa"}, [3]string{"3", "/c/3/r/1", "aaaa"}), Options{})
		c := v.Check(CheckIdempotency)
		if c.Status != StatusFail || len(c.Examples) == 0 || !strings.Contains(c.Examples[0].Detail, "key digest aaaa was sent for POST /c/3/r/0 and POST /c/3/r/1") {
			t.Errorf("%s: one key for two writes: %s %+v; want fail naming both", rec, c.Status, c.Examples)
		}
		v, _ = judgeRecords(writes(rec, [3]string{"3", "/c/3/r/0", "aaaa"}, [3]string{"4", "/c/4/r/0", "aaaa"}), Options{})
		if c := v.Check(CheckIdempotency); c.Status != StatusFail {
			t.Errorf("%s: one key across two clients: %s (%s); want fail", rec, c.Status, c.Reason)
		}
		v, _ = judgeRecords(writes(rec, [3]string{"3", "/c/3/r/0", "aaaa"}, [3]string{"3", "/c/3/r/1", "bbbb"}, [3]string{"3", "/c/3/r/0", "aaaa"}), Options{})
		if c := v.Check(CheckIdempotency); c.Status != StatusPass {
			t.Errorf("%s: a key per write: %s (%s); want pass", rec, c.Status, c.Reason)
		}
	}
}

// TestIdempotencyFreshKeySaysSo: a retry with a fresh key is told apart
// from one with none in the reason.
func TestIdempotencyFreshKeySaysSo(t *testing.T) {
	recs := writes("run", [3]string{"1", "/c/1/r/0", "aaaa"})
	recs[1].Attempt.Status = 503
	recs = append(recs, timeline.Record{Type: timeline.TypeAttempt, Attempt: timeline.Attempt{Client: "1", Key: "/c/1/r/0", Attempt: 2, Method: "POST",
		Path: "/c/1/r/0", At: int64(50 * ms), Done: int64(51 * ms), Status: 201, IdemKey: "bbbb"}})
	v, _ := judgeRecords(recs, Options{})
	c := v.Check(CheckIdempotency)
	if c.Status != StatusFail || !strings.Contains(c.Reason, "1 a fresh key per attempt") || strings.Contains(c.Reason, "carried no Idempotency-Key") {
		t.Errorf("a fresh key per attempt: %s (%s); want fail saying a fresh key", c.Status, c.Reason)
	}
}
