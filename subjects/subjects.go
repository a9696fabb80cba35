// Package subjects owns the adapters that put a library under test (a
// "subject") behind one interface: the project's own client, negative
// controls with one deliberate mistake each, real third-party retry
// libraries at their defaults, and exec for programs in any language.
//
// Each negative control is the reference client (the retrylab subject)
// built from its own parts with its one mistake: it keeps everything of
// the reference, its retry budget included, but that mistake, so it can
// differ from the reference only where its mistake says. Only the
// controls whose mistake is a missing bound, no-retry-budget and
// unbounded, have no retry budget.
package subjects

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Caller makes one logical request through the library under test: every
// attempt the library makes, retries included, goes through the harness's
// transport. It returns what the library returns to its user: the final
// response (whose body the caller must close) or an error.
type Caller func(ctx context.Context, req *http.Request) (*http.Response, error)

// A Subject builds one simulated client's caller from the library under
// test. next is the harness's transport; the subject wraps it and must not
// bypass it. New is called once per simulated client, or, when the fleet
// is grouped into processes (fleet.processes), once per process: that one
// instance (one Transport, one retry budget, one limiter) is then called
// concurrently by the goroutines of every client of the process, as a
// service instance shares one http.Client (see Params.Clients). The
// Caller it returns may be called concurrently unless the subject's doc
// says otherwise.
type Subject interface {
	Name() string
	New(next http.RoundTripper, p Params) Caller
}

// Params configures one simulated client's caller, or one process's.
type Params struct {
	// Client is the simulated client's id; for an instance shared by a
	// process's clients, the process's first client (its lowest id).
	Client int
	// Process is the index of the process the instance serves (client i
	// is in process i mod the process count), and Clients how many
	// simulated clients of the whole fleet share it. Clients 0 or 1: the
	// instance is Client's own (Process is then Client), as without
	// fleet.processes. Clients above 1: a shared instance, whose Caller
	// the clients of the process call at once.
	Process int
	Clients int
	// Rand is the client's seed-derived source for jitter (nil: the
	// subject's own, randomly seeded); for a shared instance, the first
	// client's. Subjects whose library can take a source use it, so a run
	// replays; it is not safe for concurrent use, so a subject that uses
	// it serializes its draws. A shared instance draws from it in the
	// order its clients' calls reach it, which the scheduler decides:
	// so the harness also gives each logical request a source of its own,
	// seeded from the run's seed, the client and the request's number, on
	// the request's context (client.WithRand), and subjects built on the
	// client package draw that request's jitter and keys from it, in the
	// same order every run. A subject whose library draws only from Rand
	// is not replayable when shared (Info.Replayable false).
	Rand *rand.Rand
	// Policy holds the scenario's policy knobs. Zero fields mean the
	// subject's defaults; libraries tested at their defaults ignore it.
	Policy Policy
	// AttemptTimeout is the application's own per-attempt timeout (the
	// scenario's fleet.attempt_timeout; 0: none). It is not a retry
	// setting, so libraries tested at their retry defaults take it too,
	// where their documentation puts it; subjects built on a Policy get
	// it as Policy.Timeout when the policy states none.
	AttemptTimeout time.Duration
	// Virtual is true when the run happens in virtual time (a synctest
	// bubble). Real-time-only subjects (see RealTimeOnly) refuse it.
	Virtual bool
	// Dial reaches the stub as the harness's transport does (over an
	// in-memory network in a virtual run), for a subject that opens
	// connections of its own: a gRPC channel. nil: a net.Dialer's.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Run ends when the run no longer needs the instance: a subject that
	// holds resources past its calls (a gRPC channel and its goroutines,
	// which a virtual run's bubble must see end) releases them then
	// (context.AfterFunc). nil: never.
	Run context.Context
}

// Policy is a retry policy in the scenario's terms. The zero value means
// "the subject's defaults".
type Policy struct {
	Base        time.Duration // backoff base delay
	Cap         time.Duration // bound on each computed backoff
	MaxAttempts int           // attempts per logical request, the first included
	Budget      time.Duration // bound on a logical request's elapsed time
	Jitter      string        // "full", "equal", "decorrelated" ("" = full)
	Rate        float64       // self-pacing requests per second (0: none)
	Burst       int           // self-pacing burst
	Timeout     time.Duration // per attempt (0: none)
}

// Speaker is an optional interface of a Subject that speaks a protocol
// other than HTTP: Protocol names it ("grpc"), the stub's
// server.protocol it needs. A Subject without it speaks HTTP; an exec
// program speaks what its stub does.
type Speaker interface {
	Protocol() string
}

// ProtocolOf is the protocol s speaks: its Speaker's, else "http".
func ProtocolOf(s Subject) string {
	if sp, ok := s.(Speaker); ok {
		return sp.Protocol()
	}
	return "http"
}

// Describer is an optional interface of a Subject: what it is and which
// policy it states, for the timeline's meta and the analyzer's
// policy-dependent checks (attempts, budget, jitter-bounds).
type Describer interface {
	Describe(p Params) Info
}

// Info describes a subject as configured by Params.
type Info struct {
	// Version is the library's module version ("v0.7.8"), or "(devel)" for
	// code of this module.
	Version string
	// Stated is the policy the subject claims to follow; nil when it has
	// none the analyzer can check against.
	Stated *Stated
	// Summary is one line on how the subject is wired.
	Summary string
	// Replayable is true when the subject draws randomness only from
	// Params.Rand, or none at all, so a seeded virtual-time run replays
	// exactly; false for libraries that draw from a global source.
	Replayable bool
}

// Stated is the policy a subject claims. Zero fields mean "unbounded" or
// "not stated": MaxAttempts 0 means no cap, Budget 0 no time bound.
type Stated struct {
	Base, Cap   time.Duration
	MaxAttempts int
	Budget      time.Duration
	Jitter      string // "full", "equal", "decorrelated", "none"
	Retryable   []int  // statuses the subject retries
}

// String writes a stated policy as run --policy takes it, the fields it
// states only, in the scenario's order: "base=200ms,cap=4s,max_attempts=8,
// budget=6s,jitter=full" ("none stated" when it states nothing).
func (s *Stated) String() string {
	if s == nil {
		return "none stated"
	}
	var parts []string
	add := func(k string, on bool, v any) {
		if on {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	add("base", s.Base > 0, s.Base)
	add("cap", s.Cap > 0, s.Cap)
	add("max_attempts", s.MaxAttempts > 0, s.MaxAttempts)
	add("budget", s.Budget > 0, s.Budget)
	add("jitter", s.Jitter != "", s.Jitter)
	if len(parts) == 0 {
		return "none stated"
	}
	return strings.Join(parts, ",")
}

// RealTimeOnly is an optional interface of a Subject that cannot run in
// virtual time (it runs real processes or real sockets). CheckVirtual
// reports it.
type RealTimeOnly interface {
	RealTimeOnly() string // why, one phrase
}

// ErrUnknown is returned by Lookup for a name no subject has.
var ErrUnknown = errors.New("subjects: unknown subject")

// ErrRealTimeOnly is returned by CheckVirtual, and by the callers of a
// real-time-only subject built with Params.Virtual set.
var ErrRealTimeOnly = errors.New("subjects: subject runs in real time only")

// CheckVirtual returns an error wrapping ErrRealTimeOnly when s cannot run
// in virtual time, else nil.
func CheckVirtual(s Subject) error {
	if r, ok := s.(RealTimeOnly); ok {
		return fmt.Errorf("%w: %s %s", ErrRealTimeOnly, s.Name(), r.RealTimeOnly())
	}
	return nil
}

var registry = struct {
	sync.Mutex
	m map[string]Subject
}{m: map[string]Subject{}}

// register adds a built-in subject; a duplicate name is a bug.
// Register adds s to the subjects Lookup and Names know; it panics if its
// name is taken. Packages of adapters outside this one (subjects/thirdparty,
// which the CLI imports) call it from an init function.
func Register(s Subject) { register(s) }

func register(s Subject) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.m[s.Name()]; dup {
		panic("subjects: duplicate subject " + s.Name())
	}
	registry.m[s.Name()] = s
}

// Lookup returns the built-in subject with the given name. "exec:COMMAND
// ARGS..." returns an exec Program running COMMAND with ARGS (split on
// spaces; use Program directly for arguments with spaces). Lookup is safe
// for concurrent use.
func Lookup(name string) (Subject, error) {
	if cmd, ok := strings.CutPrefix(name, "exec:"); ok {
		args := strings.Fields(cmd)
		if len(args) == 0 {
			return nil, fmt.Errorf("subjects: exec needs a command: %q", name)
		}
		return Program{Path: args[0], Args: args[1:]}, nil
	}
	registry.Lock()
	s, ok := registry.m[name]
	registry.Unlock()
	if !ok {
		if pkg, ok := optional[name]; ok {
			return nil, fmt.Errorf("%w %q: it is registered by %s, which this program does not import", ErrUnknown, name, pkg)
		}
		return nil, fmt.Errorf("%w %q (known: %s, exec:COMMAND)", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	return s, nil
}

// optional are the subjects a package registers that a program need not
// link (it would pull in its library): their names, and the package. A
// scenario may name one (the gRPC built-ins name grpcretry) whether or not
// the program reading it imports the package; running it needs the
// package. subjects/grpcsubjects's test holds its list equal to this one.
var optional = map[string]string{
	"grpc-default":            "github.com/retrylab/retrylab/subjects/grpcsubjects",
	"grpc-retrypolicy":        "github.com/retrylab/retrylab/subjects/grpcsubjects",
	"grpc-throttling":         "github.com/retrylab/retrylab/subjects/grpcsubjects",
	"grpc-hedging":            "github.com/retrylab/retrylab/subjects/grpcsubjects",
	"grpc-middleware":         "github.com/retrylab/retrylab/subjects/grpcsubjects",
	"grpc-middleware-backoff": "github.com/retrylab/retrylab/subjects/grpcsubjects",
	"grpcretry":               "github.com/retrylab/retrylab/subjects/grpcsubjects",
	"grpcretry-no-budget":     "github.com/retrylab/retrylab/subjects/grpcsubjects",
}

// Optional reports whether name is a subject of a package a program need
// not import (see optional), and that package.
func Optional(name string) (pkg string, ok bool) {
	pkg, ok = optional[name]
	return pkg, ok
}

// Names lists the built-in subjects, sorted ("exec" needs a command and is
// not listed).
func Names() []string {
	registry.Lock()
	defer registry.Unlock()
	names := make([]string, 0, len(registry.m))
	for n := range registry.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Controls lists the negative controls' names, sorted: subjects with one
// deliberate mistake each, which the analyzer must catch.
func Controls() []string {
	names := slices.Clone(controlNames)
	sort.Strings(names)
	return names
}

// Validate reports a policy no subject can follow: a negative duration,
// count or rate, or an unknown jitter name. The error names the field as
// the scenario file does ("policy.jitter: ...").
func (p Policy) Validate() error {
	switch {
	case p.Base < 0:
		return fmt.Errorf("subjects: policy.base: %v is negative", p.Base)
	case p.Cap < 0:
		return fmt.Errorf("subjects: policy.cap: %v is negative", p.Cap)
	case p.MaxAttempts < 0:
		return fmt.Errorf("subjects: policy.max_attempts: %d is negative", p.MaxAttempts)
	case p.Budget < 0:
		return fmt.Errorf("subjects: policy.budget: %v is negative", p.Budget)
	case p.Rate < 0 || p.Rate != p.Rate:
		return fmt.Errorf("subjects: policy.rate: %v is not a rate", p.Rate)
	case p.Burst < 0:
		return fmt.Errorf("subjects: policy.burst: %d is negative", p.Burst)
	case p.Timeout < 0:
		return fmt.Errorf("subjects: policy.timeout: %v is negative", p.Timeout)
	}
	switch p.Jitter {
	case "", "full", "equal", "decorrelated":
	default:
		return fmt.Errorf("subjects: policy.jitter: unknown mode %q (want full, equal or decorrelated)", p.Jitter)
	}
	return nil
}
