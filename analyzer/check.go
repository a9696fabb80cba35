package analyzer

import (
	"strings"

	"github.com/retrylab/retrylab/timeline"
)

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

// decide is the one rule (Analyzer.decide) for this check.
func (b checkBase) decide(lo, hi, thr float64, samples int64, reason string) CheckResult {
	return b.a.decide(b.cfg, lo, hi, thr, samples, reason)
}

// act is what the host is credited with at the end e of this check's
// range (its noise row).
func (b checkBase) act(e Effect) hostAct { return b.a.noise().act(b.cfg.def.Noise, e) }

// hit reports whether counter c wants an example of one more
// offender, counting it.
func (b checkBase) hit(c *counter) bool { return c.hit(b.a.maxEx) }

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

// example is an offender's example at this retry.
func (f *retryFacts) example(detail string) Example {
	return Example{Client: f.st.client, Key: strings.Clone(f.key), Attempt: int(f.x.n), At: f.x.at, Prev: f.p.done, Detail: detail}
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
