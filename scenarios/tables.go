package scenarios

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
)

// The tables of the scenario file's structs; see schema.go. Hand-written
// are only the unions: respond, retry_after, the quota's short form and a
// fleet's start.

// scenarioKeys is the file's top level. MarshalJSON writes it; ParseServer
// takes the keys but server without reading them.
var scenarioKeys = keys[Scenario]{
	field("name", func(s *Scenario) *string { return &s.Name }, strKind, always),
	field("description", func(s *Scenario) *string { return &s.Description }, strKind, omitZero),
	field("duration", func(s *Scenario) *time.Duration { return &s.Duration }, duration(time.Nanosecond, MaxDuration), always),
	sub("server", func(s *Scenario) *stubserver.Config { return &s.Server }, serverKeys, always),
	sub("fleet", func(s *Scenario) *Fleet { return &s.Fleet }, fleetKeys, always),
	sub("subject", func(s *Scenario) *SubjectSpec { return &s.Subject }, subjectKeys, always),
	sub("expect", func(s *Scenario) *Expect { return &s.Expect }, expectKeys, omitZero),
}

// MarshalJSON encodes the scenario in the scenario-file schema, every
// default spelled out (durations as Go durations, rates as "N/interval").
// JSON is YAML, so Parse reads the result back into an equal Scenario: the
// timeline's meta record keeps it to reproduce the run. Source and File are
// not encoded.
func (sc *Scenario) MarshalJSON() ([]byte, error) {
	return json.Marshal(scenarioKeys.encode(sc))
}

// headerChoices are server.headers' values in the order the loader has
// always listed them (the README's), which is not Validate's.
var headerChoices = []string{stubserver.HeadersIETF, stubserver.HeadersXRateLimit, stubserver.HeadersNone}

var serverKeys = keys[stubserver.Config]{
	field("latency", func(c *stubserver.Config) *time.Duration { return &c.Latency }, duration(0, time.Hour), omitZero),
	field("headers", func(c *stubserver.Config) *string { return &c.Headers }, choice(headerChoices...), omitZero),
	field("upstream", func(c *stubserver.Config) *string { return &c.Upstream }, strKind, omitZero), // checked by validateServer
	field("protocol", func(c *stubserver.Config) *string { return &c.Protocol }, choice(stubserver.ProtocolNames()...), omitZero),
	field("proxy_timeout", func(c *stubserver.Config) *time.Duration { return &c.ProxyTimeout }, duration(0, time.Hour), omitZero),
	custom("quota", func(m *mapping, n ast.Node, path string, c *stubserver.Config) {
		if n != nil {
			c.Quota = m.d.quota(n, path)
		}
	}, func(c *stubserver.Config) any { return encodeQuota(c.Quota) }, func(c *stubserver.Config) bool { return c.Quota == nil }),
	custom("capacity", func(m *mapping, n ast.Node, path string, c *stubserver.Config) {
		if n != nil {
			c.Capacity = &stubserver.Capacity{Dist: stubserver.DistFixed, Discipline: stubserver.DisciplineFIFO}
			capacityKeys.decode(m.d, n, path, c.Capacity)
		}
	}, func(c *stubserver.Config) any { return capacityKeys.encode(c.Capacity) }, func(c *stubserver.Config) bool { return c.Capacity == nil }),
	custom("phases", (*mapping).phases, func(c *stubserver.Config) any { return encodeAll(c.Phases, phaseKeys(false)) },
		func(c *stubserver.Config) bool { return len(c.Phases) == 0 }),
}

// phases reads server.phases into cfg, whose quota and upstream are read.
func (m *mapping) phases(n ast.Node, path string, cfg *stubserver.Config) {
	d := m.d
	items := d.sequence(n, path)
	if len(items) > MaxPhases {
		d.fail(n, path, "%d phases, at most %d", len(items), MaxPhases)
		items = nil
	}
	names := map[string]bool{}
	for i, item := range items {
		p := d.item(path, i, item)
		ph := stubserver.Phase{Respond: stubserver.Respond{Kind: stubserver.RespondOK}}
		phaseKeys(i == len(items)-1).decode(d, d.resolve(item, p), p, &ph)
		if ph.Name == "" {
			ph.Name = fmt.Sprintf("phase-%d", i+1)
		}
		if names[ph.Name] {
			d.failAt(d.placeOf(p+".name", p), p+".name", "phase name %q used twice", ph.Name)
		}
		names[ph.Name] = true
		if ph.Respond.Kind == stubserver.RespondQuota && cfg.Quota == nil {
			d.failAt(d.placeOf(p+".respond", p), p+".respond", "respond: quota needs server.quota")
		}
		if cfg.Upstream == "" {
			d.needUpstream(ph, p)
		}
		if ph.RetryAfter.Value == stubserver.ValueLimiter && cfg.Quota == nil {
			d.failAt(d.placeOf(p+".retry_after.value", p), p+".retry_after.value", "value: limiter needs server.quota")
		}
		cfg.Phases = append(cfg.Phases, ph)
	}
}

// needUpstream places the error of a passthrough answer in a server
// without an upstream (serve --upstream replaces an upstream the file
// names; it cannot stand in for a missing one).
func (d *decoder) needUpstream(ph stubserver.Phase, p string) {
	const msg = "passthrough needs server.upstream (the URL of the API to forward to)"
	if ph.Respond.Kind == stubserver.RespondPassthrough {
		d.failAt(d.placeOf(p+".respond", p), p+".respond", "respond: %s", msg)
	}
	for _, w := range ph.Respond.Mix {
		if w.Passthrough {
			at := p + ".respond.mix." + stubserver.RespondPassthrough
			d.failAt(d.placeOf(at, p+".respond.mix", p), at, "%s", msg)
		}
	}
}

// placeOf returns the first recorded position among paths.
func (d *decoder) placeOf(paths ...string) *token.Position {
	for _, p := range paths {
		if pos := d.places[p]; pos != nil {
			return pos
		}
	}
	return nil
}

// capacityKeys is server.capacity; the loader starts it from the stub's
// defaults (no queue, fixed service times, fifo). Concurrency and service
// are required: a capacity without them models nothing.
var capacityKeys = keys[stubserver.Capacity]{
	field("concurrency", func(k *stubserver.Capacity) *int { return &k.Concurrency }, integer(1, stubserver.MaxConcurrency), always).
		needs("capacity needs concurrency: N (the workers serving at once)"),
	field("queue", func(k *stubserver.Capacity) *int { return &k.Queue }, integer(0, stubserver.MaxQueue), always),
	field("service", func(k *stubserver.Capacity) *time.Duration { return &k.Service }, duration(time.Nanosecond, MaxDuration), always).
		needs("capacity needs service: DURATION (the mean service time, e.g. 20ms)"),
	field("dist", func(k *stubserver.Capacity) *string { return &k.Dist }, choice(stubserver.DistNames()...), always),
	field("discipline", func(k *stubserver.Capacity) *string { return &k.Discipline }, choice(stubserver.DisciplineNames()...), always),
	field("cancel_on_disconnect", func(k *stubserver.Capacity) *bool { return &k.CancelOnDisconnect }, boolKind, always),
}

// limitTable is one limit's keys; need is the error of a limit without a
// rate. The short form of a quota, quota: {rate: 100/s, ...}, is one
// limit's keys in the quota itself.
func limitTable(need string) keys[stubserver.Limit] {
	return keys[stubserver.Limit]{
		field("name", func(l *stubserver.Limit) *string { return &l.Name }, strKind, omitZero),
		field("algorithm", func(l *stubserver.Limit) *string { return &l.Algorithm }, choice(stubserver.AlgorithmNames()...), always),
		custom("rate", func(m *mapping, n ast.Node, path string, l *stubserver.Limit) {
			if n == nil {
				return
			}
			if r, ok := rateKind.read(m.d, n, path); ok {
				l.Limit, l.Per = r.count, r.per
			}
		}, func(l *stubserver.Limit) any { return formatRate(l.Limit, l.Per) }, nil).needs(need),
		field("burst", func(l *stubserver.Limit) *int { return &l.Burst }, integer(0, 1_000_000_000), omitZero),
		field("key", func(l *stubserver.Limit) *string { return &l.Key }, choice(stubserver.KeyNames()...), always),
		field("mode", func(l *stubserver.Limit) *string { return &l.Mode }, choice(stubserver.ModeNames()...), omitZero),
		field("max_delay", func(l *stubserver.Limit) *time.Duration { return &l.MaxDelay }, duration(0, MaxDuration), omitZero),
		field("status", func(l *stubserver.Limit) *int { return &l.Status }, integer(100, 599), omitZero),
	}
}

var limitKeys = limitTable("a limit needs a rate (e.g. rate: 100/s)")

// limitDefaults fills the defaults of a limit the loader spells out, as
// the stub resolves them: algorithm, key and a leaky bucket's mode.
func limitDefaults(l *stubserver.Limit) {
	r := l.Resolved()
	l.Algorithm, l.Key, l.Mode = r.Algorithm, r.Key, r.Mode
}

// quotaKeys are server.quota's keys beside the short form's.
var quotaKeys = keys[stubserver.Quota]{
	list("limits", func(q *stubserver.Quota) *[]stubserver.Limit { return &q.Limits }, limitKeys, limitDefaults, omitZero).
		unless(shortQuota),
	list("tiers", func(q *stubserver.Quota) *[]stubserver.Tier { return &q.Tiers }, tierKeys, nil, omitZero),
	list("costs", func(q *stubserver.Quota) *[]stubserver.Cost { return &q.Costs }, costKeys, nil, omitZero),
	field("backend", func(q *stubserver.Quota) *string { return &q.Backend }, strKind, omitZero),
	field("on_error", func(q *stubserver.Quota) *string { return &q.OnError }, choice(stubserver.OnErrorNames()...), omitZero),
}

// shortQuota: a quota of one limit and no tiers is written in the short
// form.
func shortQuota(q *stubserver.Quota) bool { return len(q.Limits) == 1 && len(q.Tiers) == 0 }

// quota reads server.quota: the short form (one limit's keys) or layered
// limits, tiers, and in either form costs, backend and on_error. The
// stub's Validate judges the combinations (limits with tiers, mode without
// leaky-bucket, two default tiers, a cost no limit can hold, ...);
// validateServer places its errors.
func (d *decoder) quota(n ast.Node, path string) *stubserver.Quota {
	q := &stubserver.Quota{}
	m := d.mapping(n, path)
	if m.has("limits") || m.has("tiers") {
		for _, k := range limitKeys.names() {
			if f := m.field(k); f != nil {
				m.take(k)
				d.fail(f.keyNode, join(path, k), "%s belongs to a limit: with limits or tiers, write it in each limit", k)
			}
		}
	} else {
		need := "quota needs a rate (e.g. rate: 100/s), limits or tiers"
		if slices.ContainsFunc(limitKeys.names(), m.has) {
			need = "quota needs a rate (e.g. rate: 100/s)"
		}
		var l stubserver.Limit
		limitTable(need).read(m, &l)
		limitDefaults(&l)
		if l.Per > 0 {
			q.Limits = []stubserver.Limit{l}
			d.singleQuota = true
		}
	}
	quotaKeys.read(m, q)
	m.done()
	return q
}

func encodeQuota(q *stubserver.Quota) object {
	var o object
	if shortQuota(q) {
		o = limitKeys.encode(&q.Limits[0])
	}
	return append(o, quotaKeys.encode(q)...)
}

var tierKeys = keys[stubserver.Tier]{
	field("name", func(t *stubserver.Tier) *string { return &t.Name }, strKind, always),
	custom("keys", func(m *mapping, n ast.Node, path string, t *stubserver.Tier) {
		for i, item := range m.d.sequence(n, path) {
			p := m.d.item(path, i, item)
			if s, ok := scalarText(m.d.resolve(item, p)); ok {
				t.Keys = append(t.Keys, s)
			} else {
				m.d.fail(item, p, "want an API key or a prefix ending in *, got %s", describe(m.d.resolve(item, p)))
			}
		}
	}, func(t *stubserver.Tier) any { return t.Keys }, func(t *stubserver.Tier) bool { return len(t.Keys) == 0 }),
	list("limits", func(t *stubserver.Tier) *[]stubserver.Limit { return &t.Limits }, limitKeys, limitDefaults, always),
	field("default", func(t *stubserver.Tier) *bool { return &t.Default }, boolKind, omitZero),
	field("anonymous", func(t *stubserver.Tier) *bool { return &t.Anonymous }, boolKind, omitZero),
}

// pathKind is a cost's path pattern.
var pathKind = kind[string]{
	read: func(d *decoder, n ast.Node, path string) (string, bool) {
		s, ok := scalarText(n)
		if !ok || !strings.HasPrefix(s, "/") {
			d.fail(n, path, "want a path pattern below /c/{client}/r/{n}, starting with / (e.g. /search, /items/*), got %s", quoteNode(n))
			return "", false
		}
		return s, true
	},
}

var costKeys = keys[stubserver.Cost]{
	field("method", func(c *stubserver.Cost) *string { return &c.Method }, methodKind, omitZero),
	field("path", func(c *stubserver.Cost) *string { return &c.Path }, pathKind, omitZero),
	field("cost", func(c *stubserver.Cost) *int { return &c.Cost }, integer(1, 1_000_000_000), always).
		needs("a cost needs cost: N (the units each matching request spends)"),
}

// rate is a rate as written: count per interval.
type rate struct {
	count float64
	per   time.Duration
}

// rateKind reads "100/s" (or a bare number: per second).
var rateKind = parsed("a rate like 100/s", func(s string) (rate, error) {
	count, per, err := parseRate(s)
	return rate{count, per}, err
}, nil)

// shareKind is a phase's share of the capacity: 30% or 0.3, in (0, 1].
var shareKind = kind[float64]{
	read: func(d *decoder, n ast.Node, path string) (float64, bool) {
		const want = "want a share of the workers like 30% or 0.3, in (0, 1]"
		s, ok := scalarText(n)
		if _, isBool := n.(*ast.BoolNode); !ok || isBool {
			d.fail(n, path, "%s, got %s", want, describe(n))
			return 0, false
		}
		v, err := parseShare(s)
		if err != nil {
			d.fail(n, path, "%s: %v", want, err)
			return 0, false
		}
		return v, true
	},
}

// phaseKeys is a phase's table; every phase but the last needs a for.
func phaseKeys(last bool) keys[stubserver.Phase] {
	return keys[stubserver.Phase]{
		field("name", func(p *stubserver.Phase) *string { return &p.Name }, strKind, always),
		field("for", func(p *stubserver.Phase) *time.Duration { return &p.For }, duration(0, MaxDuration), omitZero).
			then(func(m *mapping, _ string, p *stubserver.Phase) {
				if !last && p.For == 0 && !m.d.failed() {
					m.d.fail(m.node, m.path, "every phase but the last needs a positive `for` (e.g. for: 5s)")
				}
			}),
		custom("respond", func(m *mapping, n ast.Node, path string, p *stubserver.Phase) {
			if n != nil {
				p.Respond = m.d.respond(n, path)
			}
		}, func(p *stubserver.Phase) any { return encodeRespond(p.Respond) }, nil),
		custom("retry_after", func(m *mapping, n ast.Node, path string, p *stubserver.Phase) {
			p.RetryAfter = m.d.retryAfter(n, path)
		}, func(p *stubserver.Phase) any { return retryAfterKeys.encode(&p.RetryAfter) },
			func(p *stubserver.Phase) bool { return p.RetryAfter == stubserver.RetryAfter{} }),
		field("latency", func(p *stubserver.Phase) *time.Duration { return &p.Latency }, duration(0, time.Hour), omitZero),
		field("capacity", func(p *stubserver.Phase) *float64 { return &p.Capacity }, shareKind, omitZero),
	}
}

// respond reads ok | quota | passthrough | {status: N} (with rate_limit:
// true, a rate limit) | {mix: {...}} | {fault: F}.
func (d *decoder) respond(n ast.Node, path string) stubserver.Respond {
	var r stubserver.Respond
	want := "want ok, quota, passthrough, {status: N}, {mix: {...}} or {fault: " + strings.Join(stubserver.FaultNames(), "|") + "}"
	if s, ok := scalarText(n); ok {
		switch s {
		case stubserver.RespondOK, stubserver.RespondQuota, stubserver.RespondPassthrough:
			r.Kind = s
		default:
			d.fail(n, path, "%s, got %q", want, s)
		}
		return r
	}
	m := d.mapping(n, path)
	// rate_limit: true goes with {status: N}; it is not a kind of answer.
	var kinds []string
	for _, f := range m.fields {
		if f.key != "rate_limit" {
			kinds = append(kinds, f.key)
		}
	}
	if len(kinds) != 1 {
		switch f := m.field("rate_limit"); {
		case len(kinds) == 0 && f != nil:
			d.fail(f.keyNode, join(path, f.key), "rate_limit marks a {status: N} answer as a rate limit: add status (e.g. {status: 403, rate_limit: true})")
		case !d.failed():
			d.fail(n, path, "%s", want)
		}
		m.pairs()
		return r
	}
	switch kinds[0] {
	case "status":
		r.Kind = stubserver.RespondStatus
		get(m, "status", integer(200, 599), &r.Status)
		get(m, "rate_limit", boolKind, &r.RateLimit)
	case "mix":
		r.Kind = stubserver.RespondMix
		mn, mpath := m.take("mix")
		r.Mix = d.mix(mn, mpath)
	case "fault":
		r.Kind = stubserver.RespondFault
		get(m, "fault", choice(stubserver.FaultNames()...), &r.Fault)
	default:
		m.take("status")
		m.take("mix")
		m.take("fault")
	}
	if f := m.field("rate_limit"); f != nil && !f.used {
		m.take("rate_limit")
		d.fail(f.keyNode, join(path, "rate_limit"), "rate_limit goes with {status: N} only")
	}
	m.done()
	return r
}

// encodeRespond writes r as respond reads it.
func encodeRespond(r stubserver.Respond) any {
	switch r.Kind {
	case stubserver.RespondStatus:
		o := object{{"status", r.Status}}
		if r.RateLimit {
			o = append(o, kv{"rate_limit", true})
		}
		return o
	case stubserver.RespondMix:
		var mix object
		for _, w := range r.Mix {
			k := w.Fault
			switch {
			case w.Passthrough:
				k = stubserver.RespondPassthrough
			case k == "":
				k = strconv.Itoa(w.Status)
			}
			mix = append(mix, kv{k, w.Weight})
		}
		return object{{"mix", mix}}
	case stubserver.RespondFault:
		return object{{"fault", r.Fault}}
	case "":
		return stubserver.RespondOK
	}
	return r.Kind
}

// mix reads {200: 90, 500: 5, reset: 2}: statuses or faults to weights.
func (d *decoder) mix(n ast.Node, path string) []stubserver.Weighted {
	if s, ok := d.resolve(n, path).(*ast.SequenceNode); ok {
		// A list of statuses, or of one-key mappings: one error, with the
		// shape that works.
		d.fail(s, path, "want a mapping of statuses or faults to weights, like {200: 90, 500: 10}, got a sequence")
		return nil
	}
	m := d.mapping(n, path)
	faults := stubserver.FaultNames()
	var out []stubserver.Weighted
	for _, f := range m.pairs() {
		p := join(path, f.key)
		w := stubserver.Weighted{}
		switch {
		case slices.Contains(faults, f.key):
			w.Fault = f.key
		case f.key == stubserver.RespondPassthrough:
			w.Passthrough = true
			d.places[p] = position(f.keyNode)
		default:
			st, err := strconv.Atoi(f.key)
			if err != nil || st < 200 || st > 599 {
				d.fail(f.keyNode, p, "want a status 200-599, a fault (%s) or passthrough, got %q", strings.Join(faults, ", "), f.key)
				continue
			}
			w.Status = st
		}
		v := d.resolve(f.value, p)
		if v == nil {
			d.fail(f.keyNode, p, "missing weight")
			continue
		}
		wt, ok := d.numberValue(v, p, 0, 1e9)
		if !ok {
			continue
		}
		if wt == 0 {
			d.fail(v, p, "weight must be positive")
			continue
		}
		w.Weight = wt
		out = append(out, w)
	}
	if len(out) == 0 && len(m.fields) == 0 && !m.notMapping {
		d.fail(n, path, "mix needs at least one status or fault")
	}
	return out
}

// retryAfterKeys is a phase's retry_after: {form, value, spread}.
var retryAfterKeys = keys[stubserver.RetryAfter]{
	field("form", func(ra *stubserver.RetryAfter) *string { return &ra.Form }, choice(stubserver.FormNames()...), omitZero),
	custom("value", (*mapping).retryAfterValue, func(ra *stubserver.RetryAfter) any {
		if ra.Value == stubserver.ValueFixed {
			return ra.Fixed.String()
		}
		return ra.Value
	}, func(ra *stubserver.RetryAfter) bool { return ra.Value == "" }),
	field("spread", func(ra *stubserver.RetryAfter) *time.Duration { return &ra.Spread }, duration(0, MaxDuration), omitZero),
}

// retryAfter reads {form, value, spread}; a bare string is the form.
func (d *decoder) retryAfter(n ast.Node, path string) stubserver.RetryAfter {
	var ra stubserver.RetryAfter
	if n == nil {
		return ra
	}
	if s, ok := scalarText(n); ok {
		if forms := stubserver.FormNames(); !slices.Contains(forms, s) {
			d.fail(n, path, "want one of %s, got %q", strings.Join(forms, ", "), s)
		}
		ra.Form = s
		return ra
	}
	retryAfterKeys.decode(d, n, path, &ra)
	return ra
}

// retryAfterValue reads a Retry-After value: seconds (2, 1.5), a
// duration, limiter or phase-end.
func (m *mapping) retryAfterValue(vn ast.Node, vpath string, ra *stubserver.RetryAfter) {
	d := m.d
	if vn == nil {
		return
	}
	if ra.Form == "" || ra.Form == stubserver.FormNone {
		d.fail(vn, vpath, "value given but form is none")
	}
	switch s, _ := scalarText(vn); {
	case s == stubserver.ValueLimiter || s == stubserver.ValuePhaseEnd:
		ra.Value = s
	default:
		ra.Value = stubserver.ValueFixed
		switch vn.(type) {
		case *ast.IntegerNode, *ast.FloatNode: // seconds (n*1e9 is exact for a whole n <= 1e9)
			if secs, ok := d.numberValue(vn, vpath, 0, 1e9); ok {
				ra.Fixed = time.Duration(secs * float64(time.Second))
			}
		case *ast.StringNode:
			if v, err := parseDuration(s); err != nil {
				d.fail(vn, vpath, "want seconds, a duration, limiter or phase-end, got %q", s)
			} else if ra.Fixed = v; v < 0 || v > MaxDuration {
				d.fail(vn, vpath, "duration %s is out of range [0s, %s]", v, MaxDuration)
			}
		default:
			d.fail(vn, vpath, "want seconds, a duration, limiter or phase-end, got %s", describe(vn))
		}
	}
}

// arrivalKind is a fleet's start: burst, ramp DURATION or poisson RATE.
var arrivalKind = parsed("burst, ramp DURATION or poisson RATE", parseArrival, func(a Arrival) any { return a.String() })

var fleetKeys = keys[Fleet]{
	field("clients", func(f *Fleet) *int { return &f.Clients }, integer(1, MaxClients), always),
	field("start", func(f *Fleet) *Arrival { return &f.Start }, arrivalKind, always),
	field("requests", func(f *Fleet) *int { return &f.Requests }, integer(1, MaxRequests), always),
	field("think", func(f *Fleet) *time.Duration { return &f.Think }, duration(0, MaxDuration), always),
	field("method", func(f *Fleet) *string { return &f.Method }, methodKind, always),
	field("timeout", func(f *Fleet) *time.Duration { return &f.Timeout }, duration(time.Nanosecond, MaxDuration), always),
	field("attempt_timeout", func(f *Fleet) *time.Duration { return &f.AttemptTimeout }, duration(0, MaxDuration), omitZero),
	field("processes", func(f *Fleet) *int { return &f.Processes }, integer(1, MaxClients), omitZero),
	custom("api_keys", (*mapping).apiKeys, func(f *Fleet) any { return encodeAll(f.APIKeys, keyGroupKeys(nil, "")) },
		func(f *Fleet) bool { return len(f.APIKeys) == 0 }),
}

// apiKeys reads fleet.api_keys: groups of {prefix, share}.
func (m *mapping) apiKeys(n ast.Node, path string, f *Fleet) {
	d := m.d
	items := d.sequence(n, path)
	if n != nil && len(items) == 0 {
		d.fail(n, path, "want at least one {prefix: P}, or leave api_keys out")
	}
	if len(items) > MaxKeyGroups {
		d.fail(n, path, "%d groups, at most %d", len(items), MaxKeyGroups)
		items = nil
	}
	var prefixes []string
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", path, i)
		g := KeyGroup{Share: 1}
		keyGroupKeys(prefixes, path).decode(d, item, p, &g)
		prefixes = append(prefixes, g.Prefix)
		f.APIKeys = append(f.APIKeys, g)
	}
}

// keyGroupKeys is a key group's table; a prefix must not begin, nor be
// begun by, one of prev, the prefixes of the groups before it in the
// sequence at seq.
func keyGroupKeys(prev []string, seq string) keys[KeyGroup] {
	prefix := kind[string]{
		read: func(d *decoder, n ast.Node, path string) (string, bool) {
			s, ok := scalarText(n)
			if !ok || !keyPrefixRE.MatchString(s) {
				d.fail(n, path, "want a key prefix of 1-64 letters, digits or -._~+/, got %s", quoteNode(n))
				return "", false
			}
			if j := slices.IndexFunc(prev, func(p string) bool { return p != "" && (strings.HasPrefix(s, p) || strings.HasPrefix(p, s)) }); j >= 0 {
				d.fail(n, path, "prefix %q and prefix %q of %s[%d] could make the same key; make neither begin the other", s, prev[j], seq, j)
				return "", false
			}
			return s, true
		},
	}
	return keys[KeyGroup]{
		field("prefix", func(g *KeyGroup) *string { return &g.Prefix }, prefix, always).needs("a key group needs a prefix (e.g. prefix: free-)"),
		field("share", func(g *KeyGroup) *int { return &g.Share }, integer(1, 1_000_000), always),
	}
}

// subjectKind is a subjects.Lookup name.
var subjectKind = kind[string]{
	read: func(d *decoder, n ast.Node, path string) (string, bool) {
		name, _ := scalarText(n)
		if _, optional := subjects.Optional(name); optional {
			return name, true // run checks that its package is linked
		}
		if _, err := subjects.Lookup(name); err != nil {
			d.fail(n, path, "unknown subject %s (known: %s, exec:COMMAND)", quoteNode(n), strings.Join(subjects.Names(), ", "))
			return "", false
		}
		return name, true
	},
}

var subjectKeys = keys[SubjectSpec]{
	field("name", func(s *SubjectSpec) *string { return &s.Name }, subjectKind, always),
	sub("policy", func(s *SubjectSpec) *subjects.Policy { return &s.Policy }, policyKeys, omitZero).
		then(func(m *mapping, path string, s *SubjectSpec) {
			if p := s.Policy; p.Base > 0 && p.Cap > 0 && p.Cap < p.Base && !m.d.failed() {
				m.d.failAt(m.d.places[path+".cap"], path+".cap", "cap %s is below base %s", p.Cap, p.Base)
			}
		}),
}

// perSecond is a rate read as N/interval and kept per second.
var perSecond = parsed("a rate like 100/s", func(s string) (float64, error) {
	count, per, err := parseRate(s)
	return count / per.Seconds(), err
}, func(r float64) any { return formatFloat(r) + "/s" })

var policyKeys = keys[subjects.Policy]{
	field("base", func(p *subjects.Policy) *time.Duration { return &p.Base }, duration(0, MaxDuration), omitZero),
	field("cap", func(p *subjects.Policy) *time.Duration { return &p.Cap }, duration(0, MaxDuration), omitZero),
	field("max_attempts", func(p *subjects.Policy) *int { return &p.MaxAttempts }, integer(0, 1_000_000), omitZero),
	field("budget", func(p *subjects.Policy) *time.Duration { return &p.Budget }, duration(0, MaxDuration), omitZero),
	field("jitter", func(p *subjects.Policy) *string { return &p.Jitter }, choice(JitterKinds...), omitZero),
	field("rate", func(p *subjects.Policy) *float64 { return &p.Rate }, perSecond, omitZero),
	field("burst", func(p *subjects.Policy) *int { return &p.Burst }, integer(0, 1_000_000_000), omitZero),
	field("timeout", func(p *subjects.Policy) *time.Duration { return &p.Timeout }, duration(0, MaxDuration), omitZero),
}

// expectKeys is the expect block, validated against the analyzer's check
// schema.
var expectKeys = keys[Expect]{
	checkList("checks", func(e *Expect) *[]string { return &e.Checks }),
	checkList("skip", func(e *Expect) *[]string { return &e.Skip }).then(func(m *mapping, path string, e *Expect) {
		for _, id := range e.Skip {
			if slices.Contains(e.Checks, id) {
				m.d.failAt(m.d.places[path], path, "check %q is both in checks and in skip", id)
			}
		}
	}),
	checkList("require", func(e *Expect) *[]string { return &e.Require }).then(func(m *mapping, path string, e *Expect) {
		for _, id := range e.Require {
			if slices.Contains(e.Skip, id) {
				m.d.failAt(m.d.places[path], path, "check %q is both required and skipped", id)
			}
		}
	}),
	custom("thresholds", (*mapping).thresholds, func(e *Expect) any { return e.Thresholds },
		func(e *Expect) bool { return len(e.Thresholds) == 0 }),
	field("allow_unexercised", func(e *Expect) *bool { return &e.AllowUnexercised }, boolKind, omitZero),
}

// checkList is a key whose value is a list of distinct check ids.
func checkList(name string, at func(*Expect) *[]string) key[Expect] {
	return custom(name, func(m *mapping, n ast.Node, path string, e *Expect) {
		*at(e) = m.d.stringList(n, path, analyzer.CheckIDs())
	}, func(e *Expect) any { return *at(e) }, func(e *Expect) bool { return len(*at(e)) == 0 })
}

// thresholds reads expect.thresholds: "ID" or "ID.PARAM" to a value of
// the parameter's kind.
func (m *mapping) thresholds(n ast.Node, path string, e *Expect) {
	d := m.d
	tm := d.mapping(n, path)
	for _, f := range tm.pairs() {
		p := join(path, f.key)
		c, param, err := analyzer.ThresholdKey(f.key)
		if errors.Is(err, analyzer.ErrUnknownCheck) {
			d.fail(f.keyNode, p, "unknown check %q (want one of %s, optionally .PARAM)", f.key, strings.Join(analyzer.CheckIDs(), ", "))
			continue
		}
		if err != nil {
			_, name, _ := strings.Cut(f.key, ".")
			d.fail(f.keyNode, p, "unknown parameter %q of check %s (want one of %s)", name, c.ID, strings.Join(c.ParamNames(), ", "))
			continue
		}
		v := d.resolve(f.value, p)
		if v == nil {
			d.fail(f.keyNode, p, "missing threshold")
			continue
		}
		if x, ok := d.thresholdValue(v, p, param.Kind); ok {
			if e.Thresholds == nil {
				e.Thresholds = map[string]float64{}
			}
			e.Thresholds[f.key] = x
		}
	}
}

// thresholdValue reads a value of expect.thresholds of a parameter of
// kind k with the analyzer's one parser (analyzer.ParseValue), so that a
// value means the same in a file and in a --check flag.
func (d *decoder) thresholdValue(n ast.Node, path string, k analyzer.ParamKind) (float64, bool) {
	text, ok := scalarText(n)
	if !ok {
		d.fail(n, path, "want a %s, got %s", k, describe(n))
		return 0, false
	}
	v, err := analyzer.ParseValue(k, text)
	if err != nil {
		d.fail(n, path, "%v", err)
		return 0, false
	}
	return v, true
}
