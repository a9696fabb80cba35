package scenarios

import (
	"cmp"
	"encoding/json"
	"runtime"
	"slices"
	"time"

	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
	"github.com/retrylab/retrylab/timeline"
)

// MetaOptions are what a meta record needs beyond the scenario itself.
type MetaOptions struct {
	// Subject is the library under test (nil: none, as for `serve`). When
	// it implements subjects.Describer, its version, stated policy and
	// summary go into the record.
	Subject subjects.Subject
	// Phases is the stub's schedule (stubserver.Server.Phases); nil lays
	// it out from the scenario.
	Phases []timeline.Phase
	// Recorder is "run" (the default) or "serve".
	Recorder string
	Seed     int64
	Start    time.Time // wall-clock time zero
	Virtual  bool
	Tool     string // retrylab version
	Shard    string // "i/n"; the fleet's Scheduled is then the shard's share
	// Epoch is the shared time zero (Meta.Epoch), zero when none; Host
	// the machine's name (Meta.Host).
	Epoch time.Time
	Host  string
}

// Meta builds the timeline's meta record for a run of sc: the typed
// schedule, fleet, quota (every limit, and the one pacing is judged
// against; see metaLimits) and expectations the analyzer reads, the
// subject's stated policy, and Source, the scenario as JSON (see
// MarshalJSON), so the timeline stands alone and reproduces the run.
func (sc *Scenario) Meta(o MetaOptions) *timeline.Meta {
	m := &timeline.Meta{
		Format:      timeline.Format,
		Tool:        o.Tool,
		Go:          runtime.Version(),
		Recorder:    o.Recorder,
		Virtual:     o.Virtual,
		Scenario:    sc.Name,
		Description: sc.Description,
		Seed:        o.Seed,
		Start:       o.Start,
		Shard:       o.Shard,
		Epoch:       o.Epoch,
		Host:        o.Host,
		Phases:      o.Phases,
		Capacity:    metaCapacity(sc.Server.Capacity),
	}
	if sc.Server.Protocol == stubserver.ProtocolGRPC {
		m.Protocol = stubserver.ProtocolGRPC
	}
	m.Quota, m.Limits = metaLimits(sc.Server.Quota)
	if m.Recorder == "" {
		m.Recorder = "run"
	}
	if m.Recorder == "run" {
		// A serve recording judges what it holds: it schedules nothing,
		// its clients are not the scenario's fleet and it stops on its own
		// --duration, not the scenario's cap.
		m.Duration = int64(sc.Duration)
		m.Fleet = &timeline.Fleet{
			Clients:        sc.Fleet.Clients,
			Requests:       sc.Fleet.Requests,
			Start:          sc.Fleet.Start.String(),
			Think:          int64(sc.Fleet.Think),
			Method:         sc.Fleet.Method,
			Timeout:        int64(sc.Fleet.Timeout),
			AttemptTimeout: int64(sc.Fleet.AttemptTimeout),
		}
		if n := sc.Fleet.ProcessCount(); n < sc.Fleet.Clients {
			m.Fleet.Processes = n
		}
		m.Scheduled = int64(sc.Fleet.Clients) * int64(sc.Fleet.Requests)
		if sh, err := timeline.ParseShard(o.Shard); err == nil {
			m.Scheduled = int64(sh.Clients(sc.Fleet.Clients)) * int64(sc.Fleet.Requests)
		}
	}
	if src, err := json.Marshal(sc); err == nil {
		m.Source = src
	}
	if m.Phases == nil {
		if srv, err := stubserver.New(sc.Server, stubserver.Options{}); err == nil {
			m.Phases = srv.Phases()
		}
	}
	if e := sc.Expect; len(e.Checks)+len(e.Skip)+len(e.Require)+len(e.Thresholds) > 0 || e.AllowUnexercised {
		m.Expect = &timeline.Expect{Checks: e.Checks, Skip: e.Skip, Require: e.Require, Thresholds: e.Thresholds, AllowUnexercised: e.AllowUnexercised}
	}
	if s := o.Subject; s != nil {
		m.Subject = s.Name()
		if info, ok := sc.describe(s, o.Virtual); ok {
			m.SubjectVersion, m.Summary = info.Version, info.Summary
			m.Policy = metaPolicy(info.Stated)
		}
	}
	return m
}

// StatedPolicy is the policy a run of sc through s states in its meta
// record (timeline.Meta.Policy), the one the analyzer judges attempts,
// amplification, budget, jitter-bounds and instant retries against: what
// s says it follows given the scenario's subject.policy (subjects.Describer;
// an exec program states that policy itself). Nil: s states none.
func (sc *Scenario) StatedPolicy(s subjects.Subject, virtual bool) *timeline.Policy {
	info, _ := sc.describe(s, virtual)
	return metaPolicy(info.Stated)
}

// describe is s's description for a run of sc, as process 0's instance
// has it; ok is false when s is no subjects.Describer.
func (sc *Scenario) describe(s subjects.Subject, virtual bool) (info subjects.Info, ok bool) {
	d, ok := s.(subjects.Describer)
	if !ok {
		return info, false
	}
	p := sc.SubjectParams(0, nil, virtual)
	if n := sc.Fleet.ProcessCount(); n < sc.Fleet.Clients {
		// Process 0's instance, shared by its clients.
		p.Clients = (sc.Fleet.Clients + n - 1) / n
	}
	return d.Describe(p), true
}

// metaPolicy is a stated policy as the timeline records it (nil: none).
func metaPolicy(st *subjects.Stated) *timeline.Policy {
	if st == nil {
		return nil
	}
	return &timeline.Policy{
		Base: int64(st.Base), Cap: int64(st.Cap), MaxAttempts: st.MaxAttempts,
		Budget: int64(st.Budget), Jitter: st.Jitter, Retryable: st.Retryable,
	}
}

// metaCapacity is the stub's finite capacity as the timeline records it,
// with the stub's defaults filled in (fixed service times, fifo); each
// phase's share is in the phases, as the stub lays them out.
func metaCapacity(k *stubserver.Capacity) *timeline.Capacity {
	if k == nil {
		return nil
	}
	return &timeline.Capacity{Concurrency: k.Concurrency, Queue: k.Queue, Service: int64(k.Service),
		Dist: cmp.Or(k.Dist, stubserver.DistFixed), Discipline: cmp.Or(k.Discipline, stubserver.DisciplineFIFO),
		CancelOnDisconnect: k.CancelOnDisconnect}
}

// metaLimits lists every limit of quota, every tier's, as the timeline
// records them (timeline.Meta.Limits), with the stub's defaults filled in:
// the names the stub publishes, a second's window, algorithm token-bucket
// and key global, a leaky bucket's mode meter, and as burst the most
// requests the limit admits at once: a token or leaky bucket's burst, the
// limit (at least 1) when none is written and for the windows. pacing is
// the limit pacing is judged against (timeline.Meta.Quota): of the limits
// every request meets without tiers, or of the default tier's (a client
// without a listed key gets it), the one with the lowest sustained rate,
// the first among equals. Tiers without a default tier have no limit every
// client meets: the lowest sustained rate of every tier's limits is taken.
func metaLimits(quota *stubserver.Quota) (pacing *timeline.Quota, all []timeline.Quota) {
	if quota == nil {
		return nil, nil
	}
	type group struct {
		tier   string
		limits []stubserver.Limit
		dflt   bool
	}
	groups := []group{{limits: quota.Limits}}
	if len(quota.Tiers) > 0 {
		groups = groups[:0]
		for _, t := range quota.Tiers {
			groups = append(groups, group{t.Name, t.Limits, t.Default})
		}
	}
	hasDefault := len(quota.Tiers) == 0 || slices.ContainsFunc(quota.Tiers, func(t stubserver.Tier) bool { return t.Default })
	pick := -1
	for _, g := range groups {
		for _, l := range stubserver.Named(g.limits) {
			all = append(all, metaLimit(g.tier, l))
			if hasDefault && !g.dflt && g.tier != "" {
				continue
			}
			if pick < 0 || all[len(all)-1].Rate < all[pick].Rate {
				pick = len(all) - 1
			}
		}
	}
	if pick < 0 {
		return nil, all
	}
	q := all[pick]
	return &q, all
}

// metaLimit is one limit as the timeline records it (see metaLimits): its
// defaults as the stub resolves them (stubserver.Limit.Resolved).
func metaLimit(tier string, l stubserver.Limit) timeline.Quota {
	r := l.Resolved()
	q := timeline.Quota{
		Name: l.Name, Tier: tier, Algorithm: r.Algorithm, Rate: r.Limit / r.Per.Seconds(), Key: r.Key,
		Limit: max(1, int(r.Limit)), Window: int64(r.Per), Mode: r.Mode, Burst: r.Burst,
	}
	return q
}
