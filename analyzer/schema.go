package analyzer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

//go:generate go test -run TestChecksDoc -update

// The check schema: every check, its parameters, their kinds and defaults,
// in one table. The analyzer resolves its configuration from it, the
// scenario loader validates expect against it, and the table of
// docs/checks.md is generated from it (TestChecksDoc; `go generate
// ./analyzer` rewrites it).

// checkTable is every check, in report order. Its values are the
// analyzer's defaults: the analyzer reads them from here and nowhere else.
var checkTable = []Check{
	{
		ID: CheckRetryAfter, build: newRetryAfter, Unit: "early retries", Meaning: "early retries (count)",
		Params: []Param{
			{"tolerance", KindDuration, Default{Num: 0.005, Doc: "{}; + `meta.clock_uncertainty` in a merged timeline"}},
		},
		Skips: "no retry followed a pacing Retry-After (or, over gRPC, a pushback that said not to retry)",
		Noise: NoiseRow{Delay: Both, Undo: "hi also counts the retries that arrived within the lateness p50 after not_before − tolerance: a client early by more than that shows at least half of its early retries early. Over gRPC, lo counts a retry after a do-not-retry pushback only when it came later than the lateness p99 after that answer (a hedge sent before it may have been made late)"},
	},
	{
		ID: CheckInstantRetry, build: newInstant, Unit: "%", Meaning: "% of retries after an unpaced 429/5xx or other rate limit within `window`",
		Threshold: Default{Num: 50, Doc: "{} %, or the stated policy's expected share + 10 points (at most 90 %) if higher"},
		Params: []Param{
			{"window", KindDuration, Default{Num: 0.050}},
		},
		Skips: "no retry followed an unpaced 429/5xx or rate limit",
		Noise: NoiseRow{Delay: Lowers, Undo: "hi is, for a lateness x, the share within `window` + x plus the share the host makes later than x (two standard errors over); the least over x of the p50, p90, p99 and the most measured. A retry whose client claimed a wait within `window` (X-Retrylab-Wait) counts in lo and hi; one whose longer claim its gap bears out (not shorter than the claim, nor longer by more than twice the most lateness known, the fleet's own first attempts' included) counts in neither"},
	},
	{
		ID: CheckWaves, build: newWaves, Unit: "× full jitter", Meaning: "worst cohort's concentration (× full jitter)",
		Threshold: Default{Num: defaultWaves},
		Params: []Param{
			{"min_samples", KindNumber, Default{Num: 20}},
			{"min_clients", KindNumber, Default{Num: 5}},
			{"slack", KindDuration, Default{Num: 0.050}},
			{"window", KindDuration, Default{Num: 0.100, Doc: "{}, for the warning"}},
		},
		Skips: "no client-paced cohort with `min_samples` retries from `min_clients` clients",
		Noise: NoiseRow{Delay: Both, Batch: Raises, Undo: "lo takes out the pairs batches of the measured size can make (k·(k−1)/2 each) and reads the spread over the mean less the lateness p99; hi reads the pairs within the resolution + x over the least share of pairs a lateness of the measured quantiles keeps within x of each other (x from the quantiles' differences; the tightest), and the spread without the share of waits the host's tail beyond x may have lengthened and x²/4 of variance (the least over the lateness quantiles x); retries beyond Retry-After whose spread twice the lateness p90 explains are server-paced (a warning, not judged). A cohort whose sampled retries claimed their waits (X-Retrylab-Wait), at most 5% of them missing or contradicted by their gaps, is read on the claims: lo = hi"},
	},
	{
		ID: CheckNonRetryable, build: newNonRetry, Unit: "retries", Meaning: "retries after a status in the set that was not a rate limit (count)",
		Params: []Param{
			{"statuses", KindStatuses, Default{Statuses: []int{400, 401, 403, 404, 422}}},
		},
		Skips: "the server sent no status in the set but rate limits",
	},
	{
		ID: CheckIdempotency, build: newIdem, Unit: "offences", Meaning: "POST/PATCH retries without the write's `Idempotency-Key` (none, or a fresh one per attempt), and writes sent with a key another write had sent (count)",
		Skips: "no POST or PATCH was retried or carried a key",
	},
	{
		ID: CheckAttempts, build: newAttempts, Unit: "attempts", Meaning: "most attempts used by one logical request",
		Threshold: Default{None: true, Doc: "policy `max_attempts`"},
		Skips:     "no `max_attempts` and no threshold; no attempts",
	},
	{
		ID: CheckBudget, build: newBudget, Unit: "requests", Meaning: "failed requests that hung or overran the budget (count)",
		Params: []Param{
			{"tolerance", KindDuration, Default{None: true, Doc: "max(1s, budget/10)"}},
			{"budget", KindDuration, Default{None: true, Doc: "policy"}},
		},
		Skips: "no outcomes (`serve` recording); no request failed",
		Noise: NoiseRow{Delay: Raises, Undo: "lo credits the host with the lateness p99 per attempt of each request that overran, and for an exec program the p99 of how late its result lines were read (`reader_p99`)"},
	},
	{
		ID: CheckGiveUp, build: newGiveUp, Unit: "% lost", Meaning: "% of logical requests lost although the server began serving within their budget",
		Threshold: Default{Num: defaultGiveUp, Doc: "{} %"},
		Params: []Param{
			{"within", KindDuration, Default{Num: 30, Doc: "policy budget, else the watchdog, else {}"}},
		},
		Skips: "no outcomes; no phases; nothing the library decided",
		Noise: NoiseRow{Delay: Raises, Undo: "lo credits the host with the lateness p99 per attempt of each request lost"},
	},
	{
		ID: CheckAmplification, build: newAmplification, Unit: "attempts/request", Meaning: "attempts per logical request",
		Threshold: Default{Num: 5, Doc: "policy `max_attempts`, else {}"},
		Params: []Param{
			{"retry_share", KindNumber, Default{None: true, Doc: "off; the most % of attempts that may be retries"}},
		},
		Skips: "no attempts",
	},
	{
		ID: CheckPacing, build: newPacing, Unit: "% rate-limited", Meaning: "% of steady-state attempts in quota phases that a limit rejected (429 or another rate limit)",
		Threshold: Default{Num: 1, Doc: "{} %"},
		Params: []Param{
			{"warmup", KindDuration, Default{Num: 2}},
		},
		Skips: "no quota, or self-throttling not expected",
		Noise: NoiseRow{Delay: Raises, Undo: "lo is 0 when the lateness p99 exceeds what the quota's burst absorbs (burst/rate): bunched requests drain it"},
	},
	{
		ID: CheckJitterBounds, build: newJitter, Unit: "%", Meaning: "% of client-paced retries waiting longer than the bound + tolerance",
		Threshold: Default{Num: 1, Doc: "{} %"},
		Params: []Param{
			{"tolerance", KindDuration, Default{Num: 0.025}},
			{"first_exponent", KindNumber, Default{Num: 0}},
		},
		Skips: "no stated policy/base; decorrelated without cap; pacing expected",
		Noise: NoiseRow{Delay: Raises, Undo: "lo credits the host with the lateness p99 on each wait over its bound"},
	},
	{
		ID: CheckRecovery, build: newRecovery, Unit: "s", Meaning: "seconds from the last trigger's end until goodput is back at `share` of the offered first-attempt load for `hold` (metastable: the time observed, and it fails)",
		Threshold: Default{Num: defaultRecovery, Doc: "{} s"},
		Params: []Param{
			{"window", KindDuration, Default{None: true, Doc: "200 first attempts, 1–10 s"}},
			{"hold", KindDuration, Default{None: true, Doc: "5 windows, ≥ 5s"}},
			{"share", KindNumber, Default{Num: defaultRecoveryShare, Doc: "{} %"}},
		},
		Skips: "no capacity model; no trigger; trigger until the end; no offered load after it; overloaded before it; the run ended too soon (required with a trigger: INCONCLUSIVE)",
		Noise: NoiseRow{Delay: Raises, Starve: Raises, Undo: "lo counts as goodput the attempts the stub served within the attempt timeout whose clients had gone; starved, lo is 0 when the lateness p90 is half the service time or more, or when the load after the trigger was not amplified past load-amplification's default (a storm is made of retries)"},
	},
	{
		ID: CheckLoadAmplification, build: newLoadAmp, Unit: "× offered load", Meaning: "attempts per first attempt from the trigger until the recovery (×)",
		Threshold: Default{Num: defaultLoadAmp},
		Skips:     "no capacity model; no trigger; no first attempt then",
		Noise:     NoiseRow{Starve: Both, Undo: "starved: lo and hi are the reading over the trigger alone and over the window to the recovery; hi is unbounded unless the retries show their own spread (every cohort's fastest tenth at most 0.6 of its median, the median ≥ 4× the lateness p90, or the cohort read on its clients' wait claims as waves reads them); lo is 0 when the lateness p90 is half the service time or more (the host may have cut the stub's capacity); when the stub was overloaded before the trigger (no recovery to close the window), lo is 0 and hi the largest mean from the trigger to any instant after its end, unbounded unless the retries show their own spread"},
	},
	{
		ID: CheckWastedWork, build: newWasted, Unit: "% wasted", Meaning: "% of service time given to attempts whose client had gone",
		Threshold: Default{Num: defaultWasted, Doc: "{} %"},
		Skips:     "no capacity model; no service time recorded",
		Noise:     NoiseRow{Starve: Both, Undo: "starved: lo leaves out the service wasted on attempts served within the attempt timeout, and is 0 when the lateness p90 is half the service time or more; hi is unbounded unless the retries show their own spread, as load-amplification"},
	},
}

// LookupCheck returns check id's row of the schema.
func LookupCheck(id string) (Check, bool) {
	if d := lookupCheck(id); d != nil {
		return *d, true
	}
	return Check{}, false
}

func lookupCheck(id string) *Check {
	for i := range checkTable {
		if checkTable[i].ID == id {
			return &checkTable[i]
		}
	}
	return nil
}

// ErrUnknownParam is wrapped by errors about a parameter a check does not
// have.
var ErrUnknownParam = errors.New("unknown parameter")

// ThresholdKey resolves a key of expect.thresholds: "ID" and
// "ID.threshold" are the check's threshold, "ID.PARAM" one of its
// parameters. An unknown check is an error wrapping ErrUnknownCheck; an
// unknown parameter is one wrapping ErrUnknownParam, returned with the
// check.
func ThresholdKey(key string) (Check, Param, error) {
	id, name, hasParam := strings.Cut(key, ".")
	c := lookupCheck(id)
	if c == nil {
		return Check{}, Param{}, unknownCheck(id)
	}
	if !hasParam {
		name = ThresholdParam
	}
	p, ok := c.Param(name)
	if !ok {
		return *c, Param{}, fmt.Errorf("analyzer: check %s: %w %q (known: %s)", id, ErrUnknownParam, name, strings.Join(c.ParamNames(), ", "))
	}
	return *c, p, nil
}

// thresholdValue is a value of expect.thresholds as a timeline's meta
// holds it, read by the one parser (ParseValue).
func thresholdValue(k ParamKind, v float64) (paramValue, error) {
	return parseParam(k, strconv.FormatFloat(v, 'g', -1, 64))
}

// CheckIDs returns every check id in report order.
func CheckIDs() []string {
	ids := make([]string, len(checkTable))
	for i, d := range checkTable {
		ids[i] = d.ID
	}
	return ids
}

// ErrUnknownCheck is wrapped by errors about a check id this version does
// not know (ParseCheckSpec, ParseCheckIDs, Options.Validate).
var ErrUnknownCheck = errors.New("unknown check")

func unknownCheck(id string) error {
	return fmt.Errorf("analyzer: %w %q (known: %s)", ErrUnknownCheck, id, strings.Join(CheckIDs(), ", "))
}
