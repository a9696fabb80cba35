// Package analyzer owns the checks that judge a retrylab timeline and the
// verdict they produce, with its encoders (text, JSON, JUnit XML, Markdown).
package analyzer

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// ErrNoRecords is returned by Analyze for a stream without a single record.
var ErrNoRecords = errors.New("analyzer: empty timeline")

// Options tune an Analyzer. The zero value runs the scenario's checks (or
// every check) with the scenario's thresholds (or the defaults).
//
// Precedence, lowest first: the defaults (some derived from the stated
// policy), the scenario's expect block (meta.Expect), then Options.
type Options struct {
	// Checks selects checks explicitly (--check flags) and overrides their
	// parameters. A check named here runs even when the scenario's
	// expect.checks leaves it out.
	Checks []CheckSpec
	// Skip lists check ids to skip (--skip), on top of the scenario's
	// expect.skip.
	Skip []string
	// Require lists checks that must judge something (--require), on top of
	// the scenario's expect.require: a listed check that skips makes the
	// verdict INCONCLUSIVE. A required check runs even when the scenario's
	// expect.checks leaves it out.
	Require []string
	// Policy, when non-nil, replaces the policy the timeline states.
	Policy *timeline.Policy
	// Noise, when non-nil, replaces the host noise the timeline measured:
	// the timeline is judged as if its host had run that late (tests
	// inject it to judge a virtual-time run under a noisy host).
	Noise *timeline.Noise
	// Examples is how many offending examples each check keeps (0: 5).
	Examples int
	// IdleTimeout drops the state of a logical request that has seen no
	// attempt and no outcome for this long in stream time (0: 5 minutes).
	// It bounds memory for server-only recordings, which have no outcomes.
	IdleTimeout time.Duration
	// OnRetry, when set, is called for every retry the analyzer pairs with
	// the attempt before it, with the facts its checks judge the retry on,
	// during the Add that paired it (so not always in arrival order: records
	// out of order are paired when the missing one comes). Unset, it costs
	// nothing.
	OnRetry func(Retry)
	// Serial makes Analyze decode on the calling goroutine. By default,
	// with more than one CPU (GOMAXPROCS), decoding runs on a goroutine of
	// its own, handing batches of records to the analyzer.
	Serial bool
}

// Validate reports the first unknown check id or parameter in o.
func (o Options) Validate() error {
	for _, s := range o.Checks {
		if _, err := ParseCheckSpec(s.String()); err != nil {
			return err
		}
	}
	for _, id := range o.Skip {
		if lookupCheck(id) == nil {
			return unknownCheck(id)
		}
	}
	for _, id := range o.Require {
		if lookupCheck(id) == nil {
			return unknownCheck(id)
		}
	}
	if o.Examples < 0 {
		return errors.New("analyzer: Examples must be >= 0")
	}
	return nil
}

// Analyze reads a whole timeline from r and judges it. The first record
// should be the meta record; without it the checks that need the scenario
// skip. A malformed line is an error wrapping a *timeline.SyntaxError that
// names it.
//
// With more than one CPU (GOMAXPROCS) and without Options.Serial, decoding
// runs on its own goroutine, handing batches of records to the analyzer; the
// goroutine has ended when Analyze returns.
func Analyze(r io.Reader, opts Options) (*Verdict, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	var an *Analyzer
	err := readTimeline(r, opts.Serial, true, func(meta *timeline.Meta) func(*timeline.Record) {
		an = New(meta, opts)
		return an.Add
	})
	if err == ErrNoRecords {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("analyzer: %w", err)
	}
	return an.Result(), nil
}

// ReadTimeline decodes a whole timeline from r, for one pass that feeds
// several consumers (Analyze; a report that draws the analyzer's facts).
// start is called once, before any other record, with the meta record (nil
// when the first record is not one); every later record, and the first
// when it is not the meta, goes to the add it returned, in stream order.
// A record is valid only during its add call (its storage is reused).
//
// ReadTimeline returns nil at the end of the stream, ErrNoRecords for a
// stream without a record (start is not called) and the decoder's error
// otherwise (a *timeline.SyntaxError for a malformed line). Unless serial,
// with more than one CPU (GOMAXPROCS) decoding runs on a goroutine of its
// own, handing batches of records over; it has ended when ReadTimeline
// returns.
func ReadTimeline(r io.Reader, serial bool, start func(meta *timeline.Meta) (add func(*timeline.Record))) error {
	return readTimeline(r, serial, false, start)
}

// readTimeline is ReadTimeline; with borrow, the strings of a record (but
// the meta's and the end's) are valid only during its add call too: they
// point into blocks of text the decoder reuses (timeline.Decoder.DecodeIn),
// so decoding allocates nothing per line. An Analyzer clones whatever it
// keeps, so Analyze borrows.
func readTimeline(r io.Reader, serial, borrow bool, start func(meta *timeline.Meta) (add func(*timeline.Record))) error {
	dec := timeline.NewDecoder(r)
	rec := new(timeline.Record)
	if err := dec.Decode(rec); err != nil {
		if err == io.EOF {
			return ErrNoRecords
		}
		return err
	}
	var add func(*timeline.Record)
	if rec.Type == timeline.TypeMeta {
		add = start(rec.Meta)
		rec = new(timeline.Record) // the meta stays the consumers'
	} else {
		add = start(nil)
		add(rec)
	}
	var err error
	if !serial && runtime.GOMAXPROCS(0) > 1 {
		err = decodePipelined(dec, borrow, add)
	} else if borrow {
		var blk timeline.Block
		for {
			blk.Reset()
			if err = dec.DecodeIn(rec, &blk); err != nil {
				break
			}
			add(rec)
		}
	} else {
		for {
			if err = dec.Decode(rec); err != nil {
				break
			}
			add(rec)
		}
	}
	if err != io.EOF {
		return err
	}
	return nil
}

// batchSize is how many records the decoding goroutine hands over at once.
const batchSize = 1024

// decodePipelined decodes on a second goroutine and hands the records to add
// on this one. It returns the decoder's final error (io.EOF at a clean end).
// With borrow, each batch's strings point into a block of text of its own,
// reused once add has seen the batch.
func decodePipelined(dec *timeline.Decoder, borrow bool, add func(*timeline.Record)) error {
	type batch struct {
		recs []timeline.Record
		err  error
		blk  *timeline.Block // with borrow
	}
	full := make(chan *batch, 4)
	free := make(chan *batch, 6)
	go func() {
		defer close(full)
		created, size := 0, 64 // batches grow to batchSize, so a short stream allocates little
		for {
			var b *batch
			select {
			case b = <-free:
			default:
				if created < cap(free) {
					b = &batch{recs: make([]timeline.Record, size)}
					created, size = created+1, min(2*size, batchSize)
				} else {
					b = <-free
				}
			}
			b.recs = b.recs[:cap(b.recs)]
			n := 0
			if borrow {
				if b.blk == nil {
					b.blk = new(timeline.Block)
				}
				b.blk.Reset()
				for n < len(b.recs) {
					if b.err = dec.DecodeIn(&b.recs[n], b.blk); b.err != nil {
						break
					}
					n++
				}
			} else {
				for n < len(b.recs) {
					if b.err = dec.Decode(&b.recs[n]); b.err != nil {
						break
					}
					n++
				}
			}
			b.recs = b.recs[:n]
			full <- b
			if b.err != nil {
				return
			}
		}
	}()
	var err error
	for b := range full {
		for i := range b.recs {
			add(&b.recs[i])
		}
		if b.err != nil {
			err = b.err
		}
		free <- b
	}
	return err
}

// checkCfg is one check's resolved configuration.
type checkCfg struct {
	def       *Check // its row of checkTable
	selected  bool   // runs (else reported as skipped)
	explicit  bool   // named by expect.checks or Options.Checks
	skipBy    string // who skipped it, "" when not skipped
	threshold float64
	thrSet    bool // threshold came from expect or a flag
	thrFrom   string
	params    map[string]paramValue
	chk       checker // built when selected and not skipped
}

// param is the row's parameter name. A name the row does not declare is a
// bug in the analyzer, not bad input (the loader and ParseCheckSpec
// reject unknown names with their place): it panics, so that every test
// that builds the check finds it.
func (c *checkCfg) param(name string) Param {
	p, ok := c.def.Param(name)
	if !ok {
		panic(fmt.Sprintf("analyzer: check %s has no parameter %q", c.def.ID, name))
	}
	return p
}

// set is parameter name's value when the scenario or a flag set it.
func (c *checkCfg) set(name string) (paramValue, bool) {
	c.param(name)
	v, ok := c.params[name]
	return v, ok
}

// num is number or duration parameter name (durations in seconds): the
// value set, else the row's default.
func (c *checkCfg) num(name string) float64 {
	if v, ok := c.set(name); ok {
		return v.num
	}
	return c.param(name).Default.Num
}

// dur is duration parameter name in ns.
func (c *checkCfg) dur(name string) int64 { return secNS(c.num(name)) }

// statuses is status-set parameter name: the value set, else the row's
// default.
func (c *checkCfg) statuses(name string) []int {
	if v, ok := c.set(name); ok {
		return v.statuses
	}
	return c.param(name).Default.Statuses
}

// secNS is s seconds in ns.
func secNS(s float64) int64 { return int64(s * float64(time.Second)) }

// An Analyzer judges one timeline fed to it record by record. It keeps
// per-logical-request state only while the request is open (until its
// outcome, or IdleTimeout without news) and bounded samples otherwise, so
// memory does not grow with the number of attempts.
//
// An Analyzer is not safe for concurrent use. Result may be called more than
// once; each call judges what was added so far.
type Analyzer struct {
	meta     *timeline.Meta
	policy   *timeline.Policy
	noiseIn  *timeline.Noise // Options.Noise
	opts     Options
	cfg      []*checkCfg // by checkTable index
	warnings []Warning
	maxEx    int

	// The checks the run selected, and those of them fed each kind of
	// fact (check.go).
	attemptHooks []attemptHook
	retryHooks   []retryHook
	outcomeHooks []outcomeHook
	facts        retryFacts // the retry being fed to retryHooks

	// The pairing's classification of retries (retryFacts), from the
	// parameters of the checks that define it, and the request tally's
	// attempts cap.
	raTol      int64 // retry-after's tolerance, with raClock in it
	raClock    int64 // meta's clock uncertainty between hosts (merged timelines)
	instWindow int64 // instant-retry's window (also waves' floor)
	waveSlack  int64
	waveWindow int64
	waveMin    int64
	pacingOn   bool  // the client is expected to self-throttle (pacing selected, a quota)
	jbTol      int64 // jitter-bounds' tolerance
	firstExp   int   // jitter-bounds' first_exponent
	jbBounded  bool  // the stated policy bounds a client-paced wait
	attCap     int
	idle       int64
	onRetry    func(Retry)

	// attemptTimeout is the fleet's per-attempt timeout (ns, 0: none
	// stated): an abandoned attempt failed for its client then.
	attemptTimeout int64

	// stream state
	keys       keyTable
	swept      []*keyState // sweep's, reused
	free       []*keyState
	now        int64
	first      int64
	seen       bool
	lastSweep  int64
	sinceSweep int
	unpaired   int64
	closing    []closing // outcomes in arrival order, dropped after grace
	grace      int64     // closeGrace, longer with a capacity model (capacityGrace)
	qHead      int

	fig      Figures
	statuses [600]int64
	faults   map[string]int64
	results  map[string]int64
	names    map[string]string // owned copies of the fault and result names (own)

	// done tallies the closed logical requests (attempts, amplification,
	// the outcomes' cross-check); exercised counts the attempts the stub
	// refused or failed (≥ 400 or a fault) for the client's own sake.
	done      keyTally
	exercised int64
	wv        wavesState      // the retry cohorts (waves, the capacity checks' spread)
	wvJ       *wavesJudgement // during Result
	tl        *keyTally       // during Result: every request's tally

	// reuseKeys: an attempt after a 2xx/3xx starts a new logical request on
	// the same key (serve recordings, whose clients reuse URLs); never in a
	// fleet run, where every logical request has a key of its own.
	reuseKeys bool

	fid      fidelity
	required map[string]bool // checks whose skip makes the verdict inconclusive

	load *loadState // the capacity checks' bins; nil without meta.capacity
	ldJ  *loadJudgement
}

// counter counts offenders among judged events and keeps the first examples.
type counter struct {
	judged, bad int64
	ex          []Example
	worst       int64
}

// hit counts one offender and reports whether an example of it is wanted.
func (c *counter) hit(max int) bool {
	c.bad++
	return len(c.ex) < max
}

// New returns an Analyzer for a timeline whose meta record is meta (nil when
// the timeline has none: checks that need it skip).
func New(meta *timeline.Meta, opts Options) *Analyzer {
	a := &Analyzer{
		meta:    meta,
		opts:    opts,
		maxEx:   opts.Examples,
		keys:    newKeyTable(),
		faults:  make(map[string]int64),
		results: make(map[string]int64),
	}
	if a.maxEx == 0 {
		a.maxEx = 5
	}
	if meta != nil {
		a.policy = meta.Policy
		a.fig.Scenario, a.fig.Subject, a.fig.Version = meta.Scenario, meta.Subject, meta.SubjectVersion
		a.fig.Recorder, a.fig.Seed, a.fig.Virtual = meta.Recorder, meta.Seed, meta.Virtual
	} else {
		a.warnings = append(a.warnings, Warning{ID: WarnNoMeta, Message: "the timeline has no meta record: checks that need the scenario or the stated policy skip"})
	}
	if opts.Policy != nil {
		a.policy = opts.Policy
	}
	a.noiseIn = opts.Noise
	a.reuseKeys = meta == nil || meta.Recorder == "serve"
	if meta != nil && meta.Fleet != nil {
		a.attemptTimeout = meta.Fleet.AttemptTimeout
	}
	a.onRetry = opts.OnRetry
	a.resolve()
	a.grace = closeGrace
	if meta != nil && meta.Capacity != nil {
		a.load = newLoadState(meta)
		a.grace = capacityGrace(meta)
	}
	a.build()
	return a
}

// cfgOf is the resolved configuration of check id.
func (a *Analyzer) cfgOf(id string) *checkCfg {
	for _, c := range a.cfg {
		if c.def.ID == id {
			return c
		}
	}
	return nil
}

func (a *Analyzer) resolve() {
	var expect *timeline.Expect
	if a.meta != nil {
		expect = a.meta.Expect
	}
	a.required = map[string]bool{}
	a.cfg = make([]*checkCfg, len(checkTable))
	for i := range checkTable {
		a.cfg[i] = &checkCfg{def: &checkTable[i], selected: true, params: map[string]paramValue{}}
	}
	cfgOf := a.cfgOf
	if expect != nil {
		if len(expect.Checks) > 0 {
			for _, c := range a.cfg {
				c.selected = false
			}
			for _, id := range expect.Checks {
				if c := cfgOf(id); c != nil {
					c.selected, c.explicit = true, true
				} else {
					a.warnings = append(a.warnings, Warning{ID: "unknown-check", Message: fmt.Sprintf("the scenario's expect.checks names an unknown check %q; ignored", id)})
				}
			}
		}
		for _, id := range expect.Skip {
			if c := cfgOf(id); c != nil {
				c.skipBy = "the scenario's expect.skip"
			}
		}
		for _, id := range expect.Require {
			if c := cfgOf(id); c != nil {
				c.selected, c.explicit = true, true
				a.required[id] = true
			}
		}
		// The scenario loader rejects what is wrong here; a timeline
		// written otherwise only gets a warning.
		for k, v := range expect.Thresholds {
			def, p, err := ThresholdKey(k)
			if err != nil {
				a.warnings = append(a.warnings, Warning{ID: "unknown-threshold", Message: fmt.Sprintf("the scenario's expect.thresholds names an unknown check or parameter %q; ignored", k)})
				continue
			}
			c := cfgOf(def.ID)
			pv, err := thresholdValue(p.Kind, v)
			if err != nil {
				a.warnings = append(a.warnings, Warning{ID: "unknown-threshold", Message: fmt.Sprintf("the scenario's expect.thresholds gives %q an impossible value %v; ignored", k, v)})
				continue
			}
			if p.Name == ThresholdParam {
				c.threshold, c.thrSet, c.thrFrom = v, true, "expect"
				continue
			}
			c.params[p.Name] = pv
		}
	}
	for _, s := range a.opts.Checks {
		c := cfgOf(s.ID)
		if c == nil {
			continue // Validate reports it
		}
		c.selected, c.explicit = true, true
		for k, v := range s.Params {
			p, ok := c.def.Param(k)
			if !ok {
				continue // Validate reports it
			}
			pv, err := parseParam(p.Kind, v)
			if err != nil {
				continue
			}
			if k == ThresholdParam {
				c.threshold, c.thrSet, c.thrFrom = pv.num, true, "flag"
			} else {
				c.params[k] = pv
			}
		}
	}
	for _, id := range a.opts.Require {
		if c := cfgOf(id); c != nil {
			c.selected, c.explicit = true, true
			a.required[id] = true
		}
	}
	for _, id := range a.opts.Skip {
		if c := cfgOf(id); c != nil {
			c.skipBy = "--skip"
			delete(a.required, id) // skipping on purpose is not judging nothing
		}
	}

	a.raTol = cfgOf(CheckRetryAfter).dur("tolerance")
	// A merged timeline's not_before and the retry's arrival may come
	// from two hosts' clocks (a retry answered by another replica): they
	// compare only within the clock uncertainty the merge states.
	if a.meta != nil && a.meta.ClockUncertainty > 0 {
		a.raClock = a.meta.ClockUncertainty
		a.raTol += a.raClock
	}
	a.instWindow = cfgOf(CheckInstantRetry).dur("window")
	wc := cfgOf(CheckWaves)
	a.waveSlack = wc.dur("slack")
	a.waveWindow = wc.dur("window")
	a.waveMin = int64(wc.num("min_samples"))
	a.wv.minClients = max(1, int(wc.num("min_clients")))
	a.pacingOn = cfgOf(CheckPacing).explicit && a.meta != nil && a.meta.Quota != nil
	jc := cfgOf(CheckJitterBounds)
	a.jbTol = jc.dur("tolerance")
	a.firstExp = int(jc.num("first_exponent"))
	a.jbBounded = a.policy != nil && a.policy.Base > 0 && !(a.policy.Jitter == "decorrelated" && a.policy.Cap <= 0)
	if ac := cfgOf(CheckAttempts); ac.thrSet {
		a.attCap = int(ac.threshold)
	} else if a.policy != nil {
		a.attCap = a.policy.MaxAttempts
	}
	a.idle = int64(a.opts.IdleTimeout)
	if a.idle <= 0 {
		a.idle = int64(5 * time.Minute)
	}
	// A stub with finite capacity and a trigger is what recovery exists
	// for: unless the scenario leaves it out or --skip skips it, it must
	// judge something (a run too short to tell is INCONCLUSIVE).
	if rc := cfgOf(CheckRecovery); rc.selected && rc.skipBy == "" && len(TriggerSpans(a.meta)) > 0 {
		a.required[CheckRecovery] = true
	}
}

// build makes the checks the run selected and subscribes each to the
// facts it is fed.
func (a *Analyzer) build() {
	for _, c := range a.cfg {
		if !c.selected || c.skipBy != "" {
			continue
		}
		c.chk = c.def.build(checkBase{a: a, cfg: c})
		if h, ok := c.chk.(attemptHook); ok {
			a.attemptHooks = append(a.attemptHooks, h)
		}
		if h, ok := c.chk.(retryHook); ok {
			a.retryHooks = append(a.retryHooks, h)
		}
		if h, ok := c.chk.(outcomeHook); ok {
			a.outcomeHooks = append(a.outcomeHooks, h)
		}
	}
}
