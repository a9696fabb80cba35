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
	// Phases run in order; the last lasts until the run ends. No phases
	// means one `ok` phase.
	Phases []Phase
}

// Rate-limit header families.
const (
	HeadersNone       = "none"
	HeadersIETF       = "ietf"        // RateLimit and RateLimit-Policy (IETF httpapi draft)
	HeadersXRateLimit = "x-ratelimit" // X-RateLimit-Limit, -Remaining, -Reset (epoch seconds)
)

// Quota algorithms.
const (
	AlgTokenBucket   = "token-bucket"
	AlgFixedWindow   = "fixed-window"
	AlgSlidingWindow = "sliding-window"
)

// Quota keys: what one quota counts.
const (
	KeyGlobal   = "global"
	KeyClient   = "client"
	KeyAPIKey   = "api-key" // Authorization: Bearer … or X-Api-Key
	KeyEndpoint = "endpoint"
)

// Quota is a published rate limit.
type Quota struct {
	Algorithm string // AlgTokenBucket (default), AlgFixedWindow, AlgSlidingWindow
	// Limit requests per Per: 100/s is {Limit: 100, Per: time.Second}.
	Limit float64
	Per   time.Duration
	// Burst is the token bucket's capacity (default: Limit, at least 1).
	Burst int
	Key   string // KeyGlobal (default), KeyClient, KeyAPIKey, KeyEndpoint
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
}

// Respond kinds.
const (
	RespondOK     = "ok"     // 200
	RespondQuota  = "quota"  // 200 while the quota has room, else 429
	RespondStatus = "status" // always Status
	RespondMix    = "mix"    // weighted statuses and faults
	RespondFault  = "fault"  // always Fault
)

// Faults.
const (
	FaultReset = "reset" // close the connection without a response
	FaultHang  = "hang"  // hold the request until the client gives up or the server stops
)

// Respond is what a phase answers.
type Respond struct {
	Kind   string // RespondOK (default), RespondQuota, RespondStatus, RespondMix, RespondFault
	Status int    // for RespondStatus
	Mix    []Weighted
	Fault  string // for RespondFault
}

// Weighted is one entry of a mix: a status or a fault, and its weight
// (weights are relative; they need not sum to 100).
type Weighted struct {
	Status int
	Fault  string
	Weight float64
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
