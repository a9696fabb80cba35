package analyzer

// Check ids, stable: they appear in scenarios (expect.checks), flags
// (--check, --skip), JSON and JUnit output.
const (
	CheckRetryAfter    = "retry-after"
	CheckInstantRetry  = "instant-retry"
	CheckWaves         = "waves"
	CheckNonRetryable  = "non-retryable"
	CheckIdempotency   = "idempotency"
	CheckAttempts      = "attempts"
	CheckBudget        = "budget"
	CheckGiveUp        = "give-up"
	CheckAmplification = "amplification"
	CheckPacing        = "pacing"
	CheckJitterBounds  = "jitter-bounds"
	// The capacity checks judge a stub with finite capacity
	// (timeline.Meta.Capacity) and a trigger phase that scales it down.
	CheckRecovery          = "recovery"
	CheckLoadAmplification = "load-amplification"
	CheckWastedWork        = "wasted-work"
)

// Check statuses, the value of CheckResult.Status.
const (
	StatusPass = "pass"
	StatusFail = "fail"
	StatusSkip = "skip"
	// StatusInconclusive: the figure's range under the host's noise
	// straddles the threshold (CheckResult.Range): the check cannot
	// decide, and the verdict is INCONCLUSIVE.
	StatusInconclusive = "inconclusive"
)

// Verdict is the analyzer's judgement of one timeline. Status is FAIL when
// any check failed (a failure seen in part of a run is still a failure),
// else INCONCLUSIVE when the run behind the timeline was not carried out
// faithfully or nothing was judged (Inconclusive says why), else PASS. Pass
// is true only for PASS: a CI gate never turns a broken run green.
type Verdict struct {
	Status       string        `json:"verdict"` // VerdictPass, VerdictFail or VerdictInconclusive
	Pass         bool          `json:"pass"`
	Inconclusive []string      `json:"inconclusive,omitempty"` // why the run cannot be vouched for
	Checks       []CheckResult `json:"checks"`
	Warnings     []Warning     `json:"warnings,omitempty"`
	Figures      Figures       `json:"figures"`
}

// Failed returns the ids of the failed checks, in report order.
func (v *Verdict) Failed() []string {
	var ids []string
	for _, c := range v.Checks {
		if c.Status == StatusFail {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// Check returns the result of the check with the given id, or nil.
func (v *Verdict) Check(id string) *CheckResult {
	for i := range v.Checks {
		if v.Checks[i].ID == id {
			return &v.Checks[i]
		}
	}
	return nil
}

// CheckResult is the verdict of one check. A check fails when Figure exceeds
// Threshold; Reason says why a check was skipped and, for the others, what
// the figure counts.
type CheckResult struct {
	ID        string    `json:"id"`
	Status    string    `json:"status"`
	Figure    float64   `json:"figure"`
	Threshold float64   `json:"threshold"`
	Unit      string    `json:"unit"`
	Reason    string    `json:"reason,omitempty"`
	Examples  []Example `json:"examples,omitempty"`
	// Samples is how many events the figure was measured over (retries,
	// logical requests, attempts: see Reason).
	Samples int64 `json:"samples"`
	// Range is the figure's range under the host's noise, [lo, hi]: the
	// least and the most the client's own behaviour could have read
	// (docs/checks.md, "Noise"); absent when it is a point. Figure is lo,
	// or hi when the check is inconclusive.
	Range []float64 `json:"range,omitempty"`
}

// Example is one piece of evidence for a failed check: an offending attempt
// or logical request. Times are nanoseconds since the run's start.
type Example struct {
	Client  string `json:"client,omitempty"`
	Key     string `json:"key,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	At      int64  `json:"at"`             // the offending attempt's arrival (or the request's end)
	Prev    int64  `json:"prev,omitempty"` // the previous response (or the request's start)
	Detail  string `json:"detail"`
}

// Warning is something a reader must know that fails no check.
type Warning struct {
	ID      string `json:"id"`
	Message string `json:"message"`
	Remedy  string `json:"remedy,omitempty"`
}

// Warning ids.
const (
	// WarnServerSync: retries that waited exactly as Retry-After said came
	// back together: the server synchronized the fleet.
	WarnServerSync = "server-induced-synchronization"
	// WarnUnordered: attempts of one logical request arrived out of order
	// in the stream and some retries could not be paired.
	WarnUnordered = "unordered-attempts"
	// WarnNoMeta: the timeline had no meta record.
	WarnNoMeta = "no-meta"
)

// Figures summarizes the timeline the verdict was drawn from.
type Figures struct {
	Scenario string `json:"scenario,omitempty"`
	Subject  string `json:"subject,omitempty"`
	Version  string `json:"subject_version,omitempty"`
	Recorder string `json:"recorder,omitempty"`
	Seed     int64  `json:"seed"`
	Virtual  bool   `json:"virtual,omitempty"`

	Attempts int64 `json:"attempts"`
	Requests int64 `json:"requests"` // logical requests (first attempts seen)
	Retries  int64 `json:"retries"`  // attempts after the first
	Outcomes int64 `json:"outcomes"`
	// Results counts outcomes by result; Statuses counts attempts by status
	// ("429", "503", "reset", ...).
	Results  map[string]int64 `json:"results,omitempty"`
	Statuses map[string]int64 `json:"statuses,omitempty"`
	// Span is the time from the first arrival to the last event, ns.
	Span int64 `json:"span"`
	// ServerPaced is how many retries waited exactly as Retry-After said.
	ServerPaced int64 `json:"server_paced"`
	// ClientPaced is how many retries were paced by the client's own backoff.
	ClientPaced int64 `json:"client_paced"`
}
