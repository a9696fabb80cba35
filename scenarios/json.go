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
	o = append(o,
		kv{"duration", sc.Duration.String()},
		kv{"server", serverJSON(sc.Server)},
		kv{"fleet", object{
			{"clients", sc.Fleet.Clients},
			{"start", sc.Fleet.Start.String()},
			{"requests", sc.Fleet.Requests},
			{"think", sc.Fleet.Think.String()},
			{"method", sc.Fleet.Method},
			{"timeout", sc.Fleet.Timeout.String()},
		}},
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
	if c.Quota != nil && len(c.Quota.Limits) > 0 {
		q := c.Quota.Limits[0]
		qo := object{{"algorithm", q.Algorithm}, {"rate", formatRate(q.Limit, q.Per)}}
		if q.Burst != 0 {
			qo = append(qo, kv{"burst", q.Burst})
		}
		o = append(o, kv{"quota", append(qo, kv{"key", q.Key})})
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

func phaseJSON(p stubserver.Phase) object {
	o := object{{"name", p.Name}}
	if p.For != 0 {
		o = append(o, kv{"for", p.For.String()})
	}
	var respond any
	switch p.Respond.Kind {
	case stubserver.RespondStatus:
		respond = object{{"status", p.Respond.Status}}
	case stubserver.RespondMix:
		var mix object
		for _, w := range p.Respond.Mix {
			k := w.Fault
			if k == "" {
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
