package timeline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

var mergeEpoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// mergeMeta returns the meta record of one process of a fleet spread over
// several: a serve replica ("serve") or a run shard ("run", shard "i/n").
func testMergeMeta(recorder, shard, host string) *Meta {
	m := &Meta{Format: Format, Recorder: recorder, Scenario: "outage-bare", Seed: 7, Start: mergeEpoch, Epoch: mergeEpoch, Host: host,
		Phases: []Phase{{Name: "outage", Start: 0, End: 2e9, Respond: "status 503"}, {Name: "recovered", Start: 2e9, Respond: "ok"}}}
	if recorder == "run" {
		m.Subject, m.Shard = "retrylab", shard
		m.Policy = &Policy{Base: 1e8, Cap: 4e9, Jitter: "full"}
		m.Fleet = &Fleet{Clients: 4, Requests: 1, Method: "GET"}
		m.Duration = 10e9
		sh, _ := ParseShard(shard)
		m.Scheduled = int64(sh.Clients(4))
		m.Notes = []string{"fleet only"}
	}
	return m
}

// encodeFile writes meta and then recs (Attempt, Outcome or *End values).
func encodeFile(t testing.TB, meta *Meta, recs ...any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	if err := enc.EncodeMeta(meta); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		var err error
		switch r := r.(type) {
		case Attempt:
			err = enc.EncodeAttempt(&r)
		case Outcome:
			err = enc.EncodeOutcome(&r)
		case *End:
			err = enc.EncodeEnd(r)
		default:
			t.Fatalf("encodeFile: %T", r)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func att(client, seq, n int, at, done int64, status int) Attempt {
	c := strconv.Itoa(client)
	return Attempt{Client: c, Key: c + "/" + strconv.Itoa(seq), Attempt: n, Method: "GET",
		Path: "/c/" + c + "/r/" + strconv.Itoa(seq), At: at, Done: done, Status: status}
}

func outc(client, seq int, sched, start, end int64, result string) Outcome {
	c := strconv.Itoa(client)
	return Outcome{Client: c, Key: c + "/" + strconv.Itoa(seq), Scheduled: sched, Start: start, End: end, Result: result}
}

type mergeCase struct {
	name string
	data []byte
}

func doMerge(t testing.TB, opts MergeOptions, files ...mergeCase) ([]Record, *MergeSummary, error) {
	t.Helper()
	in := make([]MergeInput, len(files))
	for i, f := range files {
		in[i] = MergeInput{Name: f.name, R: bytes.NewReader(f.data)}
	}
	var out bytes.Buffer
	sum, err := Merge(&out, in, opts)
	if err != nil {
		return nil, sum, err
	}
	dec := NewDecoder(&out)
	var recs []Record
	for {
		var r Record
		err := dec.Decode(&r)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the merged timeline does not decode: %v", err)
		}
		recs = append(recs, r)
	}
	return recs, sum, nil
}

// TestMergeJoinsStubsAndShards merges two stub recordings and two fleet
// shards: one meta record for the whole fleet, every record in time order,
// the end records joined.
func TestMergeJoinsStubsAndShards(t *testing.T) {
	stubA := encodeFile(t, testMergeMeta("serve", "", "h1"),
		att(0, 0, 1, 10, 20, 503), att(2, 0, 1, 11, 30, 503), att(0, 0, 2, 2e9, 2e9+5, 200), att(2, 0, 2, 2.1e9, 2.1e9+5, 200),
		&End{At: 3.2e9, Reason: EndInterrupted, Noise: &Noise{Source: NoiseSched + "+" + NoiseSleep, P50: 10, P99: 7e6, Max: 9e6, Samples: 5, CPUPressure: 40}})
	stubB := encodeFile(t, testMergeMeta("serve", "", "h1"),
		att(1, 0, 1, 12, 25, 503), att(3, 0, 1, 13, 40, 503), att(1, 0, 2, 2.05e9, 2.05e9+5, 200), att(3, 0, 2, 3e9, 3e9+5, 200))
	shard0 := encodeFile(t, testMergeMeta("run", "0/2", "h1"),
		outc(0, 0, 0, 1, 2e9+6, ResultOK), outc(2, 0, 0, 2, 2.1e9+6, ResultOK),
		&End{At: 2.2e9, Reason: EndCompleted, FleetReady: 5, Errors: []string{"one"}})
	shard1 := encodeFile(t, testMergeMeta("run", "1/2", "h1"),
		outc(1, 0, 0, 1, 2.05e9+6, ResultOK), outc(3, 0, 0, 3, 3e9+6, ResultCanceled),
		&End{At: 3.1e9, Reason: EndDuration, InFlight: 1, DialErrors: 2, FleetReady: 9, Noise: &Noise{Source: NoiseSleep + "+" + NoiseProbe, P50: 20, P99: 3e6, Max: 12e6, Samples: 7, CPUPressure: 10}})

	recs, sum, err := doMerge(t, MergeOptions{}, mergeCase{"a.ndjson", stubA}, mergeCase{"s0.ndjson", shard0}, mergeCase{"b.ndjson", stubB}, mergeCase{"s1.ndjson", shard1})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+8+4+1 {
		t.Fatalf("merged %d records; want 14 (meta, 8 attempts, 4 outcomes, end)", len(recs))
	}
	m := recs[0].Meta
	if m == nil {
		t.Fatal("first merged record is not meta")
	}
	if m.Recorder != "run" || m.Shard != "" || m.Scheduled != 4 || m.Subject != "retrylab" || !m.Epoch.Equal(mergeEpoch) || !m.Start.Equal(mergeEpoch) {
		t.Errorf("merged meta = recorder %q shard %q scheduled %d subject %q epoch %v start %v; want run, no shard, 4, retrylab, the epoch twice",
			m.Recorder, m.Shard, m.Scheduled, m.Subject, m.Epoch, m.Start)
	}
	if m.ClockUncertainty != 0 || m.Host != "h1" {
		t.Errorf("files of one host: clock uncertainty %d, host %q; want 0, h1", m.ClockUncertainty, m.Host)
	}
	if len(m.Notes) != 2 || m.Notes[0] != "fleet only" || !strings.Contains(m.Notes[1], "merged from 4 files (2 stub recordings, 2 fleet files)") {
		t.Errorf("merged notes %q; want the inputs' note once, then the merge's", m.Notes)
	}
	last := int64(-1)
	for _, r := range recs[1 : len(recs)-1] {
		at := r.Attempt.Done
		if r.Type == TypeOutcome {
			at = r.Outcome.End
		}
		if at < last {
			t.Errorf("record %s %s at %d after one at %d: not in time order", r.Type, r.Attempt.Key+r.Outcome.Key, at, last)
		}
		last = at
	}
	e := recs[len(recs)-1].End
	// The noise of every process that measured it, the stubs' too.
	want := &End{At: 3.1e9, Reason: EndDuration, InFlight: 1, DialErrors: 2, FleetReady: 9, Errors: []string{"shard 0/2: one"},
		Noise: &Noise{Source: "sched+sleep+probe", P50: 20, P99: 7e6, Max: 12e6, Samples: 12, CPUPressure: 40}}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("merged end = %+v; want %+v", e, want)
	}
	if sum.Attempts != 8 || sum.Outcomes != 4 || sum.Renumbered != 0 || !reflect.DeepEqual(sum.End, want) {
		t.Errorf("summary = %+v; want 8 attempts, 4 outcomes, none renumbered, the end", sum)
	}
}

// TestMergeRebasesOnStart: an input whose time zero is later than the
// epoch has its instants moved by the difference.
func TestMergeRebasesOnStart(t *testing.T) {
	late := testMergeMeta("serve", "", "h2")
	late.Start = mergeEpoch.Add(1500 * time.Millisecond)
	a := att(0, 0, 1, 100, 200, 503)
	a.RetryAfter, a.NotBefore, a.HasNotBefore = "1", 1e9+200, true
	stub := encodeFile(t, late, a)
	fleet := encodeFile(t, testMergeMeta("run", "", "h1"), outc(0, 0, 0, 50, 1e9, ResultOK), &End{At: 1e9, Reason: EndCompleted})
	recs, _, err := doMerge(t, MergeOptions{}, mergeCase{"stub", stub}, mergeCase{"fleet", fleet})
	if err != nil {
		t.Fatal(err)
	}
	// The outcome (end 1 s) now precedes the attempt (done 1.5 s + 200 ns).
	if recs[1].Type != TypeOutcome || recs[2].Type != TypeAttempt {
		t.Fatalf("merged order %s, %s; want the outcome first", recs[1].Type, recs[2].Type)
	}
	got := recs[2].Attempt
	const off = int64(1500 * time.Millisecond)
	if got.At != 100+off || got.Done != 200+off || got.NotBefore != 1e9+200+off {
		t.Errorf("re-based attempt at %d done %d not_before %d; want each +%d", got.At, got.Done, got.NotBefore, off)
	}
	if o := recs[1].Outcome; o.Start != 50 || o.End != 1e9 {
		t.Errorf("outcome of the file on the epoch moved: start %d end %d", o.Start, o.End)
	}
	if m := recs[0].Meta; m.ClockUncertainty != int64(DefaultClockUncertainty) || m.Host != "" {
		t.Errorf("files of two hosts: uncertainty %d host %q; want the default %d, no host", m.ClockUncertainty, m.Host, DefaultClockUncertainty)
	}
}

// TestMergeRenumbersAcrossReplicas: a logical request whose retries went to
// two replicas, each numbering only what it saw, is numbered in merged
// order; one that stayed on one replica keeps its numbers, even out of
// arrival order.
func TestMergeRenumbersAcrossReplicas(t *testing.T) {
	stubA := encodeFile(t, testMergeMeta("serve", "", "h1"),
		att(0, 0, 1, 10, 20, 503),
		// client 1 hedges: its attempt 2 (longer) is answered after attempt 3.
		att(1, 0, 1, 10, 20, 503), att(1, 0, 3, 60, 70, 503),
		att(0, 0, 2, 300, 310, 200), // A's second sighting: the request's third attempt
		att(1, 0, 2, 50, 400, 200))
	stubB := encodeFile(t, testMergeMeta("serve", "", "h1"),
		att(0, 0, 1, 100, 110, 503)) // B's first sighting: the second attempt
	recs, sum, err := doMerge(t, MergeOptions{}, mergeCase{"a", stubA}, mergeCase{"b", stubB})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs[1:] {
		got = append(got, fmt.Sprintf("%s#%d@%d", r.Attempt.Key, r.Attempt.Attempt, r.Attempt.At))
	}
	want := []string{"0/0#1@10", "1/0#1@10", "1/0#3@60", "0/0#2@100", "0/0#3@300", "1/0#2@50"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merged attempts %v; want %v", got, want)
	}
	if sum.Renumbered != 2 {
		t.Errorf("renumbered %d; want 2 (B's attempt and A's after it)", sum.Renumbered)
	}
	if m := recs[0].Meta; m.Recorder != "serve" || m.Scheduled != 0 || recs[len(recs)-1].Type == TypeEnd {
		t.Errorf("stub recordings alone: recorder %q scheduled %d; want a serve timeline without an end record", m.Recorder, m.Scheduled)
	}
}

// TestMergeForgetsClosedRequests: the renumbering table holds the requests
// in flight, not every request of the run, when outcomes close them; and
// at most two generations of requests without outcomes.
func TestMergeForgetsClosedRequests(t *testing.T) {
	const n = 20000
	var stubs [2][]any
	var fleet []any
	for i := range n {
		at := int64(i) * int64(time.Millisecond)
		stubs[i%2] = append(stubs[i%2], att(i, 0, 1, at, at+10, 200))
		fleet = append(fleet, outc(i, 0, at, at, at+20, ResultOK))
	}
	fleet = append(fleet, &End{At: n * 1e6, Reason: EndCompleted})
	meta := testMergeMeta("run", "", "h1")
	meta.Fleet.Clients, meta.Scheduled = n, n
	stub := testMergeMeta("serve", "", "h1")
	_, sum, err := doMerge(t, MergeOptions{}, mergeCase{"a", encodeFile(t, stub, stubs[0]...)}, mergeCase{"b", encodeFile(t, stub, stubs[1]...)},
		mergeCase{"fleet", encodeFile(t, meta, fleet...)})
	if err != nil {
		t.Fatal(err)
	}
	// One request starts per ms; the table forgets one 2 s after its
	// outcome: about 2,000 at a time.
	if sum.PeakKeys < 1900 || sum.PeakKeys > 2100 || sum.Attempts != n || sum.Outcomes != n {
		t.Errorf("peak keys %d, attempts %d, outcomes %d; want about 2,000 (requests of the last 2 s), %d, %d", sum.PeakKeys, sum.Attempts, sum.Outcomes, n, n)
	}
	// The coverage check forgets a request at its backed outcome: one at
	// a time here.
	if sum.CoverageKeys != 1 || sum.Problems != nil {
		t.Errorf("the coverage table held %d requests at most, problems %q; want 1, none", sum.CoverageKeys, sum.Problems)
	}
	// Requests without outcomes: two generations at most.
	defer func(n int) { mergeMaxKeys = n }(mergeMaxKeys)
	mergeMaxKeys = 1000
	var many [2][]any
	for i := range 3 * mergeMaxKeys {
		many[i%2] = append(many[i%2], att(i, 0, 1, int64(i), int64(i)+1, 200))
	}
	_, sum, err = doMerge(t, MergeOptions{}, mergeCase{"a", encodeFile(t, stub, many[0]...)}, mergeCase{"b", encodeFile(t, stub, many[1]...)})
	if err != nil {
		t.Fatal(err)
	}
	if sum.PeakKeys > 2*mergeMaxKeys || sum.PeakKeys < mergeMaxKeys {
		t.Errorf("%d requests without outcomes: peak keys %d; want between %d and %d (two generations)", 3*mergeMaxKeys, sum.PeakKeys, mergeMaxKeys, 2*mergeMaxKeys)
	}
}

func TestMergeStatesUncertainty(t *testing.T) {
	file := func(host string, stated int64) []byte {
		m := testMergeMeta("serve", "", host)
		m.ClockUncertainty = stated
		return encodeFile(t, m, att(0, 0, 1, 1, 2, 200))
	}
	for _, c := range []struct {
		name   string
		opts   MergeOptions
		hosts  []string
		stated int64
		want   int64
	}{
		{"one host", MergeOptions{}, []string{"h", "h"}, 0, 0},
		{"two hosts", MergeOptions{}, []string{"h", "g"}, 0, int64(DefaultClockUncertainty)},
		{"a host unknown", MergeOptions{}, []string{"h", ""}, 0, int64(DefaultClockUncertainty)},
		{"stated by the user", MergeOptions{ClockUncertainty: 3 * time.Millisecond, UncertaintySet: true}, []string{"h", "g"}, 0, 3e6},
		{"stated zero", MergeOptions{UncertaintySet: true}, []string{"h", "g"}, 0, 0},
		{"an input's is larger", MergeOptions{}, []string{"h", "h"}, 25e6, 25e6},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs, _, err := doMerge(t, c.opts, mergeCase{"a", file(c.hosts[0], c.stated)}, mergeCase{"b", file(c.hosts[1], 0)})
			if err != nil {
				t.Fatal(err)
			}
			if got := recs[0].Meta.ClockUncertainty; got != c.want {
				t.Errorf("clock uncertainty %d; want %d", got, c.want)
			}
		})
	}
}

// TestMergeWithoutEnd: a fleet file without its end record (a killed
// shard) leaves the merged timeline without one, as the analyzer must see.
func TestMergeWithoutEnd(t *testing.T) {
	s0 := encodeFile(t, testMergeMeta("run", "0/2", "h"), outc(0, 0, 0, 1, 2, ResultOK), &End{At: 3, Reason: EndCompleted})
	s1 := encodeFile(t, testMergeMeta("run", "1/2", "h"), outc(1, 0, 0, 1, 2, ResultOK))
	recs, sum, err := doMerge(t, MergeOptions{}, mergeCase{"s0", s0}, mergeCase{"s1", s1})
	if err != nil {
		t.Fatal(err)
	}
	if sum.End != nil || recs[len(recs)-1].Type == TypeEnd {
		t.Errorf("merged end %+v; want none (shard 1/2 has none)", sum.End)
	}
}

// TestMergeRefuses: inputs that are not of one run are errors naming the
// file (and the line, for a malformed record).
func TestMergeRefuses(t *testing.T) {
	good := func() *Meta { return testMergeMeta("serve", "", "h") }
	ok := encodeFile(t, good(), att(0, 0, 1, 1, 2, 200))
	with := func(f func(m *Meta)) []byte {
		m := good()
		f(m)
		return encodeFile(t, m, att(0, 0, 1, 1, 2, 200))
	}
	shard := func(s string, f func(m *Meta)) []byte {
		m := testMergeMeta("run", s, "h")
		if f != nil {
			f(m)
		}
		return encodeFile(t, m, &End{At: 1, Reason: EndCompleted})
	}
	for _, c := range []struct {
		name  string
		files []mergeCase
		want  string
	}{
		{"no input", nil, "timeline: merge: no input"},
		{"empty", []mergeCase{{"ok", ok}, {"e.ndjson", nil}}, "e.ndjson: empty"},
		{"no meta", []mergeCase{{"x.ndjson", []byte(`{"type":"attempt","client":"1","key":"1/0","attempt":1,"method":"GET","path":"/","at":1,"done":2}` + "\n")}}, "x.ndjson: the first record is attempt, not meta"},
		{"malformed", []mergeCase{{"ok", ok}, {"bad.ndjson", append(bytes.Clone(ok), "{\"type\":\"attempt\",\"at\":-1}\n"...)}}, "bad.ndjson:3: "},
		{"no epoch", []mergeCase{{"ok", ok}, {"old.ndjson", with(func(m *Meta) { m.Epoch = time.Time{} })}}, "old.ndjson: no epoch"},
		{"scenario", []mergeCase{{"ok", ok}, {"o.ndjson", with(func(m *Meta) { m.Scenario = "other" })}}, `o.ndjson: scenario "other"; ok is of "outage-bare"`},
		{"seed", []mergeCase{{"ok", ok}, {"s.ndjson", with(func(m *Meta) { m.Seed = 8 })}}, "s.ndjson: seed 8; ok has seed 7"},
		{"epoch", []mergeCase{{"ok", ok}, {"e.ndjson", with(func(m *Meta) { m.Epoch = m.Epoch.Add(time.Second); m.Start = m.Epoch })}}, "e.ndjson: epoch 2026-12-01T12:00:01Z; ok has epoch 2026-12-01T12:00:00Z"},
		{"phases", []mergeCase{{"ok", ok}, {"p.ndjson", with(func(m *Meta) { m.Phases[0].End = 3e9 })}}, "p.ndjson: its phases differ"},
		{"start before the epoch", []mergeCase{{"z.ndjson", with(func(m *Meta) { m.Start = m.Epoch.Add(-time.Second) })}}, "z.ndjson: its time zero"},
		{"bad shard", []mergeCase{{"b.ndjson", shard("3/2", nil)}}, `b.ndjson: timeline: shard "3/2"`},
		{"duplicate shard", []mergeCase{{"a", shard("0/2", nil)}, {"b", shard("1/2", nil)}, {"c", shard("0/2", nil)}}, "c: shard 0/2 again (a is that shard too)"},
		{"missing shard", []mergeCase{{"a", shard("0/3", nil)}, {"c", shard("2/3", nil)}}, "timeline: merge: shard 1/3 missing"},
		{"shard counts", []mergeCase{{"a", shard("0/2", nil)}, {"b", shard("1/3", nil)}}, "b: shard 1/3, of 3; a is a shard of 2"},
		{"subject", []mergeCase{{"a", shard("0/2", nil)}, {"b", shard("1/2", func(m *Meta) { m.Subject = "no-retry" })}}, `b: subject "no-retry"; a ran "retrylab"`},
		{"policy", []mergeCase{{"a", shard("0/2", nil)}, {"b", shard("1/2", func(m *Meta) { m.Policy.Cap = 1 })}}, "b: its subject's policy differs"},
		{"fleet", []mergeCase{{"a", shard("0/2", nil)}, {"b", shard("1/2", func(m *Meta) { m.Fleet.Clients = 5 })}}, "b: its fleet or duration differs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := doMerge(t, MergeOptions{}, c.files...)
			var me *MergeError
			if !errors.As(err, &me) {
				t.Fatalf("Merge = %v; want a *MergeError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("Merge error %q; want it to contain %q", err, c.want)
			}
		})
	}
}

func TestParseShard(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Shard
		err  bool
	}{
		{"", Shard{}, false},
		{"0/1", Shard{0, 1}, false},
		{"2/3", Shard{2, 3}, false},
		{"3/3", Shard{}, true},
		{"-1/3", Shard{}, true},
		{"+1/3", Shard{}, true},
		{"1/0", Shard{}, true},
		{"1", Shard{}, true},
		{"a/b", Shard{}, true},
		{"0/10001", Shard{}, true},
		{" 0/2", Shard{}, true},
	} {
		got, err := ParseShard(c.in)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("ParseShard(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
	}
	s := Shard{1, 3}
	var ids []int
	for id := range 10 {
		if s.Has(id) {
			ids = append(ids, id)
		}
	}
	if !reflect.DeepEqual(ids, []int{1, 4, 7}) || s.Clients(10) != 3 || s.Clients(1) != 0 || s.Clients(2) != 1 || s.String() != "1/3" {
		t.Errorf("shard 1/3 of 10 clients: ids %v, Clients(10) %d, Clients(1) %d, Clients(2) %d, %q; want [1 4 7], 3, 0, 1, 1/3",
			ids, s.Clients(10), s.Clients(1), s.Clients(2), s.String())
	}
	if (Shard{}).String() != "" || !(Shard{0, 1}).Whole() || (Shard{}).Clients(5) != 5 {
		t.Error("the zero Shard is not the whole fleet")
	}
}

// FuzzMerge merges two arbitrary streams: Merge never panics, refuses
// with a *MergeError, or writes a timeline that decodes whole and holds
// every attempt and outcome it counted.
func FuzzMerge(f *testing.F) {
	stub := encodeFile(f, testMergeMeta("serve", "", "h"), att(0, 0, 1, 1, 2, 503), att(0, 0, 1, 5, 6, 200))
	fleet := encodeFile(f, testMergeMeta("run", "", "g"), outc(0, 0, 0, 1, 7, ResultOK), &End{At: 8, Reason: EndCompleted})
	f.Add(stub, fleet)
	f.Add(fleet, fleet)
	f.Add(stub, []byte("{\"type\":\"meta\"}\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var out bytes.Buffer
		sum, err := Merge(&out, []MergeInput{{Name: "a", R: bytes.NewReader(a)}, {Name: "b", R: bytes.NewReader(b)}}, MergeOptions{})
		if err != nil {
			var me *MergeError
			if !errors.As(err, &me) {
				t.Fatalf("Merge error %v (%T); want a *MergeError", err, err)
			}
			return
		}
		dec := NewDecoder(&out)
		var n int64
		for {
			var r Record
			err := dec.Decode(&r)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("merged timeline does not decode: %v", err)
			}
			if r.Type == TypeAttempt || r.Type == TypeOutcome {
				n++
			}
		}
		if n != sum.Attempts+sum.Outcomes {
			t.Fatalf("merged timeline holds %d attempts and outcomes; the summary counts %d", n, sum.Attempts+sum.Outcomes)
		}
	})
}

// FuzzParseShard: ParseShard never panics, and what it accepts prints
// back to the same shard.
func FuzzParseShard(f *testing.F) {
	for _, s := range []string{"", "0/1", "2/3", "3/3", "-1/2", "x", "1/", "/2", "9999/10000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := ParseShard(s)
		if err != nil {
			return
		}
		back, err := ParseShard(sh.String())
		if err != nil || back.Whole() != sh.Whole() || (!sh.Whole() && back != sh) {
			t.Fatalf("ParseShard(%q) = %v; its String %q parses to %v, %v", s, sh, sh.String(), back, err)
		}
	})
}

// TestMergeCopiesUnchangedLines: a record the merge leaves as it is (on
// the epoch, its number kept) is copied byte for byte, fields this version
// does not know included; one it changes is encoded anew.
func TestMergeCopiesUnchangedLines(t *testing.T) {
	meta := encodeFile(t, testMergeMeta("serve", "", "h"))
	line := `{"type":"attempt","client":"0","key":"0/0","attempt":1,"method":"GET","path":"/c/0/r/0","at":1,"done":2,"status":503,"future":[1,2]}`
	a := append(bytes.Clone(meta), line+"\n"...)
	b := append(bytes.Clone(meta), `{"type":"attempt","client":"0","key":"0/0","attempt":1,"method":"GET","path":"/c/0/r/0","at":5,"done":6,"status":200,"future":3}`+"\n"...)
	var out bytes.Buffer
	if _, err := Merge(&out, []MergeInput{{Name: "a", R: bytes.NewReader(a)}, {Name: "b", R: bytes.NewReader(b)}}, MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || lines[1] != line || strings.Contains(lines[2], "future") || !strings.Contains(lines[2], `"attempt":2`) {
		t.Errorf("merged lines:\n%s\nwant the meta, a's line as it was, b's renumbered without the unknown field", strings.Join(lines, "\n"))
	}
}

// TestMergeNamesUnbackedOutcomes: a merge that leaves a stub's recording
// out says so in the merged end record, per shard and file: outcomes of
// requests no recording holds, and outcomes that report more attempts than
// the recordings hold. Attempts answered after their outcome (abandoned),
// outcomes that claim nothing (unstarted), and keys of another form are
// judged alike; a complete merge says nothing.
func TestMergeNamesUnbackedOutcomes(t *testing.T) {
	ok := func(client int, attempts int, end int64) Outcome {
		o := outc(client, 0, 0, 1, end, ResultOK)
		o.Status, o.Attempts = 200, attempts
		return o
	}
	abandoned := att(0, 0, 2, 1e9, 3e9, 200) // answered after its outcome ended
	abandoned.Fault = FaultAbandoned
	odd := Attempt{Client: "x", Key: "x/a", Attempt: 1, Method: "GET", Path: "/x", At: 5, Done: 6, Status: 200}
	oddOutcome := Outcome{Client: "x", Key: "x/a", Start: 1, End: 7, Result: ResultOK, Status: 200, Attempts: 1}
	oddMissing := Outcome{Client: "x", Key: "x/b", Start: 1, End: 8, Result: ResultOK, Status: 200, Attempts: 1}
	// Clients 0, 1, 2 went to stub A, client 3 to stub B, client 2's
	// retry too.
	stubA := encodeFile(t, testMergeMeta("serve", "", "h1"),
		odd, att(0, 0, 1, 10, 20, 503), att(1, 0, 1, 11, 21, 503), att(2, 0, 1, 12, 22, 503),
		att(1, 0, 2, 2e9, 2e9+5, 200), abandoned)
	stubB := encodeFile(t, testMergeMeta("serve", "", "h1"),
		att(3, 0, 1, 13, 23, 503), att(2, 0, 1, 2.05e9, 2.05e9+5, 200), att(3, 0, 2, 2.1e9, 2.1e9+5, 200))
	unstarted := outc(1, 1, 5e9, 0, 5e9, ResultCanceled)
	shard0 := encodeFile(t, testMergeMeta("run", "0/2", "h1"),
		oddOutcome, oddMissing, ok(0, 2, 2e9), ok(2, 2, 2.05e9+6),
		&End{At: 5e9, Reason: EndCompleted, DialErrors: 3, Errors: []string{"one"}})
	shard1 := encodeFile(t, testMergeMeta("run", "1/2", "h1"),
		ok(1, 2, 2e9+6), ok(3, 0, 2.1e9+6), unstarted,
		&End{At: 5e9, Reason: EndCompleted})

	_, sum, err := doMerge(t, MergeOptions{}, mergeCase{"stub-a.ndjson", stubA}, mergeCase{"stub-b.ndjson", stubB},
		mergeCase{"s0.ndjson", shard0}, mergeCase{"s1.ndjson", shard1})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Problems) != 1 || sum.End == nil || !reflect.DeepEqual(sum.End.Errors, []string{"shard 0/2: one", sum.Problems[0]}) {
		t.Fatalf("complete merge: problems %q, end %+v; want only x/b, which no stub saw", sum.Problems, sum.End)
	}
	if want := "1 outcome of shard 0/2 (file s0.ndjson) names a logical request no recording holds (such as x/b)"; !strings.HasPrefix(sum.Problems[0], want) {
		t.Errorf("complete merge: problem %q; want %q", sum.Problems[0], want)
	}
	// The table forgets a request once its outcome is backed: at most
	// x/b, then 0/0 (its outcome in before its abandoned second attempt),
	// 1/0, 2/0 and 3/0 at once; never the unstarted 1/1, which claims
	// nothing.
	if sum.CoverageKeys != 5 {
		t.Errorf("the coverage table held %d requests at most; want 5", sum.CoverageKeys)
	}

	// Stub B left out.
	recs, sum, err := doMerge(t, MergeOptions{}, mergeCase{"stub-a.ndjson", stubA}, mergeCase{"s0.ndjson", shard0}, mergeCase{"s1.ndjson", shard1})
	if err != nil {
		t.Fatal(err)
	}
	dial := " (its end record counts 3 dial errors: attempts that reached no stub)"
	want := []string{
		"shard 0/2: one",
		"1 outcome of shard 0/2 (file s0.ndjson) names a logical request no recording holds (such as x/b): a stub's recording is missing from the merge?" + dial,
		"1 outcome of shard 0/2 (file s0.ndjson) says more attempts for its logical request than the recordings hold (such as 2/0: 2 said, 1 recorded): a stub's recording is missing from the merge or cut short?" + dial,
		"1 outcome of shard 1/2 (file s1.ndjson) names a logical request no recording holds (such as 3/0): a stub's recording is missing from the merge?",
	}
	if !reflect.DeepEqual(sum.Problems, want[1:]) {
		t.Errorf("stub B left out: problems\n%s\nwant\n%s", strings.Join(sum.Problems, "\n"), strings.Join(want[1:], "\n"))
	}
	end := recs[len(recs)-1].End
	if end == nil || !reflect.DeepEqual(end.Errors, want) {
		t.Errorf("stub B left out: merged end %+v; want its errors %q", end, want)
	}

	// Without an end record to carry them, the summary still has them.
	_, sum, err = doMerge(t, MergeOptions{}, mergeCase{"stub-a.ndjson", stubA},
		mergeCase{"s0.ndjson", encodeFile(t, testMergeMeta("run", "0/2", "h1"), ok(2, 0, 5))}, mergeCase{"s1.ndjson", shard1})
	if err != nil {
		t.Fatal(err)
	}
	if sum.End != nil || len(sum.Problems) != 1 || !strings.HasPrefix(sum.Problems[0], "1 outcome of shard 1/2 (file s1.ndjson) names a logical request no recording holds (such as 3/0)") {
		t.Errorf("shard 0/2 without end: end %+v, problems %q; want no end, 3/0 named", sum.End, sum.Problems)
	}

	// Stub recordings alone: no outcomes, nothing tracked.
	_, sum, err = doMerge(t, MergeOptions{}, mergeCase{"stub-a.ndjson", stubA}, mergeCase{"stub-b.ndjson", stubB})
	if err != nil || sum.Problems != nil || sum.CoverageKeys != 0 {
		t.Errorf("stubs alone: %v, problems %q, coverage table %d; want none", err, sum.Problems, sum.CoverageKeys)
	}
}

// TestMergeNamesMissingStubAtScale: 300 logical requests over two shards,
// two thirds of them on stub A; without stub B's recording the merge
// counts, per shard, the outcomes of the 100 requests B alone saw, and
// names the smallest key of each as the example whatever the map order.
func TestMergeNamesMissingStubAtScale(t *testing.T) {
	var a, b []any
	var s [2][]any
	for i := range 300 {
		at := int64(i) * 1e6
		rec := att(i, 0, 1, at, at+10, 200)
		if i%3 == 2 {
			b = append(b, rec)
		} else {
			a = append(a, rec)
		}
		o := outc(i, 0, at, at, at+20, ResultOK)
		o.Status, o.Attempts = 200, 1
		s[i%2] = append(s[i%2], o)
	}
	meta := func(shard string) *Meta {
		m := testMergeMeta("run", shard, "h1")
		m.Fleet.Clients, m.Scheduled = 300, 150
		return m
	}
	s[0] = append(s[0], &End{At: 1e9, Reason: EndCompleted})
	s[1] = append(s[1], &End{At: 1e9, Reason: EndCompleted})
	_, sum, err := doMerge(t, MergeOptions{}, mergeCase{"stub-a.ndjson", encodeFile(t, testMergeMeta("serve", "", "h1"), a...)},
		mergeCase{"out/0/timeline.ndjson", encodeFile(t, meta("0/2"), s[0]...)}, mergeCase{"out/1/timeline.ndjson", encodeFile(t, meta("1/2"), s[1]...)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"50 outcomes of shard 0/2 (file out/0/timeline.ndjson) name logical requests no recording holds (such as 2/0): a stub's recording is missing from the merge?",
		"50 outcomes of shard 1/2 (file out/1/timeline.ndjson) name logical requests no recording holds (such as 5/0): a stub's recording is missing from the merge?",
	}
	// The table holds the 100 unbacked requests to the end, the backed
	// ones only until their outcome.
	if !reflect.DeepEqual(sum.Problems, want) || sum.Attempts != 200 || sum.Outcomes != 300 || sum.CoverageKeys != 100 {
		t.Errorf("problems\n%s\nattempts %d outcomes %d, coverage table %d at most; want\n%s\n200, 300, 100", strings.Join(sum.Problems, "\n"), sum.Attempts, sum.Outcomes, sum.CoverageKeys, strings.Join(want, "\n"))
	}
}

func TestPackKey(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0/0", 0, true},
		{"17/42", 17<<32 | 42, true},
		{"4294967295/4294967294", 1<<64 - 2, true},
		{"4294967295/4294967295", 0, false}, // keyTable's empty mark
		{"4294967296/0", 0, false},
		{"01/2", 0, false},
		{"1/02", 0, false},
		{"1/", 0, false},
		{"/1", 0, false},
		{"1", 0, false},
		{"1/2/3", 0, false},
		{"-1/2", 0, false},
		{"a/b", 0, false},
	} {
		got, ok := packKey(c.in)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("packKey(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
		if ok {
			if back := (keyOrder{set: true, num: got}).String(); back != c.in {
				t.Errorf("packKey(%q) prints back %q", c.in, back)
			}
		}
	}
}

// TestKeyTable: the coverage check's table agrees with a map through
// inserts, updates and deletes: in the smallest table (at most 45 of its
// 64 slots used, so probe runs often wrap around its end and deletes shift
// entries back across it), and in one that grows, with keys clustered as
// the fleet's are.
func TestKeyTable(t *testing.T) {
	for _, c := range []struct {
		name       string
		ops, every int // operations; a lookup of every key each so many
		key        func(r *rand.Rand) uint64
		wantGrowth bool
	}{
		{"small", 200_000, 97, func(r *rand.Rand) uint64 { return uint64(r.IntN(45)) }, false},
		{"growing", 200_000, 20_011, func(r *rand.Rand) uint64 {
			if r.IntN(7) == 0 {
				return math.MaxUint64 - 1 - uint64(r.IntN(10))
			}
			return uint64(r.IntN(50))<<32 | uint64(r.IntN(3000))
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			var tab keyTable
			want := map[uint64]int32{}
			for op := range c.ops {
				k := c.key(r)
				i, isNew := tab.slot(k)
				if _, had := want[k]; had == isNew {
					t.Fatalf("op %d: slot(%#x) new %v; the map had it: %v", op, k, isNew, had)
				}
				if r.IntN(3) == 0 {
					tab.removeAt(i)
					delete(want, k)
				} else {
					tab.slots[i].t.recorded++
					want[k]++
				}
				if tab.n != len(want) {
					t.Fatalf("op %d: table holds %d; the map %d", op, tab.n, len(want))
				}
				// Every key the map has is found where the table put it.
				if op%c.every == 0 {
					for k, n := range want {
						if i, isNew := tab.slot(k); isNew || tab.slots[i].t.recorded != n {
							t.Fatalf("op %d: lookup of %#x: new %v, %d; want %d", op, k, isNew, tab.slots[i].t.recorded, n)
						}
					}
				}
			}
			got := map[uint64]int32{}
			for _, s := range tab.slots {
				if s.k != 0 {
					got[s.k-1] = s.t.recorded
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the table's %d entries differ from the map's %d", len(got), len(want))
			}
			if grew := len(tab.slots) > 64; grew != c.wantGrowth {
				t.Errorf("%d slots for %d entries; want growth %v", len(tab.slots), tab.n, c.wantGrowth)
			}
		})
	}
}
