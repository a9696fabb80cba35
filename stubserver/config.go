package stubserver

import "time"

// Config is the server's behaviour: the `server:` section of a scenario
// file, already parsed (the scenarios package owns the YAML). Zero fields
// mean documented defaults; Validate reports impossible values.
type Config struct {
	// Latency is added to every response (0: none). A phase's own Latency
	// replaces it while that phase lasts.
	Latency time.Duration
	// Headers is the rate-limit header family sent: HeadersIETF,
	// HeadersXRateLimit or HeadersNone ("" means none).
	Headers string
	// Quota is the published quota that `quota` phases enforce (nil: none).
	Quota *Quota
	// Capacity is the server's finite capacity (nil: infinite, every
	// request is answered at once). See Capacity and the package doc. It
	// cannot go with Upstream: there the upstream does the work.
	Capacity *Capacity
	// Phases run in order; the last lasts until the run ends. No phases
	// means one `ok` phase.
	Phases []Phase
	// Upstream, when set, is the base URL (http or https, no user info,
	// query or fragment) of a real API the stub stands in front of: ok
	// phases, requests a quota admits, and passthrough answers forward
	// the request there and relay its response (see the package doc).
	// "" answers every request from the stub.
	Upstream string
	// Protocol is what the stub speaks: ProtocolHTTP ("" too) or
	// ProtocolGRPC (through Options.NewFrontEnd; see grpc.go). A gRPC
	// stub's waits are the gRPC forms (FormPushback, FormRetryInfo, ...),
	// and it has no upstream.
	Protocol string
	// ProxyTimeout, with ProtocolGRPC, stands a proxy in front of the
	// server (an Envoy route timeout): a call not answered within it gets
	// UNAVAILABLE from the proxy at that instant, which a gRPC client may
	// retry, while the server, whose caller (the proxy) has gone, keeps
	// the call's work: queued, it is served for nobody unless the
	// capacity cancels on disconnect. 0: no proxy.
	ProxyTimeout time.Duration
}

// Rate-limit header families.
const (
	HeadersNone       = "none"
	HeadersIETF       = "ietf"        // RateLimit and RateLimit-Policy (IETF httpapi draft)
	HeadersXRateLimit = "x-ratelimit" // X-RateLimit-Limit, -Remaining, -Reset (epoch seconds)
)

// Quota algorithms: the five of the rate-limiter designs this package
// follows. Each is a meter (it answers at once: allowed or rejected) except
// leaky-bucket with Mode shape, which holds a request until its turn.
const (
	AlgTokenBucket      = "token-bucket"       // refills Limit per Per up to Burst; O(1) per key
	AlgFixedWindow      = "fixed-window"       // Limit per aligned window; O(1) per key
	AlgSlidingWindow    = "sliding-window"     // sliding window counter: the previous window weighted; O(1) per key
	AlgSlidingWindowLog = "sliding-window-log" // exact: one timestamp per request in the window; O(Limit) per key
	AlgLeakyBucket      = "leaky-bucket"       // a queue of Burst draining at Limit per Per; O(1) per key
)

// Leaky-bucket modes.
const (
	ModeMeter = "meter" // reject a request that would overflow the queue (default)
	ModeShape = "shape" // hold a request until the queue drains to it, up to MaxDelay; then reject
)

// Quota keys: what one limit counts.
const (
	KeyGlobal   = "global"
	KeyClient   = "client"
	KeyAPIKey   = "api-key" // Authorization: Bearer … or X-Api-Key
	KeyEndpoint = "endpoint"
)

// Quota backends.
const (
	BackendMemory = "memory" // in the stub's process (default)
	// A "redis://HOST:PORT/DB" URL names a Redis shared by every stub
	// that uses it; the stubserver/stubredis package implements it.
)

// What a quota does when its backend fails (Redis down or slow).
const (
	OnErrorClosed = "closed" // answer 503 with Retry-After 1, spend nothing (default)
	OnErrorOpen   = "open"   // allow the request unmetered
)

// MaxLimits is the most limits one quota (or one tier) may layer.
const MaxLimits = 8

// Quota is the published quota: layered limits that all apply, optional
// tiers that give API keys their own limits, and costs that make some
// requests spend more. A request is allowed only if every limit of its tier
// allows it, and then it is charged to all of them at once; a rejected
// request is charged to none.
type Quota struct {
	// Limits apply to every request when Tiers is empty; with Tiers they
	// are unused (each tier has its own).
	Limits []Limit
	// Tiers map API keys to their own limits (see Tier).
	Tiers []Tier
	// Costs give requests a cost in units other than 1; the first match
	// wins.
	Costs []Cost
	// Backend is BackendMemory ("" too) or a redis:// URL. The Server
	// itself only runs the memory backend; a caller wires another through
	// Options.NewLimiter.
	Backend string
	// OnError is OnErrorClosed ("" too) or OnErrorOpen.
	OnError string
}

// Limit is one published rate limit of a quota: Limit units per Per.
type Limit struct {
	// Name names the limit in headers, the timeline and reports. Default:
	// "default" for a quota of one limit, else the window ("second",
	// "minute", "hour", "day", or "limit-N").
	Name      string
	Algorithm string // AlgTokenBucket (default), AlgFixedWindow, ...
	// Limit units per Per: 100/s is {Limit: 100, Per: time.Second}.
	Limit float64
	Per   time.Duration
	// Burst is the token bucket's capacity and the leaky bucket's queue
	// (default: Limit, at least 1).
	Burst int
	Key   string // KeyGlobal (default), KeyClient, KeyAPIKey, KeyEndpoint
	// Mode is the leaky bucket's: ModeMeter (default) or ModeShape.
	Mode string
	// MaxDelay bounds a shaper's hold (default: Per); a request that would
	// wait longer is rejected.
	MaxDelay time.Duration
	// Status answers a request this limit rejects: 429 (default), or 403
	// for a provider's secondary limit (GitHub's, with Retry-After).
	Status int
}

// Tier is a plan: the API keys it covers and their limits. An API key
// (Authorization: Bearer … or X-Api-Key) picks the tier listing it, an
// entry ending in "*" matching keys with that prefix (the longest match
// wins); a key no tier lists gets the Default tier. A request without an
// API key gets the Anonymous tier, or 401 when no tier is; a key no tier
// lists gets 401 when no tier is Default. Each tier counts apart: the same
// key in two tiers cannot happen.
type Tier struct {
	Name      string
	Keys      []string
	Limits    []Limit
	Default   bool
	Anonymous bool
}

// Cost charges matching requests Cost units of every limit (default 1).
// Method "" matches any method; Path is a path.Match pattern over the
// request path below /c/{c}/r/{n} (the endpoint), "" matching any.
type Cost struct {
	Method string
	Path   string
	Cost   int
}

// Phase is one stretch of the schedule.
type Phase struct {
	Name string
	// For is how long the phase lasts; ignored (and may be 0) for the last.
	For        time.Duration
	Respond    Respond
	RetryAfter RetryAfter
	// Latency, when non-zero, replaces Config.Latency during this phase;
	// a latency past the client's timeout is the "delay" fault.
	Latency time.Duration
	// Capacity scales Config.Capacity's workers while this phase lasts: a
	// share in (0, 1] (0.3 runs 30% of them: the trigger of an overload),
	// 0 meaning all of them. It needs Config.Capacity.
	Capacity float64
}

// Service-time distributions of a Capacity.
const (
	DistFixed       = "fixed"       // every request takes Service (default)
	DistExponential = "exponential" // exponential of mean Service (a Poisson server), capped at 50x the mean
	DistUniform     = "uniform"     // uniform in [0, 2*Service]
)

// Queue disciplines of a Capacity.
const (
	DisciplineFIFO = "fifo" // the oldest queued request is served first (default)
	DisciplineLIFO = "lifo" // the newest is served first, as servers that shed stale work do
)

// MaxConcurrency and MaxQueue bound a Capacity's workers and queue.
const (
	MaxConcurrency = 1 << 20
	MaxQueue       = 1 << 20
)

// Capacity is a server that cannot keep up with any load: Concurrency
// workers, each serving one request at a time for a service time drawn
// from Dist (mean Service, from the Server's seeded source, so a run
// replays), and a queue of at most Queue requests waiting for a worker,
// taken in Discipline order. A request arriving to a full queue is
// rejected at once with 503. Only the requests the server would answer
// 200 in ok and quota phases do work; status, mix and fault phases and the
// quota's rejections answer without a worker. The package doc's
// "Capacity" section states the rules exactly.
type Capacity struct {
	// Concurrency is the number of workers, at least 1; a phase's Capacity
	// scales it.
	Concurrency int
	// Queue is how many requests may wait for a worker (0: none; a request
	// that finds every worker busy is rejected).
	Queue int
	// Service is the mean service time (0: a worker is held for no time,
	// which makes the model measure only its own cost).
	Service time.Duration
	// Dist is DistFixed ("" too), DistExponential or DistUniform.
	Dist string
	// Discipline is DisciplineFIFO ("" too) or DisciplineLIFO.
	Discipline string
	// CancelOnDisconnect drops a queued request whose client has gone
	// (and never starts one whose client left before a worker was free);
	// without it such requests are served when their turn comes, and the
	// work is wasted.
	CancelOnDisconnect bool
}

// Respond kinds.
const (
	RespondOK     = "ok"     // 200
	RespondQuota  = "quota"  // 200 while the quota has room, else 429
	RespondStatus = "status" // always Status
	RespondMix    = "mix"    // weighted statuses and faults
	RespondFault  = "fault"  // always Fault
	// RespondPassthrough forwards every request to Config.Upstream and
	// relays its answer; it needs an upstream.
	RespondPassthrough = "passthrough"
)

// Faults.
const (
	FaultReset = "reset" // close the connection without a response
	FaultHang  = "hang"  // hold the request until the client gives up or the server stops
)

// Respond is what a phase answers.
type Respond struct {
	Kind   string // RespondOK (default), RespondQuota, RespondStatus, RespondMix, RespondFault, RespondPassthrough
	Status int    // for RespondStatus
	// RateLimit marks RespondStatus as a rate limit that is not a 429 (a
	// 403 the way GitHub answers its secondary limits): the response
	// carries the phase's Retry-After, as 429 and 5xx do, and with
	// rate-limit headers it says the quota is exhausted (remaining 0).
	RateLimit bool
	Mix       []Weighted
	Fault     string // for RespondFault
}

// Weighted is one entry of a mix: a status, a fault, or (Passthrough) the
// upstream's own answer, and its weight (weights are relative; they need
// not sum to 100).
type Weighted struct {
	Status      int
	Fault       string
	Passthrough bool // forward to Config.Upstream: needs an upstream
	Weight      float64
}

// Retry-After forms.
const (
	FormNone       = "none"
	FormDelta      = "delta"      // delay-seconds, rounded up
	FormDate       = "date"       // IMF-fixdate, rounded up to the second
	FormNegative   = "negative"   // "-N": invalid
	FormGarbage    = "garbage"    // not a number nor a date: invalid
	FormPastDate   = "past-date"  // a date already gone: retry at once is allowed
	FormFractional = "fractional" // "1.5": invalid delay-seconds
	FormHuge       = "huge"       // an enormous but valid delay
)

// Retry-After value sources.
const (
	ValueFixed    = "fixed"     // RetryAfter.Seconds
	ValueLimiter  = "limiter"   // time until the quota has a token again
	ValuePhaseEnd = "phase-end" // time until the current phase ends
)

// RetryAfter says whether and how a phase's throttling responses (429, 503,
// and other 5xx) carry Retry-After.
type RetryAfter struct {
	Form  string        // FormNone (default), FormDelta, ...
	Value string        // ValueFixed (default), ValueLimiter, ValuePhaseEnd
	Fixed time.Duration // for ValueFixed
	// Spread adds a random amount to the value, per response. For delta
	// and date, whose values are whole seconds, it must be whole seconds
	// (Validate) and is drawn after rounding: uniform over the integers
	// 0..Spread/1s, both included, so the values on the wire differ. For
	// the other forms it is uniform in [0, Spread) before the value is
	// written.
	Spread time.Duration
}
