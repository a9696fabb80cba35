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
// with more than one CPU (GOMAXPROCS) the lines are parsed in chunks on
// GOMAXPROCS goroutines (timeline.Decoder.DecodeBatches) while the
// consumers run on this one; they have ended when ReadTimeline returns.
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
		err = dec.DecodeBatches(runtime.GOMAXPROCS(0), borrow, func(recs []timeline.Record) {
			for i := range recs {
				add(&recs[i])
			}
		})
		if err == nil {
			err = io.EOF
		}
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
