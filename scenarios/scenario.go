// Package scenarios owns retrylab's scenario files: their YAML schema (one
// table per struct, tables.go), the strict loader, the built-in scenarios
// and the timeline's meta record. The runner package plays one.
package scenarios

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
)

// Defaults applied by the loader when a scenario leaves a key out. They
// follow what a k6 or vegeta user expects: a bounded run, a modest fleet
// started at once, GET requests and a 30-second per-request watchdog.
const (
	DefaultDuration = 60 * time.Second
	DefaultClients  = 10
	DefaultRequests = 1
	DefaultMethod   = "GET"
	DefaultTimeout  = 30 * time.Second
	DefaultSubject  = "retrylab"
)

// Limits on the sizes a scenario may ask for; larger values are errors, so a
// typo cannot turn the tool into the outage.
const (
	MaxDuration = 24 * time.Hour
	MaxClients  = 1_000_000
	MaxRequests = 1_000_000
	MaxPhases   = 1000
)

// Arrival kinds: how the fleet's clients start.
const (
	ArrivalBurst   = "burst"   // every client at time zero (staggered by nanoseconds)
	ArrivalRamp    = "ramp"    // clients evenly spread over Arrival.Over
	ArrivalPoisson = "poisson" // exponential gaps at Arrival.Rate clients per second
)

// Jitter kinds the loader accepts in subject.policy.jitter.
var JitterKinds = []string{"full", "equal", "decorrelated"}

// A Scenario is one run: the stub server's behaviour, the fleet that loads
// it, the subject (the retry library under test) and what the analyzer
// should expect. Load and Parse fill every field, defaults included; a
// Scenario is plain data, safe to copy and to share read-only.
type Scenario struct {
	Name        string
	Description string
	// Duration is the hard cap on the whole run (DefaultDuration when unset).
	Duration time.Duration
	Server   stubserver.Config
	Fleet    Fleet
	Subject  SubjectSpec
	Expect   Expect
	// Source is the file's bytes as read; File is its path, or
	// "builtin/NAME.yaml" for an embedded scenario.
	Source []byte
	File   string
}

// Fleet is what the simulated clients do.
type Fleet struct {
	Clients  int           // simulated clients (DefaultClients)
	Start    Arrival       // when each client starts (burst)
	Requests int           // logical requests per client (DefaultRequests)
	Think    time.Duration // pause between a client's logical requests (0)
	Method   string        // DefaultMethod; POST exercises the idempotency check
	// Timeout is the watchdog per logical request: past it the outcome is
	// "hung" (DefaultTimeout).
	Timeout time.Duration
	// AttemptTimeout is the application's own per-attempt timeout (its
	// HTTP client's; 0: none), given to every subject: the third-party
	// libraries get it where their documentation puts it (see
	// subjects.Params.AttemptTimeout), and a subject that takes a policy
	// gets it as policy.timeout unless the policy states its own.
	AttemptTimeout time.Duration
	// APIKeys gives the clients API keys, for quotas keyed or tiered by
	// API key (none when empty); see APIKey.
	APIKeys []KeyGroup
	// Processes groups the clients into that many processes, each with
	// one instance of the subject (one Transport, one retry budget, one
	// limiter) shared by all of its clients' goroutines, the way a
	// service instance shares one http.Client; see ProcessOf. 0 (the
	// default) means one process per client.
	Processes int
}

// ProcessCount is how many subject instances the fleet runs: Processes,
// at most one per client; 0 or unset means one per client.
func (f *Fleet) ProcessCount() int {
	if f.Processes <= 0 || f.Processes >= f.Clients {
		return f.Clients
	}
	return f.Processes
}

// ProcessOf is the process client id belongs to: the clients are dealt
// to the processes in turn (client i to process i mod ProcessCount), so
// every process gets clients from the whole arrival schedule. With one
// process per client, a client is its own process.
func (f *Fleet) ProcessOf(id int) int {
	n := f.ProcessCount()
	if n <= 0 {
		return id
	}
	return id % n
}

// SubjectParams are the Params a run gives client id's subject: the
// scenario's policy, its timeout defaulting to the fleet's
// attempt_timeout, the attempt timeout itself, r as the client's jitter
// source, and whether the run is virtual.
func (sc *Scenario) SubjectParams(id int, r *rand.Rand, virtual bool) subjects.Params {
	p := sc.Subject.Policy
	if p.Timeout == 0 {
		p.Timeout = sc.Fleet.AttemptTimeout
	}
	return subjects.Params{Client: id, Rand: r, Policy: p, AttemptTimeout: sc.Fleet.AttemptTimeout, Virtual: virtual}
}

// MaxKeyGroups is the most groups fleet.api_keys may list.
const MaxKeyGroups = 64

// KeyGroup is one group of fleet.api_keys: its clients send the API key
// Prefix followed by their client id ("free-17").
type KeyGroup struct {
	Prefix string
	// Share is the group's weight, a whole number (1 when unwritten):
	// clients take the groups in turn, each group Share clients in a row.
	Share int
}

// APIKey is the API key client id sends as "Authorization: Bearer KEY"
// ("" for none): the groups of f.APIKeys are dealt in turn, each Share
// clients in a row, so with shares 3 and 1 clients 0-2 are in the first
// group, 3 in the second, 4-6 in the first again, and so on.
func (f *Fleet) APIKey(id int) string {
	total := 0
	for _, g := range f.APIKeys {
		total += max(1, g.Share)
	}
	if total == 0 {
		return ""
	}
	i := id % total
	for _, g := range f.APIKeys {
		if i < max(1, g.Share) {
			return g.Prefix + strconv.Itoa(id)
		}
		i -= max(1, g.Share)
	}
	return ""
}

// Arrival is the fleet's start schedule: `burst`, `ramp 10s` or
// `poisson 200/s` in a scenario file.
type Arrival struct {
	Kind string        // ArrivalBurst (the zero value means burst), ArrivalRamp, ArrivalPoisson
	Over time.Duration // ramp: the last client starts at Over
	Rate float64       // poisson: mean clients started per second
}

// String returns the arrival in scenario-file syntax.
func (a Arrival) String() string {
	switch a.Kind {
	case ArrivalRamp:
		return "ramp " + a.Over.String()
	case ArrivalPoisson:
		return "poisson " + formatFloat(a.Rate) + "/s"
	}
	return ArrivalBurst
}

// SubjectSpec names the subject and the policy knobs handed to it; zero
// knobs mean the subject's own defaults.
type SubjectSpec struct {
	// Name is a subjects.Lookup name (DefaultSubject when unset), e.g.
	// "retryablehttp" or "exec:python3 client.py".
	Name   string
	Policy subjects.Policy
}

// Expect is which checks the analyzer runs and their thresholds. Empty
// Checks means the analyzer's default set. The loader validates it
// against the analyzer's check schema (analyzer.Checks): known check ids,
// and threshold keys "ID" or "ID.PARAM" naming a parameter of the check
// with a value of its kind.
type Expect struct {
	Checks     []string
	Skip       []string
	Require    []string           // checks whose skip makes the verdict INCONCLUSIVE
	Thresholds map[string]float64 // by "ID" or "ID.PARAM"; durations in seconds, a status set as one status
	// AllowUnexercised states that a run in which the stub refused or
	// failed no request is what the scenario means (a baseline): without
	// it such a run is INCONCLUSIVE, since no retry logic was exercised.
	AllowUnexercised bool
}

// formatFloat writes f in the shortest form that parses back to f.
func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// formatRate writes a quota's rate in scenario-file syntax ("100/1s").
func formatRate(limit float64, per time.Duration) string {
	return fmt.Sprintf("%s/%s", formatFloat(limit), per)
}
