package stubserver

import (
	"strconv"
	"strings"
	"time"

	"github.com/retrylab/retrylab/timeline"
)

// phase is a Phase laid out in run time.
type phase struct {
	Phase
	start, end int64 // ns; end 0: until the run ends
	latency    time.Duration
	cum        []float64 // cumulative mix weights
	desc       string
	raDesc     string
}

// layOut lays cfg's phases out in run time, one phase "ok" when it has none.
func layOut(cfg Config) []phase {
	if len(cfg.Phases) == 0 {
		cfg.Phases = []Phase{{Name: "ok"}}
	}
	var phases []phase
	var at int64
	for i, p := range cfg.Phases {
		if p.Name == "" {
			p.Name = "phase-" + strconv.Itoa(i+1) // 1-based, as the scenario loader names them
		}
		ph := phase{Phase: p, start: at, latency: cfg.Latency}
		if p.Latency != 0 {
			ph.latency = p.Latency
		}
		if i < len(cfg.Phases)-1 {
			at += int64(p.For)
			ph.end = at
		}
		var sum float64
		for _, w := range p.Respond.Mix {
			sum += w.Weight
			ph.cum = append(ph.cum, sum)
		}
		ph.desc, ph.raDesc = describe(p)
		phases = append(phases, ph)
	}
	return phases
}

// works reports whether the phase's answers, when 200, are work the
// capacity model serves (see Capacity).
func (ph *phase) works() bool {
	k := ph.Respond.Kind
	return k == "" || k == RespondOK || k == RespondQuota
}

// describe is a phase's answer and Retry-After as timeline.Phase names them.
func describe(p Phase) (respond, retryAfter string) {
	r := p.Respond
	switch r.Kind {
	case "", RespondOK:
		respond = RespondOK
	case RespondQuota:
		respond = RespondQuota
	case RespondStatus:
		respond = "status " + strconv.Itoa(r.Status)
	case RespondFault:
		respond = "fault " + r.Fault
	case RespondPassthrough:
		respond = RespondPassthrough
	case RespondMix:
		var b strings.Builder
		b.WriteString("mix")
		for _, w := range r.Mix {
			b.WriteByte(' ')
			if w.Passthrough {
				b.WriteString(RespondPassthrough)
			} else if w.Fault != "" {
				b.WriteString(w.Fault)
			} else {
				b.WriteString(strconv.Itoa(w.Status))
			}
			b.WriteByte(':')
			b.WriteString(strconv.FormatFloat(w.Weight, 'g', -1, 64))
		}
		respond = b.String()
	}
	ra := p.RetryAfter
	if ra.Form == "" || ra.Form == FormNone {
		return respond, ""
	}
	v := ra.Value
	if v == "" || v == ValueFixed {
		v = ra.Fixed.String()
	}
	retryAfter = ra.Form + " " + v
	if ra.Spread > 0 {
		retryAfter += " spread " + ra.Spread.String()
	}
	return respond, retryAfter
}

// Phases is the schedule laid out in run time, for timeline.Meta.Phases.
func (s *Server) Phases() []timeline.Phase {
	out := make([]timeline.Phase, len(s.phases))
	for i, p := range s.phases {
		out[i] = timeline.Phase{Name: p.Name, Start: p.start, End: p.end, Respond: p.desc, RetryAfter: p.raDesc, Capacity: p.Capacity}
	}
	return out
}

// phaseAt returns the phase holding run instant at.
func (s *Server) phaseAt(at int64) (int, *phase) {
	for i := range s.phases {
		p := &s.phases[i]
		if p.end == 0 || at < p.end {
			return i, p
		}
	}
	i := len(s.phases) - 1
	return i, &s.phases[i]
}
