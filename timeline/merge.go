package timeline

import (
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultClockUncertainty is the clock uncertainty Merge states for files
// from several hosts when MergeOptions does not set one. Clocks cannot be
// compared offline, after the run: this is an assumption, not a
// measurement. NTP-disciplined hosts in one data centre usually agree
// within a few milliseconds (chrony's "System time" offset is often well
// under one); 10 ms leaves room for that and is small against the
// second-scale waits Retry-After asks for.
const DefaultClockUncertainty = 10 * time.Millisecond

// MergeInput is one timeline to merge: a `serve` recording or a fleet
// file (a `run` shard's).
type MergeInput struct {
	Name string // names the input in errors: its path
	R    io.Reader
}

// MergeOptions tune Merge; the zero value states the clock uncertainty
// from the inputs' hosts.
type MergeOptions struct {
	// ClockUncertainty, when UncertaintySet, is the merged timeline's
	// Meta.ClockUncertainty whatever the hosts. Otherwise it is 0 when
	// every input names one host (Meta.Host) and DefaultClockUncertainty
	// when they name several or some name none. Either way an input that
	// states a larger one (a merged file merged again) keeps it.
	ClockUncertainty time.Duration
	UncertaintySet   bool
}

// MergeSummary is what Merge wrote.
type MergeSummary struct {
	Meta     *Meta // the merged meta record
	End      *End  // the merged end record; nil when none was written
	Attempts int64
	Outcomes int64
	// Renumbered counts attempts whose number Merge changed: retries of
	// one logical request that reached several stub replicas, each of
	// which numbered only the attempts it saw.
	Renumbered int64
	// PeakKeys is the most logical requests the renumbering table held at
	// once: Merge's memory beyond one record per input. It stays near the
	// requests in flight at a time when the fleet files' outcomes close
	// them, and under 2 × 262,144 (two generations) otherwise.
	PeakKeys int
	// Problems are the sentences Merge found the fleet files' outcomes
	// and the recordings disagree with (see Merge): written into the
	// merged end record's Errors, which make the verdict INCONCLUSIVE,
	// and listed here even when there is no end record to carry them.
	Problems []string
	// CoverageKeys is the most logical requests the coverage check held
	// at once (see Merge): about the requests in flight when the
	// recordings back the outcomes, up to every unbacked one when they do
	// not; 0 without a fleet file.
	CoverageKeys int
}

// A MergeError is an input Merge cannot join: unreadable, malformed, or
// not of the same run as the others. Name is the input's ("" when the
// problem is the set, such as a missing shard).
type MergeError struct {
	Name string
	Err  error
}

func (e *MergeError) Error() string {
	var se *SyntaxError
	switch {
	case e.Name == "":
		return "timeline: merge: " + e.Err.Error()
	case errors.As(e.Err, &se):
		return fmt.Sprintf("timeline: merge: %s:%d: %s", e.Name, se.Line, se.Msg)
	}
	return "timeline: merge: " + e.Name + ": " + e.Err.Error()
}

func (e *MergeError) Unwrap() error { return e.Err }

// Merge joins the timelines of one run spread over several processes —
// the `serve` replicas' recordings (attempts) and the `run` shards' fleet
// files (outcomes, end record) — into one timeline on w that the analyzer
// and the reports read as they read a one-process run.
//
// Every input must be of the same run (scenario, seed, phases, epoch; the
// fleet files' subject, policy and fleet, every shard once): the first
// that is not is a *MergeError naming it. Each input, already in time
// order, is re-based onto the epoch through its wall-clock anchor and
// merged by time, one record per input held at a time, so memory does not
// grow with the files; attempts of a request that reached several replicas
// are renumbered in merged order, and a record the merge does not change
// is copied as read. With a fleet file among the inputs, outcomes that no
// recording backs are reported per shard in the merged end record's Errors
// (INCONCLUSIVE for the analyzer) and in MergeSummary.Problems. The merged
// meta and end record join the inputs' (the meta states the clock
// uncertainty, see MergeOptions). docs/fleets.md and docs/cli.md (merge)
// state the rules and what the check cannot see. Merge does not close w's
// underlying writer; it flushes what it wrote.
func Merge(w io.Writer, inputs []MergeInput, opts MergeOptions) (*MergeSummary, error) {
	if len(inputs) == 0 {
		return nil, &MergeError{Err: errors.New("no input")}
	}
	srcs := make([]*mergeSrc, len(inputs))
	for i, in := range inputs {
		s := &mergeSrc{name: in.Name, dec: NewDecoder(in.R), idx: i}
		var first Record
		err := s.dec.Decode(&first)
		switch {
		case err == io.EOF:
			return nil, &MergeError{Name: in.Name, Err: errors.New("empty: no meta record")}
		case err != nil:
			return nil, &MergeError{Name: in.Name, Err: err}
		case first.Type != TypeMeta:
			return nil, &MergeError{Name: in.Name, Err: fmt.Errorf("the first record is %s, not meta: not a retrylab timeline", first.Type)}
		}
		s.meta = first.Meta
		s.fleet = s.meta.Recorder != "serve"
		srcs[i] = s
	}
	meta, err := mergeMeta(srcs, opts)
	if err != nil {
		return nil, err
	}
	// With more than one CPU each input is decoded on a goroutine of its
	// own, a few batches of records ahead of the merge.
	if runtime.GOMAXPROCS(0) > 1 {
		done := make(chan struct{})
		var wg sync.WaitGroup
		defer func() {
			close(done)
			wg.Wait()
		}()
		for _, s := range srcs {
			s.decodeAhead(done, &wg)
		}
	}
	sum := &MergeSummary{Meta: meta}
	enc := NewEncoder(w)
	if err := enc.EncodeMeta(meta); err != nil {
		return nil, err
	}

	h := make(mergeHeap, 0, len(srcs))
	for _, s := range srcs {
		ok, err := s.next()
		if err != nil {
			return nil, err
		}
		if ok {
			h.push(s)
		}
	}
	// Only stub recordings' attempts can be of a request another input saw
	// too (a shard's clients are its own): with fewer than two of them
	// nothing is renumbered.
	var rn *renumber
	stubs := 0
	for _, s := range srcs {
		if !s.fleet {
			stubs++
		}
	}
	if stubs >= 2 {
		rn = newRenumber(2*int64(time.Second) + meta.ClockUncertainty)
	}
	var cov *coverage
	if stubs < len(srcs) && mergeCoverage {
		cov = newCoverage()
	}
	for len(h) > 0 {
		s := h[0]
		rec := s.rec
		// A record the merge does not change is copied as it was read.
		same := s.off == 0
		var err error
		switch rec.Type {
		case TypeAttempt:
			a := &rec.Attempt
			a.At, a.Done = rebase(a.At, s.off), rebase(a.Done, s.off)
			if a.HasNotBefore {
				a.NotBefore = rebase(a.NotBefore, s.off)
			}
			if rn != nil && !s.fleet {
				rn.advance(s.key)
				if rn.attempt(a, s.idx) {
					sum.Renumbered++
					same = false
				}
				sum.PeakKeys = max(sum.PeakKeys, len(rn.cur)+len(rn.prev))
			}
			if cov != nil {
				cov.attempt(a.Key)
			}
			sum.Attempts++
			if same {
				err = enc.writeLine(s.raw)
			} else {
				err = enc.EncodeAttempt(a)
			}
		case TypeOutcome:
			o := &rec.Outcome
			o.Scheduled, o.Start, o.End = rebase(o.Scheduled, s.off), rebase(o.Start, s.off), rebase(o.End, s.off)
			if rn != nil && o.Result != ResultHung {
				rn.advance(s.key)
				rn.closed(o.Key, s.key)
			}
			if cov != nil && s.fleet {
				cov.outcome(o, s.idx)
			}
			sum.Outcomes++
			if same {
				err = enc.writeLine(s.raw)
			} else {
				err = enc.EncodeOutcome(o)
			}
		}
		if err != nil {
			return sum, err
		}
		ok, err := s.next()
		if err != nil {
			return sum, err
		}
		if ok {
			h.fix()
		} else {
			h.pop()
		}
	}
	end := mergeEnd(srcs)
	if cov != nil {
		sum.Problems = cov.problems(srcs)
		sum.CoverageKeys = cov.peak
		if end != nil {
			end.Errors = append(end.Errors, sum.Problems...)
			end.Unbacked = cov.Unbacked()
		}
	}
	if end != nil {
		if err := enc.EncodeEnd(end); err != nil {
			return sum, err
		}
		sum.End = end
	}
	return sum, enc.Flush()
}

// mergeSrc is one input being merged: its meta, its offset onto the
// epoch, and the record it holds next.
type mergeSrc struct {
	name  string
	dec   *Decoder
	idx   int
	meta  *Meta
	fleet bool  // a fleet file (Recorder "run"), not a serve recording
	shard Shard // a fleet file's
	off   int64 // ns added to every instant: Start − Epoch
	rec   *Record
	raw   []byte // rec's line as read, valid until the next read
	key   int64  // rec's merge time, re-based
	end   *End   // the input's end record, once read

	own Record // rec's storage when decoding in line
	// With decodeAhead: batches of decoded records come on full and go
	// back on free; cur is the one being read, at index i.
	full, free chan *recBatch
	cur        *recBatch
	i          int
}

// recBatch is a run of decoded records, their lines (record i's is
// lines[ends[i-1]:ends[i]]), and the error that ended the run.
type recBatch struct {
	recs  []Record
	lines []byte
	ends  []int
	err   error
}

// mergeBatch is how many records a batch holds; mergeBatches how many
// batches each input has (one being read, the others decoded ahead).
const (
	mergeBatch   = 512
	mergeBatches = 3
)

// decodeAhead starts the goroutine that decodes the input into batches,
// until the input ends or done is closed.
func (s *mergeSrc) decodeAhead(done <-chan struct{}, wg *sync.WaitGroup) {
	s.full, s.free = make(chan *recBatch, mergeBatches), make(chan *recBatch, mergeBatches)
	for range mergeBatches {
		s.free <- &recBatch{recs: make([]Record, mergeBatch), ends: make([]int, mergeBatch), lines: make([]byte, 0, 128*mergeBatch)}
	}
	wg.Go(func() {
		for {
			var b *recBatch
			select {
			case b = <-s.free:
			case <-done:
				return
			}
			b.recs, b.lines = b.recs[:cap(b.recs)], b.lines[:0]
			n := 0
			for n < len(b.recs) {
				if b.err = s.dec.Decode(&b.recs[n]); b.err != nil {
					break
				}
				b.lines = append(b.lines, s.dec.raw...)
				b.ends[n] = len(b.lines)
				n++
			}
			b.recs = b.recs[:n]
			select {
			case s.full <- b:
			case <-done:
				return
			}
			if b.err != nil {
				return
			}
		}
	})
}

// read returns the input's next record and its line (both valid until
// the next read).
func (s *mergeSrc) read() (*Record, []byte, error) {
	if s.full == nil {
		err := s.dec.Decode(&s.own)
		return &s.own, s.dec.raw, err
	}
	for s.cur == nil || s.i == len(s.cur.recs) {
		if s.cur != nil {
			if err := s.cur.err; err != nil {
				return nil, nil, err
			}
			s.free <- s.cur
		}
		s.cur, s.i = <-s.full, 0
	}
	b, i := s.cur, s.i
	s.i++
	from := 0
	if i > 0 {
		from = b.ends[i-1]
	}
	return &b.recs[i], b.lines[from:b.ends[i]], nil
}

// next reads the input's next attempt or outcome into rec; false at the
// end of the input. An end record is kept for mergeEnd.
func (s *mergeSrc) next() (bool, error) {
	for {
		rec, raw, err := s.read()
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, &MergeError{Name: s.name, Err: err}
		}
		s.rec, s.raw = rec, raw
		switch rec.Type {
		case TypeAttempt:
			s.key = rebase(rec.Attempt.Done, s.off)
			return true, nil
		case TypeOutcome:
			s.key = rebase(rec.Outcome.End, s.off)
			return true, nil
		case TypeEnd:
			s.end = rec.End
		}
	}
}

// rebase moves instant v by off ns, saturating instead of overflowing.
func rebase(v, off int64) int64 {
	if off > 0 && v > math.MaxInt64-off {
		return math.MaxInt64
	}
	return v + off
}

// mergeHeap is a binary min-heap of inputs by their next record's time
// (input order breaks ties, so a merge is deterministic).
type mergeHeap []*mergeSrc

func (h mergeHeap) less(i, j int) bool {
	if h[i].key != h[j].key {
		return h[i].key < h[j].key
	}
	return h[i].idx < h[j].idx
}

func (h *mergeHeap) push(s *mergeSrc) {
	*h = append(*h, s)
	hh := *h
	for i := len(hh) - 1; i > 0; {
		p := (i - 1) / 2
		if !hh.less(i, p) {
			break
		}
		hh[i], hh[p] = hh[p], hh[i]
		i = p
	}
}

// fix restores the heap after the root's key grew.
func (h mergeHeap) fix() {
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(h) && h.less(l, m) {
			m = l
		}
		if r := l + 1; r < len(h) && h.less(r, m) {
			m = r
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// pop removes the root.
func (h *mergeHeap) pop() {
	hh := *h
	n := len(hh) - 1
	hh[0] = hh[n]
	hh[n] = nil
	*h = hh[:n]
	h.fix()
}

// mergeMaxKeys bounds each generation of renumber's table (a variable
// for tests).
var mergeMaxKeys = 1 << 18

// keyCount is what renumber knows of one logical request: the highest
// attempt number given, and the one input its attempts came from so far
// (-1: several).
type keyCount struct {
	n, src int32
	key    string // the table's key (a copy of the record's)
}

// renumber numbers attempts per logical request in merged order when they
// came from several inputs. Its table forgets a request some time after
// its outcome, and — for requests without one (a serve recording's own
// clients) — when a generation of mergeMaxKeys requests fills, as the stub's
// own counter does; a forgotten request's attempts keep their input's
// numbers.
type renumber struct {
	cur, prev map[string]*keyCount
	drops     []keyDrop
	head      int
	grace     int64
	now       int64
}

// keyDrop is a request to forget at an instant.
type keyDrop struct {
	kc *keyCount
	at int64
}

func newRenumber(grace int64) *renumber {
	return &renumber{cur: make(map[string]*keyCount), grace: grace}
}

// advance moves the merge's clock to t and forgets the requests whose
// outcome is older than the grace.
func (r *renumber) advance(t int64) {
	if t > r.now {
		r.now = t
	}
	for r.head < len(r.drops) && r.drops[r.head].at <= r.now {
		d := r.drops[r.head]
		r.drops[r.head] = keyDrop{}
		r.head++
		// An entry made anew since (a straggler's) goes too: its
		// attempts then keep their stub's numbers.
		delete(r.cur, d.kc.key)
		if r.prev != nil {
			delete(r.prev, d.kc.key)
		}
	}
	if r.head > 1024 && r.head > len(r.drops)/2 {
		n := copy(r.drops, r.drops[r.head:])
		r.drops, r.head = r.drops[:n], 0
	}
}

// closed notes the outcome of key at t.
func (r *renumber) closed(key string, t int64) {
	kc := r.cur[key]
	if kc == nil && r.prev != nil {
		kc = r.prev[key]
	}
	if kc != nil {
		r.drops = append(r.drops, keyDrop{kc: kc, at: rebase(t, r.grace)})
	}
}

// attempt sets a's number, and reports whether it changed it.
func (r *renumber) attempt(a *Attempt, src int) bool {
	// The table is updated through pointers: assigning to an existing
	// string key stores the key given, and a.Key is a slice of the
	// decoder's line blocks, which the table must not hold.
	kc, inCur := r.cur[a.Key]
	if !inCur && r.prev != nil {
		kc = r.prev[a.Key]
	}
	n := a.Attempt
	switch {
	case kc == nil:
		kc = &keyCount{n: int32(min(n, math.MaxInt32)), src: int32(src), key: strings.Clone(a.Key)}
	case kc.src == int32(src):
		kc.n = max(kc.n, int32(min(n, math.MaxInt32)))
	default:
		kc.n++
		kc.src = -1
		n = int(kc.n)
	}
	if !inCur {
		if len(r.cur) >= mergeMaxKeys {
			r.prev, r.cur = r.cur, make(map[string]*keyCount)
		}
		r.cur[kc.key] = kc
	}
	changed := n != a.Attempt
	a.Attempt = n
	return changed
}

// mergeMeta checks that the inputs are of one run and builds the merged
// meta record; it sets each input's offset and shard.
func mergeMeta(srcs []*mergeSrc, opts MergeOptions) (*Meta, error) {
	ref := srcs[0]
	var fleetRef *mergeSrc
	epoch := ref.meta.Epoch
	for _, s := range srcs {
		m := s.meta
		bad := func(format string, args ...any) error {
			return &MergeError{Name: s.name, Err: fmt.Errorf(format, args...)}
		}
		switch {
		case m.Epoch.IsZero():
			return nil, bad("no epoch: its process started its own clock (start serve and every run shard with one --epoch)")
		case m.Scenario != ref.meta.Scenario:
			return nil, bad("scenario %q; %s is of %q", m.Scenario, ref.name, ref.meta.Scenario)
		case m.Seed != ref.meta.Seed:
			return nil, bad("seed %d; %s has seed %d", m.Seed, ref.name, ref.meta.Seed)
		case !m.Epoch.Equal(epoch):
			return nil, bad("epoch %s; %s has epoch %s", m.Epoch.Format(time.RFC3339Nano), ref.name, epoch.Format(time.RFC3339Nano))
		case !reflect.DeepEqual(m.Phases, ref.meta.Phases):
			return nil, bad("its phases differ from those of %s (another version of scenario %q?)", ref.name, m.Scenario)
		case m.Start.Before(epoch):
			return nil, bad("its time zero %s precedes the epoch %s", m.Start.Format(time.RFC3339Nano), epoch.Format(time.RFC3339Nano))
		}
		s.off = int64(m.Start.Sub(epoch))
		if !s.fleet {
			continue
		}
		sh, err := ParseShard(m.Shard)
		if err != nil {
			return nil, bad("%v", err)
		}
		if sh.Whole() {
			sh = Shard{Index: 0, Count: 1}
		}
		s.shard = sh
		if fleetRef == nil {
			fleetRef = s
			continue
		}
		switch f := fleetRef.meta; {
		case m.Subject != f.Subject:
			return nil, bad("subject %q; %s ran %q", m.Subject, fleetRef.name, f.Subject)
		case !reflect.DeepEqual(m.Policy, f.Policy):
			return nil, bad("its subject's policy differs from that of %s", fleetRef.name)
		case !reflect.DeepEqual(m.Fleet, f.Fleet) || m.Duration != f.Duration:
			return nil, bad("its fleet or duration differs from that of %s", fleetRef.name)
		case sh.Count != fleetRef.shard.Count:
			return nil, bad("shard %s, of %d; %s is a shard of %d", sh, sh.Count, fleetRef.name, fleetRef.shard.Count)
		}
	}

	base := ref
	var scheduled int64
	if fleetRef != nil {
		base = fleetRef
		seen := make([]string, fleetRef.shard.Count)
		for _, s := range srcs {
			if !s.fleet {
				continue
			}
			if prev := seen[s.shard.Index]; prev != "" {
				return nil, &MergeError{Name: s.name, Err: fmt.Errorf("shard %d/%d again (%s is that shard too)", s.shard.Index, s.shard.Count, prev)}
			}
			seen[s.shard.Index] = s.name
			scheduled += s.meta.Scheduled
		}
		var missing []string
		for i, name := range seen {
			if name == "" {
				missing = append(missing, fmt.Sprintf("%d/%d", i, len(seen)))
			}
		}
		if len(missing) > 0 {
			return nil, &MergeError{Err: fmt.Errorf("shard %s missing: the merged fleet would lack its outcomes (merge every shard's file)", strings.Join(missing, ", "))}
		}
	}

	m := *base.meta
	m.Start, m.Epoch = epoch, epoch
	m.Shard = ""
	m.Scheduled = scheduled
	m.Virtual = false
	m.Recorder = "serve"
	if fleetRef != nil {
		m.Recorder = "run"
	}
	hosts := map[string]bool{}
	unknown := false
	var stated int64
	var notes []string
	stubs := 0
	for _, s := range srcs {
		hosts[s.meta.Host] = true
		unknown = unknown || s.meta.Host == ""
		stated = max(stated, s.meta.ClockUncertainty)
		for _, n := range s.meta.Notes {
			if !slices.Contains(notes, n) {
				notes = append(notes, n)
			}
		}
		if !s.fleet {
			stubs++
		}
	}
	u := int64(DefaultClockUncertainty)
	switch {
	case opts.UncertaintySet:
		u = int64(max(0, opts.ClockUncertainty))
	case !unknown && len(hosts) == 1:
		u = 0
	}
	m.ClockUncertainty = max(u, stated)
	m.Host = ""
	if !unknown && len(hosts) == 1 {
		m.Host = base.meta.Host
	}
	how := "stated"
	if !opts.UncertaintySet {
		how = "assumed"
		if m.ClockUncertainty == 0 {
			how = "one host"
		}
	}
	notes = append(notes, fmt.Sprintf("merged from %d files (%d stub recordings, %d fleet files) on the epoch %s; clock uncertainty between hosts %v (%s)",
		len(srcs), stubs, len(srcs)-stubs, epoch.Format(time.RFC3339Nano), time.Duration(m.ClockUncertainty), how))
	m.Notes = notes
	return &m, nil
}

// endRank orders end reasons from best to worst; an unknown reason ranks
// with error.
func endRank(reason string) int {
	switch reason {
	case EndCompleted:
		return 0
	case EndDuration:
		return 1
	case EndInterrupted:
		return 2
	case EndWriteError:
		return 4
	}
	return 3
}

// mergeEnd joins the fleet files' end records; nil when there is no fleet
// file or one of them has no end record (it was killed or cut short, and
// so is the merged run).
func mergeEnd(srcs []*mergeSrc) *End {
	var out *End
	var noise *Noise
	for _, s := range srcs {
		// Every process's noise, the stubs' too: the merged run was as
		// noisy as its noisiest host.
		if s.end != nil {
			noise = JoinNoise(noise, s.end.Noise)
		}
		if !s.fleet {
			continue
		}
		e := s.end
		if e == nil {
			return nil
		}
		at, ready := rebase(e.At, s.off), int64(0)
		if e.FleetReady > 0 {
			ready = rebase(e.FleetReady, s.off)
		}
		if out == nil {
			out = &End{Reason: e.Reason, Signal: e.Signal, At: at, FleetReady: ready}
		} else {
			if endRank(e.Reason) > endRank(out.Reason) {
				out.Reason, out.Signal = e.Reason, e.Signal
			}
			out.At = max(out.At, at)
			if out.FleetReady > 0 {
				out.FleetReady = max(out.FleetReady, ready)
				if ready == 0 {
					out.FleetReady = 0 // one shard's is unknown: so is the fleet's
				}
			}
		}
		out.InFlight += e.InFlight
		out.Unstarted += e.Unstarted
		out.DialErrors += e.DialErrors
		prefix := ""
		if s.shard.Count > 1 {
			prefix = "shard " + s.shard.String() + ": "
		}
		for _, msg := range e.Errors {
			out.Errors = append(out.Errors, prefix+msg)
		}
	}
	if out != nil {
		out.Noise = noise
	}
	return out
}
