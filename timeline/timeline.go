// Package timeline owns the records of a retrylab run — one meta record, then
// an attempt per request the stub server saw and an outcome per logical
// request a simulated client made — and their streaming NDJSON codec, and
// Merge, which joins the files of a fleet spread over several processes.
//
// All instants are nanoseconds since the run's time zero (Meta.Start: the
// process's start, or the epoch its processes share) on the monotonic
// clock, so nothing downstream parses dates. The package is a leaf: it
// imports only the standard library.
package timeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Format is the version of the record layout written in Meta.Format.
const Format = 1

// Record types, the value of each line's "type" field.
const (
	TypeMeta    = "meta"
	TypeAttempt = "attempt"
	TypeOutcome = "outcome"
	// TypeEnd is the last record of a run the harness carried out: how and
	// why it stopped. A fleet timeline without one was killed or truncated.
	TypeEnd = "end"
)

// Faults recorded in Attempt.Fault instead of a status.
const (
	FaultReset = "reset" // the server closed the connection without a response
	FaultHang  = "hang"  // the server held the request until the client gave up
	// FaultAbandoned: the client went away before the server wrote its
	// response. Attempt.Status holds the status it would have sent; the
	// client never saw it, so it is a failed attempt, never a success.
	FaultAbandoned = "abandoned"
)

// Upstream sources, the value of Attempt.Upstream: where the answer came
// from when the stub proxies to a real API (server.upstream).
const (
	// UpstreamRelayed: the stub forwarded the request and relayed the
	// upstream's response; Status and Done are the upstream's.
	UpstreamRelayed = "relayed"
	// UpstreamFailed: the stub forwarded the request but the upstream
	// gave no response (refused, reset, timed out, unreadable); the stub
	// answered 502 itself. The test environment failed, not the client:
	// the analyzer does not judge the client's retries after it.
	UpstreamFailed = "failed"
)

// Backend failures, the value of Attempt.Backend: the stub's quota
// backend failed (error or timeout) and the stub acted on its on_error.
const (
	BackendClosed = "closed" // the stub answered 503 itself and charged nothing
	BackendOpen   = "open"   // the stub let the request through unmetered
)

// LimitCapacity is Attempt.Limit for a request a stub with finite
// capacity rejected: its queue was full (status 503), or the server stopped
// while it waited.
const LimitCapacity = "capacity"

// Outcome results, the value of Outcome.Result.
const (
	ResultOK           = "ok"            // a 2xx response reached the caller
	ResultGaveUp       = "gave-up"       // the client stopped after its attempt cap or gave up otherwise
	ResultBudget       = "budget"        // the client's retry budget ran out
	ResultNonRetryable = "non-retryable" // the client stopped on a status it must not retry
	ResultError        = "error"         // any other failure (transport error, unexpected status)
	ResultHung         = "hung"          // the harness watchdog fired: the call never returned in time
	ResultCanceled     = "canceled"      // the run was stopped (duration cap, SIGINT) mid-request
)

// Meta is the first record of every timeline. It carries everything the
// analyzer and the reports need, so a timeline file stands alone.
type Meta struct {
	Format int    `json:"format"`
	Tool   string `json:"tool,omitempty"` // retrylab version that wrote it
	Go     string `json:"go,omitempty"`   // Go version that built the tool

	// Recorder is "run" for a fleet run (outcomes present) or "serve" for a
	// server-only recording (no outcomes: a client outside the harness).
	Recorder string `json:"recorder"`
	// Virtual is true when the run happened in virtual time (retrylabtest).
	Virtual bool `json:"virtual,omitempty"`

	// Protocol is "grpc" for a run whose stub spoke gRPC (server.protocol),
	// "" for HTTP: the attempts then carry gRPC's own fields.
	Protocol string `json:"protocol,omitempty"`

	Scenario    string `json:"scenario"`
	Description string `json:"description,omitempty"`
	// Source is the whole scenario as JSON, as the scenarios package encodes
	// it; downstream code reads the typed fields below and keeps Source only
	// to reproduce the run.
	Source json.RawMessage `json:"source,omitempty"`

	Subject        string  `json:"subject,omitempty"`
	SubjectVersion string  `json:"subject_version,omitempty"` // module version of the library under test
	Policy         *Policy `json:"policy,omitempty"`          // the subject's stated policy, when it has one
	Summary        string  `json:"summary,omitempty"`         // the subject's own configuration summary

	Seed  int64     `json:"seed"`
	Start time.Time `json:"start"` // wall-clock instant of time zero
	// Epoch is the shared scenario clock (`--epoch`): the wall-clock
	// instant every process of a fleet spread over several — `serve`
	// replicas and `run` shards — starts the scenario's phases at. Zero
	// when the process started its own clock. A process that has one sets
	// Start to it; merge checks that every file names the same one and
	// re-bases each file's records by Start − Epoch.
	Epoch time.Time `json:"epoch,omitzero"`
	// Host is the name of the machine that wrote the file (os.Hostname),
	// "" when unknown; merge reads it to tell files of one host, whose
	// instants share a clock, from files of several.
	Host string `json:"host,omitempty"`
	// Shard is "i/n" when the run is one shard of n: its clients are the
	// fleet's ids i, i+n, i+2n, … (ids stay global, so shards' records
	// never collide). A merged timeline that holds every shard has none.
	Shard string `json:"shard,omitempty"`
	// ClockUncertainty is how far apart, in nanoseconds, the clocks of the
	// hosts whose records a merged timeline joins may be: instants recorded
	// on two hosts (a not_before from one stub replica, the retry's
	// arrival at another) are comparable only within it, and checks that
	// compare them widen their tolerance by it. 0 for a timeline of one
	// process or of several processes on one host.
	ClockUncertainty int64 `json:"clock_uncertainty,omitempty"`
	// Duration is the run's hard cap in nanoseconds (0: none).
	Duration int64 `json:"duration,omitempty"`
	// Scheduled is how many logical requests the fleet scheduled (clients ×
	// requests, a shard's own share under Shard, the sum of the shards'
	// in a merged timeline); 0 for a serve recording, which judges what it
	// holds. A run timeline with fewer outcomes than this is incomplete.
	Scheduled int64 `json:"scheduled,omitempty"`

	Phases []Phase `json:"phases,omitempty"`
	Fleet  *Fleet  `json:"fleet,omitempty"`
	// Quota is the limit pacing is judged against: of the quota's limits
	// (the default tier's, under tiers; every tier's when none is the
	// default) the one with the lowest sustained rate. Limits lists every
	// limit of every tier.
	Quota  *Quota  `json:"quota,omitempty"`
	Limits []Quota `json:"limits,omitempty"`
	// Capacity is the stub's finite capacity, when it models one.
	Capacity *Capacity `json:"capacity,omitempty"`
	Expect   *Expect   `json:"expect,omitempty"`
	Notes    []string  `json:"notes,omitempty"`
}

// Policy is the retry policy a subject states; the analyzer checks the
// timeline against it. Durations are nanoseconds; zero means unstated.
type Policy struct {
	Base        int64  `json:"base,omitempty"`
	Cap         int64  `json:"cap,omitempty"`
	MaxAttempts int    `json:"max_attempts,omitempty"`
	Budget      int64  `json:"budget,omitempty"`
	Jitter      string `json:"jitter,omitempty"` // full | equal | decorrelated | none | ...
	// Retryable is the set of statuses the subject retries, when stated.
	Retryable []int `json:"retryable,omitempty"`
}

// Phase is one phase of the stub server's schedule, as laid out in time.
type Phase struct {
	Name       string `json:"name"`
	Start      int64  `json:"start"`         // ns since the run's start
	End        int64  `json:"end,omitempty"` // ns; 0 for the last phase (until the run ends)
	Respond    string `json:"respond"`       // ok | quota | status 503 | mix ... | fault reset ...
	RetryAfter string `json:"retry_after,omitempty"`
	// Capacity is the share of the stub's concurrency (Meta.Capacity) this
	// phase runs with, in (0, 1]; 0 when the phase does not scale it.
	Capacity float64 `json:"capacity,omitempty"`
}

// Capacity is a stub's finite capacity: Concurrency workers each serving
// one request for a service time (mean Service ns, drawn from Dist), a
// queue of at most Queue waiting requests in Discipline order (fifo or
// lifo); a request arriving to a full queue is rejected. A phase may scale
// the concurrency (Phase.Capacity): the trigger of an overload.
type Capacity struct {
	Concurrency int    `json:"concurrency"`
	Queue       int    `json:"queue"`
	Service     int64  `json:"service"`        // mean service time, ns
	Dist        string `json:"dist,omitempty"` // fixed | exponential | ...
	Discipline  string `json:"discipline,omitempty"`
	// CancelOnDisconnect: a queued request whose client has gone is
	// dropped unserved instead of served for nothing.
	CancelOnDisconnect bool `json:"cancel_on_disconnect,omitempty"`
}

// Fleet is what the simulated clients were asked to do.
type Fleet struct {
	// Clients is the whole fleet's size, in a shard's timeline too (its
	// share is Meta.Scheduled / Requests).
	Clients  int    `json:"clients"`
	Requests int    `json:"requests"` // logical requests per client
	Start    string `json:"start,omitempty"`
	Think    int64  `json:"think,omitempty"`   // ns between a client's logical requests
	Method   string `json:"method,omitempty"`  // GET, POST, ...
	Timeout  int64  `json:"timeout,omitempty"` // per-logical-request watchdog, ns
	// AttemptTimeout is the application's per-attempt timeout given to
	// every subject, ns (0: none).
	AttemptTimeout int64 `json:"attempt_timeout,omitempty"`
	// Processes is how many processes the clients were grouped into,
	// each sharing one instance of the subject (fleet.processes); 0 (left
	// out, as in timelines before it): one per client.
	Processes int `json:"processes,omitempty"`
}

// Quota is the stub server's published quota, when it has one.
type Quota struct {
	Algorithm string  `json:"algorithm"`
	Rate      float64 `json:"rate"` // requests per second
	Burst     int     `json:"burst,omitempty"`
	Key       string  `json:"key,omitempty"`
	// Name is the limit's (Meta.Limits); Limit units per Window is how
	// it is published; Tier is the tier it belongs to, "" without tiers;
	// Mode is a leaky bucket's (meter or shape).
	Name   string `json:"name,omitempty"`
	Limit  int    `json:"limit,omitempty"`
	Window int64  `json:"window,omitempty"` // ns
	Tier   string `json:"tier,omitempty"`
	Mode   string `json:"mode,omitempty"`
}

// Expect is the scenario's expectations: which checks to run and their
// thresholds.
type Expect struct {
	Checks []string `json:"checks,omitempty"`
	Skip   []string `json:"skip,omitempty"`
	// Require lists checks that must judge something: a listed check that
	// skips makes the verdict INCONCLUSIVE instead of letting it pass.
	Require    []string           `json:"require,omitempty"`
	Thresholds map[string]float64 `json:"thresholds,omitempty"`
	// AllowUnexercised: a run in which the stub refused or failed no
	// request is what the scenario means; without it such a run is
	// INCONCLUSIVE (no retry logic was exercised).
	AllowUnexercised bool `json:"allow_unexercised,omitempty"`
}

// Attempt is one request the stub server saw, written by the server.
type Attempt struct {
	Client  string `json:"client"`  // simulated client id
	Key     string `json:"key"`     // logical request key; a retry is a later arrival with the same key
	Attempt int    `json:"attempt"` // 1-based, by arrival order per logical request
	Method  string `json:"method"`
	Path    string `json:"path"`
	At      int64  `json:"at"`   // arrival, ns since the run's start: the kernel's receipt of the request (see Waited)
	Done    int64  `json:"done"` // response written (or fault applied), ns
	Status  int    `json:"status,omitempty"`
	Fault   string `json:"fault,omitempty"` // reset | hang, instead of a status
	Phase   string `json:"phase,omitempty"`

	// RetryAfter is the raw Retry-After value sent, "" when none.
	RetryAfter string `json:"retry_after,omitempty"`
	// NotBefore is the earliest instant (ns since the run's start) at which
	// the server allowed the next attempt. Valid only when HasNotBefore: it is
	// absent when the server set no Retry-After or sent an unusable one.
	NotBefore    int64 `json:"-"`
	HasNotBefore bool  `json:"-"`

	Idempotent bool `json:"idem,omitempty"` // an Idempotency-Key header was present
	// IdemKey is a fixed-size digest of the request's Idempotency-Key
	// (KeyDigest), "" when it had none: keys are compared, never kept.
	IdemKey string `json:"idem_key,omitempty"`
	// Backend is BackendFailed when the stub's own quota backend (Redis)
	// failed for this request: BackendClosed when the stub answered 503
	// itself, BackendOpen when it let the request through unmetered. ""
	// when the backend answered. The test environment failed, not the
	// client: no check judges the retries after a BackendClosed answer.
	Backend   string `json:"backend,omitempty"`
	RateLimit string `json:"ratelimit,omitempty"` // rate-limit headers sent, "Name: value" joined by "; "
	// Limit names the quota's limit that rejected the request ("tier/name"
	// under tiers), LimitCapacity when a stub with finite capacity rejected
	// it (its queue full), "" when nothing did.
	Limit string `json:"limit,omitempty"`
	// Queue is how long the request waited for a free worker of a stub
	// with finite capacity (Meta.Capacity) before its service began, ns;
	// Service the service time it was given, ns (0: none, e.g. rejected
	// with the queue full, or dropped from the queue once its client had
	// gone). Work given to an attempt recorded abandoned was wasted.
	Queue   int64 `json:"queue,omitempty"`
	Service int64 `json:"service,omitempty"`
	// Upstream is UpstreamRelayed or UpstreamFailed for a request the stub
	// forwarded to its upstream, "" for one the stub answered itself.
	Upstream string `json:"upstream,omitempty"`
	// Waited is how long the request surely waited in its socket before
	// the stub read it, ns (a lower bound from the kernel's receipt
	// clock, Linux TCP_INFO; 0 when under a tick or not measured). At is
	// the stub's reading less Waited, so the stub's own lateness moves no
	// arrival; the stub answered as of At, and its capacity queued the
	// request from At (Queue includes the wait).
	Waited int64 `json:"waited,omitempty"`

	// gRPC (Meta.Protocol "grpc"; all empty for HTTP). Status above is
	// the HTTP status the gRPC code maps from (docs/grpc.md), so every
	// check reads a gRPC attempt as it reads an HTTP one.
	//
	// GRPCCode is the code's canonical name sent ("UNAVAILABLE", "OK").
	GRPCCode string `json:"grpc_code,omitempty"`
	// Pushback is the raw grpc-retry-pushback-ms trailer sent ("" when
	// none); RetryInfo the google.rpc.RetryInfo retry_delay sent in the
	// status details, as its JSON form ("1.500s"; "" when none). The one
	// that parses sets NotBefore, as Retry-After does for HTTP; a
	// negative or malformed pushback ("do not retry") sets none.
	Pushback  string `json:"pushback,omitempty"`
	RetryInfo string `json:"retry_info,omitempty"`
	// PreviousAttempts is the grpc-previous-rpc-attempts header the
	// client sent (0 when absent): the client's own count of the attempts
	// before this one, evidence beside Attempt (the stub's count).
	PreviousAttempts int `json:"grpc_previous_attempts,omitempty"`
	// WaitClaim is the raw X-Retrylab-Wait header the client sent ("" when
	// none, cut at 32 bytes): its claim of how long it meant to wait after
	// the previous attempt's answer before sending this one (ParseWaitClaim).
	// The analyzer checks the claim against the arrival and, where every
	// retry of a cohort claims consistently, reads the client's own waits
	// from the claims rather than from arrivals the host made late.
	WaitClaim string `json:"wait_claim,omitempty"`
}

// Latency is how long the server held the request.
func (a *Attempt) Latency() time.Duration { return time.Duration(a.Done - a.At) }

// Outcome is one logical request as the simulated client saw it, written by
// the runner.
type Outcome struct {
	Client    string `json:"client"`
	Key       string `json:"key"`
	Scheduled int64  `json:"scheduled"` // when the fleet meant to start it, ns
	Start     int64  `json:"start"`     // when the caller was invoked, ns
	End       int64  `json:"end"`       // when the caller returned (or the watchdog fired), ns
	Result    string `json:"result"`
	Status    int    `json:"status,omitempty"`   // final status, 0 when none
	Attempts  int    `json:"attempts,omitempty"` // attempts the client saw, when it can tell
	Error     string `json:"error,omitempty"`
	// Harness is true when the failure came from the harness or the
	// subject's plumbing (an exec program that could not start, broke the
	// line protocol, exited non-zero or printed nothing), not from the
	// library's retry logic. Such outcomes make a verdict INCONCLUSIVE.
	Harness bool `json:"harness,omitempty"`
}

// End reasons, the value of End.Reason.
const (
	EndCompleted   = "completed"   // every scheduled logical request ended
	EndDuration    = "duration"    // the run's duration cap stopped it
	EndInterrupted = "interrupted" // a signal stopped it (End.Signal says which)
	EndWriteError  = "write-error" // writing the timeline failed; the rest is lost
	EndError       = "error"       // the harness failed otherwise (End.Errors)
)

// End is the last record of a fleet run: how the harness stopped and what
// it could not do. The analyzer reads it to tell a faithful run from one it
// must not vouch for (see the analyzer's INCONCLUSIVE verdict).
type End struct {
	At     int64  `json:"at"`               // ns since the run's start when the fleet stopped
	Reason string `json:"reason"`           // one of the End* constants
	Signal string `json:"signal,omitempty"` // the signal that interrupted the run
	// InFlight is how many logical requests were still running when the run
	// stopped (their outcomes say "canceled"); Unstarted how many scheduled
	// ones never started.
	InFlight  int64 `json:"in_flight,omitempty"`
	Unstarted int64 `json:"unstarted,omitempty"`
	// DialErrors counts the harness's own connection failures (dial,
	// accept, descriptor exhaustion) on its side of the loopback.
	DialErrors int64 `json:"dial_errors,omitempty"`
	// FleetReady is when an exec fleet was ready to send: every process
	// past the start barrier (ns since the run's start); 0 when unknown,
	// and for a goroutine fleet, which has no barrier.
	FleetReady int64 `json:"fleet_ready,omitempty"`
	// Errors are harness problems in words, each a reason the run was not
	// carried out faithfully.
	Errors []string `json:"errors,omitempty"`
	// Unbacked counts, in a merged timeline, the outcomes whose logical
	// requests the merged recordings hold no attempt of, or fewer than
	// the outcome reports: a recording is missing or cut short, so the
	// evidence an outcome is checked against is incomplete (0 otherwise).
	Unbacked int64 `json:"unbacked,omitempty"`
	// Noise is how late the host ran things while the run ran, measured,
	// nil when unmeasured (a virtual run has none: its clock waits for
	// it).
	Noise *Noise `json:"noise,omitempty"`
}

// Noise sources, joined by "+" in Noise.Source.
const (
	// NoiseSched: the Go runtime's scheduling latencies
	// (/sched/latencies:seconds) over the run: how long goroutines of the
	// recording process waited to run once ready.
	NoiseSched = "sched"
	// NoiseSleep: a goroutine of the recording process that sleeps a
	// short period on a timer and measures how late it wakes, which also
	// sees the kernel keeping the process off the CPU (other processes,
	// CPU hogs).
	NoiseSleep = "sleep"
	// NoiseProbe: a separate probe process whose thread sleeps a short
	// period in the kernel and measures how late it wakes, which sees
	// what the fleet's child processes (or serve's clients on the same
	// host) see.
	NoiseProbe = "probe"
	// NoiseStamp: how late the stub stamped its arrivals behind the
	// kernel's receipt of them (a lower bound, in whole kernel ticks).
	NoiseStamp = "stamp"
)

// Noise is the host's lateness while a run ran: how far past the instant
// it asked for a ready piece of work ran. Checks whose time windows are
// comparable to it widen by it or stop judging (docs/checks.md, "noise").
type Noise struct {
	Source string `json:"source"` // NoiseSched, NoiseSleep, NoiseProbe, joined by "+"
	// P50, P90, P99 and Max are the lateness quantiles in nanoseconds,
	// the largest of the sources' at each quantile. P90 is the bulk of
	// the lateness (what most events met), P99 its tail.
	P50 int64 `json:"p50"`
	P90 int64 `json:"p90,omitempty"`
	P99 int64 `json:"p99"`
	Max int64 `json:"max,omitempty"`
	// Samples is how many wake-ups or scheduling events were measured.
	Samples int64 `json:"samples,omitempty"`
	// CPUPressure is Linux PSI's share of time some runnable task waited
	// for a CPU over the run (/proc/pressure/cpu "some", total), percent;
	// 0 when the kernel does not report it.
	CPUPressure float64 `json:"cpu_pressure,omitempty"`
	// Batch is the most arrivals the stub stamped within a millisecond of
	// each other that had each waited at least a kernel tick in their
	// sockets: its evidence that it read a backlog at once, bunching what
	// the clients sent apart (0 when unmeasured or none).
	Batch int `json:"batch,omitempty"`
	// SocketP90 and SocketP99 are how long the stub's arrivals waited in
	// their sockets before it read them (ns, lower bounds from the
	// kernel; 0 when unmeasured): how far behind the stub ran. Each
	// arrival is stamped at the kernel's receipt (Attempt.Waited), so
	// these waits are in no lateness above. Recordings made before they
	// were measured counted them as the stamp source's lateness.
	SocketP90 int64 `json:"socket_p90,omitempty"`
	SocketP99 int64 `json:"socket_p99,omitempty"`
	// ReaderP90 and ReaderP99 are, for an exec fleet, how long after the
	// stub answered a logical request's latest attempt the runner read
	// the program's result line for it (ns, over the lines whose request
	// got an answer; 0 when unmeasured). An exec outcome's End is that
	// read, so this bounds how late the reader (and the program's own
	// work after the answer, and its stdout) made the End, from above.
	ReaderP90 int64 `json:"reader_p90,omitempty"`
	ReaderP99 int64 `json:"reader_p99,omitempty"`
}

// JoinNoise is the noise of a run made of the runs measured a and b (nil
// for unmeasured): the largest of each quantile, of the CPU pressure and
// of the batch, the samples summed, the sources joined.
func JoinNoise(a, b *Noise) *Noise {
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		c := *b
		return &c
	case b == nil:
		c := *a
		return &c
	}
	c := Noise{P50: max(a.P50, b.P50), P90: max(a.P90, b.P90), P99: max(a.P99, b.P99), Max: max(a.Max, b.Max), Samples: a.Samples + b.Samples,
		CPUPressure: max(a.CPUPressure, b.CPUPressure), Batch: max(a.Batch, b.Batch), Source: a.Source,
		SocketP90: max(a.SocketP90, b.SocketP90), SocketP99: max(a.SocketP99, b.SocketP99),
		ReaderP90: max(a.ReaderP90, b.ReaderP90), ReaderP99: max(a.ReaderP99, b.ReaderP99)}
	for _, s := range strings.Split(b.Source, "+") {
		if s != "" && !slices.Contains(strings.Split(c.Source, "+"), s) {
			if c.Source != "" {
				c.Source += "+"
			}
			c.Source += s
		}
	}
	return &c
}

// BatchWindow is the span within which Noise.Batch counts arrivals
// stamped together.
const BatchWindow = int64(time.Millisecond)

// Late returns the lateness bound a check widens by: the p99, 0 for a nil
// Noise.
func (n *Noise) Late() int64 {
	if n == nil {
		return 0
	}
	return n.P99
}

// Bulk returns the lateness most events met: the p90 (the p99 for a
// record written before the p90 was measured), 0 for a nil Noise. Checks
// that judge how many events lined up, not whether any was late, read it.
func (n *Noise) Bulk() int64 {
	switch {
	case n == nil:
		return 0
	case n.P90 > 0:
		return n.P90
	}
	return n.P99
}

// WaitHeader carries a client's wait claim (Attempt.WaitClaim): the
// milliseconds it meant to wait after the previous attempt's answer before
// sending this attempt, a non-negative decimal with up to 6 fractional
// digits ("0", "125", "12.5").
const WaitHeader = "X-Retrylab-Wait"

// maxWaitClaim bounds a claim: a wait of more than a day is no retry delay.
const maxWaitClaim = int64(24 * time.Hour)

// ParseWaitClaim reads a WaitHeader value as a duration; false when it is
// not a non-negative decimal of milliseconds with at most 6 fractional
// digits, or claims more than a day. No sign, exponent or spaces.
func ParseWaitClaim(s string) (time.Duration, bool) {
	intPart, frac, dot := strings.Cut(s, ".")
	if intPart == "" || len(intPart) > 9 || len(frac) > 6 || (dot && frac == "") {
		return 0, false
	}
	var ns int64
	for _, c := range intPart {
		if c < '0' || c > '9' {
			return 0, false
		}
		ns = ns*10 + int64(c-'0')
	}
	ns *= int64(time.Millisecond)
	scale := int64(100_000) // ns per first fractional digit
	for _, c := range frac {
		if c < '0' || c > '9' {
			return 0, false
		}
		ns += int64(c-'0') * scale
		scale /= 10
	}
	if ns > maxWaitClaim {
		return 0, false
	}
	return time.Duration(ns), true
}

// Duration is how long the logical request took from the caller's view.
func (o *Outcome) Duration() time.Duration { return time.Duration(o.End - o.Start) }

// KeyDigest returns the digest of an Idempotency-Key that Attempt.IdemKey
// records: the first 8 bytes of its SHA-256 in hex. Two attempts carried the
// same key when their digests are equal (a collision between two keys of
// one logical request is a 1-in-2^64 chance); the key itself, which may be
// a secret or personal data, is never written. "" for no key.
func KeyDigest(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}
