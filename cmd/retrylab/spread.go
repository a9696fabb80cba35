package main

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/retrylab/retrylab/runner"
	"github.com/retrylab/retrylab/scenarios"
	"github.com/retrylab/retrylab/timeline"
	"github.com/spf13/pflag"
)

// spreadFlags are run's flags for a fleet spread over processes: an
// external stub, a shard, a shared epoch.
type spreadFlags struct {
	target      string
	allowRemote bool
	shard       shardFlag
	epoch       epochFlag
}

func (f *spreadFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.target, "target", "", "drive the stub at this base `URL` (one 'retrylab serve', or several behind a load balancer) instead of starting one; the run's timeline then holds the fleet's outcomes only: merge it with the stubs' recordings (serve -o)")
	fs.BoolVar(&f.allowRemote, "allow-remote", false, "allow a --target that is not a loopback address")
	fs.Var(&f.shard, "shard", "run shard `i/n` of the fleet: clients i, i+n, i+2n, ... with the arrivals and ids of the whole fleet's run of the same seed")
	fs.Var(&f.epoch, "epoch", "start the scenario at this wall-clock `INSTANT` (RFC 3339, e.g. 2026-12-01T12:00:00Z), shared with 'serve --epoch' and the other shards, instead of at the run's start")
}

// any reports whether the run is spread over processes.
func (f *spreadFlags) any() bool {
	return f.target != "" || !f.shard.s.Whole() || !f.epoch.t.IsZero()
}

// validate checks the flags that need no scenario; the epoch is checked
// against the scenario by checkEpoch.
func (f *spreadFlags) validate(v *verdictFlags) error {
	if f.allowRemote && f.target == "" {
		return usagef("--allow-remote needs --target")
	}
	if f.target == "" {
		return nil
	}
	u, err := runner.ParseTarget(f.target)
	if err != nil {
		return usagef("--target: %v", err)
	}
	if !f.allowRemote && !loopbackHost(u.Hostname()) {
		return usagef("--target %s is not a loopback address; pass --allow-remote to use it", f.target)
	}
	for _, c := range []struct {
		flag string
		set  bool
	}{{"--check", len(v.checks) > 0}, {"--skip", len(v.skip) > 0}, {"--require", len(v.require) > 0},
		{"--json", v.json != ""}, {"--junit", v.junit != ""}, {"--markdown", v.markdown != ""}} {
		if c.set {
			return usagef("%s with --target: this run's timeline holds no attempt, only the fleet's outcomes; judge the merged timeline (retrylab merge, then retrylab analyze %s ...)", c.flag, c.flag)
		}
	}
	return nil
}

// checkScenario refuses a shard without clients in sc's fleet (of clients
// when given), and an epoch the run would miss (or one too far ahead), as
// runner.CheckEpoch judges it; errors name the flag.
func (f *spreadFlags) checkScenario(sc *scenarios.Scenario, clients int, duration time.Duration) error {
	if clients <= 0 {
		clients = sc.Fleet.Clients
	}
	if sh := f.shard.s; !sh.Whole() && sh.Clients(clients) == 0 {
		return usagef("--shard %s: shard %s of %d clients has none", sh, sh, clients)
	}
	if f.epoch.t.IsZero() {
		return nil
	}
	eff := *sc
	if duration > 0 {
		eff.Duration = duration
	}
	if _, err := runner.CheckEpoch(&eff, f.epoch.t, time.Now()); err != nil {
		return usagef("--epoch %s: %v", f.epoch.String(), err)
	}
	return nil
}

// options are the flags as runner.RunOptions.
func (f *spreadFlags) options(o *runner.RunOptions) {
	o.Target, o.Shard, o.Epoch = f.target, f.shard.s, f.epoch.t
	if f.any() {
		o.Host = hostname()
	}
}

// hostname is the machine's name for Meta.Host, "" when unknown.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// loopbackHost reports whether host (a name or an IP) is on loopback:
// "localhost" or a loopback IP; other names are not resolved.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// shardFlag is --shard i/n.
type shardFlag struct{ s timeline.Shard }

func (f *shardFlag) String() string { return f.s.String() }
func (f *shardFlag) Type() string   { return "i/n" }
func (f *shardFlag) Set(v string) error {
	s, err := timeline.ParseShard(v)
	if err != nil {
		return err
	}
	f.s = s
	return nil
}

// epochFlag is --epoch, an RFC 3339 instant.
type epochFlag struct{ t time.Time }

func (f *epochFlag) String() string {
	if f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339Nano)
}
func (f *epochFlag) Type() string { return "instant" }
func (f *epochFlag) Set(v string) error {
	t, err := parseEpoch(v)
	if err != nil {
		return err
	}
	f.t = t
	return nil
}

// parseEpoch reads an RFC 3339 instant, fractional seconds allowed.
func parseEpoch(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("want an RFC 3339 instant such as 2026-12-01T12:00:00Z (date -u -d +1min +%%FT%%TZ prints one a minute ahead), got %q", v)
	}
	return t, nil
}

// relative says how far d (from now) is: "in 3s" or "3s ago".
func relative(d time.Duration) string {
	if d >= 0 {
		return "in " + d.Round(time.Millisecond).String()
	}
	return (-d).Round(time.Millisecond).String() + " ago"
}
