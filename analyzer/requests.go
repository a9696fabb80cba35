package analyzer

import "fmt"

// The checks of whole logical requests, read from the closed requests'
// tally (keyTally) once every record of them is in: attempts (none past
// the cap) and amplification (attempts per request).

type attemptsCheck struct{ checkBase }

func newAttempts(b checkBase) checker { return attemptsCheck{b} }

func (ch attemptsCheck) result() CheckResult {
	a := ch.a
	if a.attCap <= 0 {
		return skip("no stated max_attempts in the policy and no threshold")
	}
	if a.fig.Requests == 0 {
		return skip("no attempts in the timeline")
	}
	t := a.tl
	if a.fig.Requests-t.exclRequests <= 0 {
		return skip("no logical request to judge" + t.exclText())
	}
	r := verdict(ch.cfg, float64(t.maxAtt), a.threshold(ch.cfg), a.fig.Requests-t.exclRequests,
		fmt.Sprintf("most attempts any logical request used; %d requests exceeded %d%s", t.attBad, a.attCap, t.exclText()))
	r.Examples = t.attEx
	return r
}

type amplificationCheck struct{ checkBase }

func newAmplification(b checkBase) checker { return amplificationCheck{b} }

// result counts neither the retries of a 502 the stub answered for a dead
// upstream or a failed quota backend (the test environment's, not the
// client's) nor the requests the checks do not see (harness, canceled,
// past the cap).
func (ch amplificationCheck) result() CheckResult {
	a, c := ch.a, ch.cfg
	if a.fig.Requests == 0 {
		return skip("no attempts in the timeline")
	}
	t := a.tl
	env := a.fid.upRetries + a.fid.beRetries
	req := a.fig.Requests - t.exclRequests
	att := a.fig.Attempts - env - t.exclAttempts
	ret := att - req
	if req <= 0 {
		return skip("every logical request was canceled, past the cap or failed in the harness")
	}
	amp := float64(att) / float64(req)
	share := pct(ret, att)
	reason := fmt.Sprintf("%d attempts for %d logical requests; retries are %.1f%% of traffic", att, req, share)
	if env > 0 {
		reason += fmt.Sprintf(" (%d retries after upstream or quota-backend failures not counted)", env)
	}
	reason += t.exclText()
	r := verdict(c, amp, a.threshold(c), req, reason)
	if lim, ok := c.set("retry_share"); ok {
		r.Reason += fmt.Sprintf(" (limit %.1f%%)", lim.num)
		if share > lim.num {
			r.Status = StatusFail
			r.Examples = []Example{{Detail: fmt.Sprintf("retries are %.1f%% of traffic; the limit is %.1f%%", share, lim.num)}}
		}
	}
	if r.Status == StatusFail && r.Examples == nil {
		r.Examples = []Example{{Detail: fmt.Sprintf("%.2f attempts per logical request; the limit is %.2f", amp, r.Threshold)}}
	}
	return r
}
