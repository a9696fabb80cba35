// A fleet spread over processes: an external stub (RunOptions.Target),
// a shard of the fleet (RunOptions.Shard), a shared epoch
// (RunOptions.Epoch).

package runner

import (
	"errors"
	"fmt"
	"github.com/retrylab/retrylab/scenarios"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/timeline"
)

// MaxEpochAhead bounds how far in the future an epoch may be: a run must
// stop by itself, and an epoch hours ahead is a typo.
const MaxEpochAhead = time.Hour

// ErrEpochPassed is wrapped by CheckEpoch's (and Run's) error when the
// epoch is so far in the past that the run would miss its first phase.
var ErrEpochPassed = errors.New("runner: the epoch has passed")

// ParseTarget reads the base URL of an external stub: http or https, a
// host, and no path (the stub derives client and request from the path
// the fleet builds), query, fragment or user. The URL's host is not
// checked against loopback: the caller decides what it may reach.
func ParseTarget(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if !strings.Contains(s, "://") {
		return nil, fmt.Errorf("runner: target %q: want an http:// or https:// URL", s)
	}
	if err != nil {
		return nil, fmt.Errorf("runner: target %q: %w", s, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("runner: target %q: want an http:// or https:// URL", s)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("runner: target %q: no host", s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, fmt.Errorf("runner: target %q: want a base URL without user, query or fragment", s)
	case u.Path != "" && u.Path != "/":
		return nil, fmt.Errorf("runner: target %q: want no path (the fleet requests /c/{client}/r/{seq} on the target)", s)
	}
	u.Path = ""
	return u, nil
}

// firstPhaseEnd is how long after time zero the first phase of sc ends:
// its `for`, or the duration cap when it is the only phase.
func firstPhaseEnd(sc *scenarios.Scenario) time.Duration {
	if ph := sc.Server.Phases; len(ph) > 1 && ph[0].For > 0 {
		return ph[0].For
	}
	return sc.Duration
}

// CheckEpoch judges a run of sc at the shared epoch from now: it is an
// error wrapping ErrEpochPassed when the epoch is in the past by the
// first phase or more (the run would not meet the scenario: start every
// process with a later epoch), and an error when it is more than
// MaxEpochAhead ahead. An epoch in the past by less than the first phase
// is allowed: the clients whose arrival instants have passed start at
// once, late (the outcomes record it, and the analyzer judges the
// lateness), and late says how late the run starts.
func CheckEpoch(sc *scenarios.Scenario, epoch, now time.Time) (late time.Duration, err error) {
	switch d := epoch.Sub(now); {
	case d > MaxEpochAhead:
		return 0, fmt.Errorf("runner: the epoch %s is %v ahead, more than %v", epoch.Format(time.RFC3339), d.Round(time.Second), MaxEpochAhead)
	case d >= 0:
		return 0, nil
	case -d >= firstPhaseEnd(sc):
		return -d, fmt.Errorf("%w: %s is %v ago, past the end of scenario %s's first phase (%v after it): the run would miss it; start every process with a later epoch",
			ErrEpochPassed, epoch.Format(time.RFC3339), (-d).Round(time.Millisecond), sc.Name, firstPhaseEnd(sc))
	default:
		return -d, nil
	}
}

// AnchorEpoch is the instant epoch (a wall-clock time, read from a flag)
// on this process's monotonic clock, so that instants measured from it do
// not jump when the wall clock is stepped: what Run makes of
// RunOptions.Epoch, and what `serve --epoch` gives the stub as its Start.
func AnchorEpoch(epoch time.Time) time.Time {
	now := time.Now()
	return now.Add(epoch.Round(0).Sub(now)) // Round(0): the two wall clocks compared
}

// countingTransport counts, on the harness's side, the attempts and
// throttling answers of a fleet whose stub is elsewhere (Progress and the
// Summary read them as they read an in-process stub's Stats).
type countingTransport struct {
	next                 http.RoundTripper
	attempts, t429, u503 atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.attempts.Add(1)
	resp, err := c.next.RoundTrip(req)
	if err == nil {
		switch resp.StatusCode {
		case http.StatusTooManyRequests:
			c.t429.Add(1)
		case http.StatusServiceUnavailable:
			c.u503.Add(1)
		}
	}
	return resp, err
}

// stubStats are the stub's totals: the in-process stub's, or what the
// harness counted of an external one.
func (r *runner) stubStats() stubserver.Stats {
	if r.srv != nil {
		return r.srv.Stats()
	}
	if r.counted == nil {
		return stubserver.Stats{}
	}
	return stubserver.Stats{Attempts: r.counted.attempts.Load(), Throttled429: r.counted.t429.Load(), Unavailable503: r.counted.u503.Load()}
}

// slotOf is the index of client id's slot: its place in the shard.
func (r *runner) slotOf(id int) int {
	if r.opts.Shard.Whole() {
		return id
	}
	return id / r.opts.Shard.Count
}

// metaNotes are what the meta record must say of how this process took
// part in the run.
func (r *runner) metaNotes(late time.Duration) []string {
	var notes []string
	if r.opts.Target != "" {
		notes = append(notes, "fleet only: the stub at "+r.opts.Target+" records the attempts (serve --record); merge its recordings with this file (retrylab merge) to analyze the run")
	}
	if late > 0 {
		notes = append(notes, fmt.Sprintf("this process started %v after the epoch: the clients whose arrival had passed started late", late.Round(time.Millisecond)))
	}
	return notes
}

// checkSpread refuses what a run spread over processes cannot do.
func checkSpread(sc *scenarios.Scenario, opts RunOptions, program bool) error {
	spread := opts.Target != "" || !opts.Shard.Whole() || !opts.Epoch.IsZero()
	switch {
	case !spread:
		return nil
	case opts.Virtual && (opts.Target != "" || !opts.Epoch.IsZero()):
		return errors.New("a virtual run has no target or epoch (its clock is the test's)")
	case program:
		return errors.New("an exec subject's fleet needs the in-process stub and the whole fleet (its start barrier): no target, shard or epoch")
	case opts.Shard.Count > timeline.MaxShards || opts.Shard.Index < 0 || (opts.Shard.Count > 1 && opts.Shard.Index >= opts.Shard.Count):
		return fmt.Errorf("shard %d/%d: want 0 ≤ i < n ≤ %d", opts.Shard.Index, opts.Shard.Count, timeline.MaxShards)
	case opts.Shard.Count > 1 && opts.Shard.Clients(sc.Fleet.Clients) == 0:
		return fmt.Errorf("shard %s of %d clients has none", opts.Shard, sc.Fleet.Clients)
	}
	if opts.Target != "" {
		if _, err := ParseTarget(opts.Target); err != nil {
			return err
		}
	}
	return nil
}

// trimTarget is the target as the fleet's base URL: no trailing slash.
func trimTarget(t string) string { return strings.TrimSuffix(t, "/") }
