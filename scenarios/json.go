package scenarios

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/retrylab/retrylab/stubserver"
)

// MarshalJSON encodes the scenario in the scenario-file schema, every
// default spelled out (durations as Go durations, rates as "N/interval").
// JSON is YAML, so Parse reads the result back into an equal Scenario: the
// timeline's meta record keeps it to reproduce the run. Source and File are
// not encoded.
func (sc *Scenario) MarshalJSON() ([]byte, error) {
	o := object{
		{"name", sc.Name},
	}
	if sc.Description != "" {
		o = append(o, kv{"description", sc.Description})
	}
	fleet := object{
		{"clients", sc.Fleet.Clients},
		{"start", sc.Fleet.Start.String()},
		{"requests", sc.Fleet.Requests},
		{"think", sc.Fleet.Think.String()},
		{"method", sc.Fleet.Method},
		{"timeout", sc.Fleet.Timeout.String()},
	}
	if d := sc.Fleet.AttemptTimeout; d > 0 {
		fleet = append(fleet, kv{"attempt_timeout", d.String()})
	}
	if len(sc.Fleet.APIKeys) > 0 {
		groups := make([]object, 0, len(sc.Fleet.APIKeys))
		for _, g := range sc.Fleet.APIKeys {
			groups = append(groups, object{{"prefix", g.Prefix}, {"share", g.Share}})
		}
		fleet = append(fleet, kv{"api_keys", groups})
	}
	o = append(o,
		kv{"duration", sc.Duration.String()},
		kv{"server", serverJSON(sc.Server)},
		kv{"fleet", fleet},
		kv{"subject", subjectJSON(sc.Subject)},
	)
	if e := expectJSON(sc.Expect); len(e) > 0 {
		o = append(o, kv{"expect", e})
	}
	return json.Marshal(o)
}

func serverJSON(c stubserver.Config) object {
	var o object
	if c.Latency != 0 {
		o = append(o, kv{"latency", c.Latency.String()})
	}
	if c.Headers != "" {
		o = append(o, kv{"headers", c.Headers})
	}
	if c.Upstream != "" {
		o = append(o, kv{"upstream", c.Upstream})
	}
	if c.Quota != nil {
		o = append(o, kv{"quota", quotaJSON(c.Quota)})
	}
	if k := c.Capacity; k != nil {
		o = append(o, kv{"capacity", object{
			{"concurrency", k.Concurrency},
			{"queue", k.Queue},
			{"service", k.Service.String()},
			{"dist", k.Dist},
			{"discipline", k.Discipline},
			{"cancel_on_disconnect", k.CancelOnDisconnect},
		}})
	}
	if len(c.Phases) > 0 {
		phases := make([]object, 0, len(c.Phases))
		for _, p := range c.Phases {
			phases = append(phases, phaseJSON(p))
		}
		o = append(o, kv{"phases", phases})
	}
	return o
}

// quotaJSON writes a quota of one limit and no tiers in the short form
// (the limit's keys in the quota itself), others with limits or tiers.
func quotaJSON(q *stubserver.Quota) object {
	var o object
	switch {
	case len(q.Limits) == 1 && len(q.Tiers) == 0:
		o = limitJSON(q.Limits[0])
	default:
		if len(q.Limits) > 0 {
			o = append(o, kv{"limits", limitsJSON(q.Limits)})
		}
		if len(q.Tiers) > 0 {
			tiers := make([]object, 0, len(q.Tiers))
			for _, t := range q.Tiers {
				to := object{{"name", t.Name}}
				if len(t.Keys) > 0 {
					to = append(to, kv{"keys", t.Keys})
				}
				to = append(to, kv{"limits", limitsJSON(t.Limits)})
				if t.Default {
					to = append(to, kv{"default", true})
				}
				if t.Anonymous {
					to = append(to, kv{"anonymous", true})
				}
				tiers = append(tiers, to)
			}
			o = append(o, kv{"tiers", tiers})
		}
	}
	if len(q.Costs) > 0 {
		costs := make([]object, 0, len(q.Costs))
		for _, c := range q.Costs {
			var co object
			if c.Method != "" {
				co = append(co, kv{"method", c.Method})
			}
			if c.Path != "" {
				co = append(co, kv{"path", c.Path})
			}
			costs = append(costs, append(co, kv{"cost", c.Cost}))
		}
		o = append(o, kv{"costs", costs})
	}
	if q.Backend != "" {
		o = append(o, kv{"backend", q.Backend})
	}
	if q.OnError != "" {
		o = append(o, kv{"on_error", q.OnError})
	}
	return o
}

func limitsJSON(ls []stubserver.Limit) []object {
	out := make([]object, 0, len(ls))
	for _, l := range ls {
		out = append(out, limitJSON(l))
	}
	return out
}

func limitJSON(l stubserver.Limit) object {
	var o object
	if l.Name != "" {
		o = append(o, kv{"name", l.Name})
	}
	o = append(o, kv{"algorithm", l.Algorithm}, kv{"rate", formatRate(l.Limit, l.Per)})
	if l.Burst != 0 {
		o = append(o, kv{"burst", l.Burst})
	}
	o = append(o, kv{"key", l.Key})
	if l.Mode != "" {
		o = append(o, kv{"mode", l.Mode})
	}
	if l.MaxDelay != 0 {
		o = append(o, kv{"max_delay", l.MaxDelay.String()})
	}
	if l.Status != 0 {
		o = append(o, kv{"status", l.Status})
	}
	return o
}

func phaseJSON(p stubserver.Phase) object {
	o := object{{"name", p.Name}}
	if p.For != 0 {
		o = append(o, kv{"for", p.For.String()})
	}
	var respond any
	switch p.Respond.Kind {
	case stubserver.RespondStatus:
		ro := object{{"status", p.Respond.Status}}
		if p.Respond.RateLimit {
			ro = append(ro, kv{"rate_limit", true})
		}
		respond = ro
	case stubserver.RespondMix:
		var mix object
		for _, w := range p.Respond.Mix {
			k := w.Fault
			switch {
			case w.Passthrough:
				k = stubserver.RespondPassthrough
			case k == "":
				k = strconv.Itoa(w.Status)
			}
			mix = append(mix, kv{k, w.Weight})
		}
		respond = object{{"mix", mix}}
	case stubserver.RespondFault:
		respond = object{{"fault", p.Respond.Fault}}
	case "":
		respond = stubserver.RespondOK
	default:
		respond = p.Respond.Kind
	}
	o = append(o, kv{"respond", respond})
	if ra := p.RetryAfter; ra != (stubserver.RetryAfter{}) {
		ro := object{}
		if ra.Form != "" {
			ro = append(ro, kv{"form", ra.Form})
		}
		switch ra.Value {
		case "":
		case stubserver.ValueFixed:
			ro = append(ro, kv{"value", ra.Fixed.String()})
		default:
			ro = append(ro, kv{"value", ra.Value})
		}
		if ra.Spread != 0 {
			ro = append(ro, kv{"spread", ra.Spread.String()})
		}
		o = append(o, kv{"retry_after", ro})
	}
	if p.Latency != 0 {
		o = append(o, kv{"latency", p.Latency.String()})
	}
	if p.Capacity != 0 {
		o = append(o, kv{"capacity", p.Capacity})
	}
	return o
}

func subjectJSON(s SubjectSpec) object {
	o := object{{"name", s.Name}}
	p := s.Policy
	var po object
	dur := func(k string, d time.Duration) {
		if d != 0 {
			po = append(po, kv{k, d.String()})
		}
	}
	dur("base", p.Base)
	dur("cap", p.Cap)
	if p.MaxAttempts != 0 {
		po = append(po, kv{"max_attempts", p.MaxAttempts})
	}
	dur("budget", p.Budget)
	if p.Jitter != "" {
		po = append(po, kv{"jitter", p.Jitter})
	}
	if p.Rate != 0 {
		po = append(po, kv{"rate", formatFloat(p.Rate) + "/s"})
	}
	if p.Burst != 0 {
		po = append(po, kv{"burst", p.Burst})
	}
	dur("timeout", p.Timeout)
	if len(po) > 0 {
		o = append(o, kv{"policy", po})
	}
	return o
}

func expectJSON(e Expect) object {
	var o object
	if len(e.Checks) > 0 {
		o = append(o, kv{"checks", e.Checks})
	}
	if len(e.Skip) > 0 {
		o = append(o, kv{"skip", e.Skip})
	}
	if len(e.Require) > 0 {
		o = append(o, kv{"require", e.Require})
	}
	if len(e.Thresholds) > 0 {
		o = append(o, kv{"thresholds", e.Thresholds})
	}
	if e.AllowUnexercised {
		o = append(o, kv{"allow_unexercised", true})
	}
	return o
}

// object is a JSON object that keeps its keys in order.
type object []kv

type kv struct {
	k string
	v any
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(e.k)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
