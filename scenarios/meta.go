package scenarios

import (
	"encoding/json"
	"runtime"
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
// schedule, fleet, quota and expectations the analyzer reads, the
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
		Quota:       metaQuota(sc.Server.Quota),
	}
	if m.Recorder == "" {
		m.Recorder = "run"
	}
	if m.Recorder == "run" {
		// A serve recording judges what it holds: it schedules nothing,
		// its clients are not the scenario's fleet and it stops on its own
		// --duration, not the scenario's cap.
		m.Duration = int64(sc.Duration)
		m.Fleet = &timeline.Fleet{
			Clients:  sc.Fleet.Clients,
			Requests: sc.Fleet.Requests,
			Start:    sc.Fleet.Start.String(),
			Think:    int64(sc.Fleet.Think),
			Method:   sc.Fleet.Method,
			Timeout:  int64(sc.Fleet.Timeout),
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
	if e := sc.Expect; len(e.Checks)+len(e.Skip)+len(e.Require)+len(e.Thresholds) > 0 {
		m.Expect = &timeline.Expect{Checks: e.Checks, Skip: e.Skip, Require: e.Require, Thresholds: e.Thresholds}
	}
	if s := o.Subject; s != nil {
		m.Subject = s.Name()
		if d, ok := s.(subjects.Describer); ok {
			info := d.Describe(subjects.Params{Policy: sc.Subject.Policy, Virtual: o.Virtual})
			m.SubjectVersion, m.Summary = info.Version, info.Summary
			if st := info.Stated; st != nil {
				m.Policy = &timeline.Policy{
					Base: int64(st.Base), Cap: int64(st.Cap), MaxAttempts: st.MaxAttempts,
					Budget: int64(st.Budget), Jitter: st.Jitter, Retryable: st.Retryable,
				}
			}
		}
	}
	return m
}

// metaQuota is the published quota as the timeline records it, with the
// stub's defaults filled in: a second's period, and a burst of the limit
// (at least 1) when none is written.
func metaQuota(quota *stubserver.Quota) *timeline.Quota {
	if quota == nil || len(quota.Limits) == 0 {
		return nil
	}
	q := quota.Limits[0]
	per := q.Per
	if per <= 0 {
		per = time.Second
	}
	burst := q.Burst
	if burst == 0 {
		burst = max(1, int(q.Limit))
	}
	return &timeline.Quota{Algorithm: q.Algorithm, Rate: q.Limit / per.Seconds(), Burst: burst, Key: q.Key}
}
