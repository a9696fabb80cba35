package analyzer

// A Retry is one retry as the analyzer judged it: an attempt paired with the
// attempt before it of the same logical request, and what the pairwise
// checks (retry-after, waves, jitter-bounds) read from the pair. It is the
// one classification of retries: reports draw these facts rather than
// derive their own. Times are nanoseconds since the run's start.
//
// Only paired retries are reported: a retry whose predecessor never came
// (lost, too far out of order, or idle past Options.IdleTimeout) is counted
// in the unordered-attempts warning instead. An attempt after a success in
// a serve recording starts a new logical request and is no retry.
type Retry struct {
	// Client and Key name the logical request. They stay valid after the
	// call (they do not share the decoder's memory).
	Client, Key string
	// Attempt is the retry's attempt number; Number is which retry of its
	// logical request it is (1 for the second attempt), as jitter-bounds
	// and waves count them.
	Attempt, Number int
	// Status is the previous attempt's status (0: it met a fault), and
	// Class what it asked of the client (ClassifyResponse): a 403 with
	// Class ResponseRateLimit is a rate limit the client may retry.
	Status int
	Class  ResponseClass
	// Prev is the previous attempt's response (for one its client left
	// before, abandoned, when the fleet's attempt timeout fired, if the
	// meta states it); At the retry's arrival.
	Prev, At int64

	// Paced: the previous response's Retry-After named a later instant,
	// NotBefore (a Retry-After that allows an immediate retry, a past date
	// or 0, paces nothing). The retry-after check judges exactly these
	// retries.
	Paced     bool
	NotBefore int64 // when Paced
	// Early: Paced, and the retry arrived more than the retry-after
	// check's tolerance before NotBefore (a retry-after offender).
	Early bool

	// Own is the retry's own wait, the one the waves check judges: from
	// NotBefore when it honoured a Retry-After that paced it (Paced and
	// not Early), else from Prev. Honoured retries form the cohorts that
	// can be server-paced; whether one is (its waits add no spread of their
	// own) is judged per cohort at the end: Figures.ServerPaced.
	Own int64

	// Bounded: not Paced, and the stated policy bounds the client's delay
	// (the jitter-bounds check judges it: false when the check cannot tell
	// a self-throttling client's limiter waits from its backoff). Bound is
	// the longest delay the policy allows before this retry; Beyond
	// whether At − Prev exceeded it by more than the check's tolerance.
	Bounded bool
	Bound   int64
	Beyond  bool
}

// Honoured reports whether the retry waited for a Retry-After that paced it
// (Paced and not Early): its own wait counts from NotBefore.
func (r Retry) Honoured() bool { return r.Paced && !r.Early }
