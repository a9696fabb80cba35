package analyzer

import (
	"fmt"
	"sort"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// The records the Analyzer and its checks share, as types: the Analyzer
// and its options, each check's resolved configuration (checkCfg), the
// checker and its hooks, a retry's and an outcome's classified facts,
// and the check table's row type. The work on them is in the files that
// stand above this one.

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
	// firstLate is the most a judged request's first attempt arrived
	// after the instant the fleet meant to start it (claimLate), ns.
	firstLate int64

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

// A checker is one check at work. It owns what it accumulates from the
// records the Analyzer streams to it, and judges when asked. Each lives
// in a file of its own and is built by its row of the check table
// (Check.build) when the run selects it; the Analyzer keeps only what
// checks share: the pairing of attempts into retries, the retry cohorts,
// the closed requests' tally, the capacity bins and the fidelity record.
//
// Adding a check is its file and its row.
type checker interface {
	// result judges what was streamed so far; it may be called again.
	result() CheckResult
}

// The hooks a checker implements to be fed. The Analyzer calls each on
// the built checks that implement it, in table order.
type (
	// attemptHook sees every attempt the stub recorded, once the
	// attempt is counted in its logical request's state st.
	attemptHook interface {
		attempt(r *timeline.Attempt, class ResponseClass, st *keyState)
	}
	// retryHook sees every retry paired with the attempt before it.
	retryHook interface{ retry(f *retryFacts) }
	// outcomeHook sees every outcome the request-level checks judge
	// (judgedOutcome).
	outcomeHook interface {
		outcome(o *timeline.Outcome, f outcomeFacts)
	}
)

// checkBase is what every checker holds: the Analyzer whose shared
// records it reads and its own configuration.
type checkBase struct {
	a   *Analyzer
	cfg *checkCfg
}

// retryFacts is one retry as the pairing classified it: what every
// pairwise check reads, computed once.
type retryFacts struct {
	st   *keyState
	key  string
	p, x attemptLite // the previous attempt and the retry (copies: a pointer to the caller's x would make it escape)
	k    int         // x is the k-th retry of its logical request
	gap  int64       // from the previous response to the retry's arrival
	// paced: the previous response's Retry-After named a later instant;
	// early: the retry came more than retry-after's tolerance before it.
	paced, early bool
	base         int64 // where the retry's own wait starts (Retry.Own)
	// bounded: the stated policy bounds this client-paced wait (bound,
	// ns); beyond: the wait exceeded it by more than jitter-bounds'
	// tolerance.
	bounded, beyond bool
	bound           int64
}

// outcomeFacts is what the stub recorded of an outcome's logical
// request when the outcome came.
type outcomeFacts struct {
	// limited: the last attempt's response was a rate limit (and the
	// outcome names its status, if any).
	limited bool
	// seen is how many attempts the stub recorded for it so far.
	seen int
}

// A CheckSpec selects a check and overrides its parameters, the value of a
// --check flag: "waves", "waves:threshold=2.5",
// "retry-after:tolerance=10ms,threshold=0". Parameters absent from Params
// keep the value from the scenario's expect block or the default.
type CheckSpec struct {
	ID     string
	Params map[string]string // validated by ParseCheckSpec
}

// paramValue is a parsed parameter: a number (durations in seconds) or a
// status set.
type paramValue struct {
	num      float64
	statuses []int
}

// ParamKind is the kind of a check parameter's value.
type ParamKind int

const (
	KindNumber   ParamKind = iota // a finite number >= 0
	KindDuration                  // a Go duration ("10ms") or seconds ("0.01")
	KindStatuses                  // HTTP statuses joined by '|' or '+' ("400|404")
)

// String names the kind as docs/checks.md does.
func (k ParamKind) String() string {
	switch k {
	case KindDuration:
		return "duration"
	case KindStatuses:
		return "status set"
	}
	return "number"
}

// A Default is the value a parameter or threshold takes when neither the
// scenario nor a flag sets it.
type Default struct {
	// Num is the value: a number, seconds for a duration.
	Num float64
	// Statuses is the value of a status set.
	Statuses []int
	// None: no fixed value; the analyzer derives it from the run (the
	// stated policy, the offered load) as Doc says, or leaves it off.
	None bool
	// Doc is how docs/checks.md states the default when the value alone
	// does not say it all; "{}" stands for the value.
	Doc string
}

// A Param is one parameter of a check.
type Param struct {
	Name    string
	Kind    ParamKind
	Default Default
}

// ThresholdParam is the name of the parameter every check has: its
// threshold, a number.
const ThresholdParam = "threshold"

// A Check is one check's row of the schema.
type Check struct {
	ID string
	// Unit is the figure's unit as results carry it (CheckResult.Unit).
	Unit string
	// Meaning is the check's one-line meaning: what its figure counts.
	Meaning string
	// Threshold is the default threshold: the check fails when its figure
	// is above it.
	Threshold Default
	// Params are the check's parameters besides its threshold.
	Params []Param
	// Skips says when the check skips (for docs/checks.md).
	Skips string
	// Noise is how the host's noise moves the figure (noise.go): the
	// check's range undoes it, and docs/checks.md's noise table is
	// generated from it.
	Noise NoiseRow

	// build makes the check for a run that selected it (check.go).
	build func(checkBase) checker
}

// Param returns the check's parameter name; ThresholdParam is its
// threshold, a number defaulting to c.Threshold.
func (c *Check) Param(name string) (Param, bool) {
	if name == ThresholdParam {
		return Param{Name: ThresholdParam, Kind: KindNumber, Default: c.Threshold}, true
	}
	for _, p := range c.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// ParamNames returns the names Param knows: ThresholdParam first, then the
// others sorted.
func (c *Check) ParamNames() []string {
	names := []string{ThresholdParam}
	for _, p := range c.Params {
		names = append(names, p.Name)
	}
	sort.Strings(names[1:])
	return names
}

// closeGrace is how long (stream time) the state of a logical request
// outlives its outcome, for attempt records written just after it.
const closeGrace = int64(500 * time.Millisecond)

// closing is a logical request whose outcome arrived at `at`.
type closing struct {
	st  *keyState
	key string
	at  int64
}

// keyTally is what the closed logical requests add to the checks that
// judge a request as a whole once every record of it is in: attempts,
// amplification, and the outcome's cross-check.
type keyTally struct {
	maxAtt       int   // most attempts of a judged request
	attBad       int64 // judged requests past the attempts cap
	attEx        []Example
	exclAttempts int64 // attempts of requests the checks do not see
	exclRequests int64
	lost         int64 // reported ok, but the stub answered no 2xx
	lostEx       []Example
}
