package scenarios

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
	"github.com/retrylab/retrylab/analyzer"
	"github.com/retrylab/retrylab/stubserver"
	"github.com/retrylab/retrylab/subjects"
)

// MaxFileSize is the largest scenario file Load and Parse accept.
const MaxFileSize = 1 << 20

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	methodRE = regexp.MustCompile(`^[A-Z]+$`)
	// keyPrefixRE: an API key prefix, in the characters of a Bearer token.
	keyPrefixRE = regexp.MustCompile(`^[A-Za-z0-9._~+/-]{1,64}$`)
)

// Load reads and parses the scenario file at path. Problems are reported as
// "path:line:col: key: message" (a *SyntaxError, or several joined).
func Load(path string) (*Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("scenarios: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("scenarios: reading %s: %w", path, err)
	}
	return Parse(path, data)
}

// Parse parses a scenario file's contents; file names it in errors. The
// returned Scenario has every default filled in (see the Default
// constants), its server section has passed stubserver.Config.Validate,
// and Source holds data.
//
// Parsing is strict: unknown keys, values of the wrong type, bad durations
// and rates, and impossible values (negative durations, a quota phase
// without a quota, ...) are errors naming file:line:col. Up to ten problems
// are reported, in file order.
//
// Defaults, for keys left out (an empty value means the same): name from
// the file name; duration 60s; server: no added latency, no rate-limit
// headers, no quota, one `ok` phase; a limit's algorithm token-bucket, key
// global, burst equal to its limit, a leaky bucket's mode meter, status
// 429; a phase's name phase-N, respond ok, no Retry-After; fleet: 10
// clients started in a burst, 1 request each, no think time, GET, a 30s
// watchdog, no API keys; a capacity's queue 0, dist fixed, discipline
// fifo, cancel_on_disconnect false, and a phase's capacity all the
// workers; subject retrylab with its own policy defaults;
// expect: the analyzer's default checks and thresholds. A quota is one
// limit's keys ({rate: 100/s, burst: 20}) or layered limits or tiers (see
// README.md). Durations are Go durations (250ms, 1m30s; a bare 0 is
// allowed); rates are N/interval (100/s, 100/1m, 5/100ms, 10000/1d; a bare
// number is per second); a Retry-After value is seconds (2, 1.5), a
// duration, limiter or phase-end; a phase's capacity is a share of the
// workers, 30% or 0.3.
// Anchors, aliases and merge keys (<<: *base, <<: [*a, *b]) work as in
// YAML: a mapping's own keys win over merged ones, earlier sources over
// later ones.
func Parse(file string, data []byte) (sc *Scenario, err error) {
	d, root, err := parseRoot(file, data)
	if err != nil {
		return nil, err
	}
	sc = &Scenario{Source: data, File: file}
	m := d.mapping(root, "")
	m.str("name", &sc.Name)
	m.str("description", &sc.Description)
	sc.Duration = DefaultDuration
	m.duration("duration", &sc.Duration, time.Nanosecond, MaxDuration)
	n, path := m.take("server")
	sc.Server = d.server(n, path)
	n, path = m.take("fleet")
	sc.Fleet = d.fleet(n, path)
	n, path = m.take("subject")
	sc.Subject = d.subject(n, path)
	n, path = m.take("expect")
	sc.Expect = d.expect(n, path)
	m.done()

	if sc.Name == "" {
		sc.Name = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(file), ".yaml"), ".yml")
	}
	if !nameRE.MatchString(sc.Name) {
		d.failAt(d.places["name"], "name", "%q is not a usable name (letters, digits, '.', '_', '-')", sc.Name)
	}
	if !d.failed() {
		d.validateServer(sc.Server)
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	return sc, nil
}

// ParseServer parses only the server section of a scenario file (what
// `retrylab serve` needs); the other top-level keys must be known but are
// not read. The Config has passed Validate.
func ParseServer(file string, data []byte) (stubserver.Config, error) {
	d, root, err := parseRoot(file, data)
	if err != nil {
		return stubserver.Config{}, err
	}
	m := d.mapping(root, "")
	for _, k := range []string{"name", "description", "duration", "fleet", "subject", "expect"} {
		m.take(k)
	}
	n, path := m.take("server")
	cfg := d.server(n, path)
	m.done()
	if !d.failed() {
		d.validateServer(cfg)
	}
	if err := d.err(); err != nil {
		return stubserver.Config{}, err
	}
	return cfg, nil
}

// parseRoot parses YAML into its one document's body.
func parseRoot(file string, data []byte) (d *decoder, root ast.Node, err error) {
	if len(data) > MaxFileSize {
		return nil, nil, &SyntaxError{File: file, Msg: fmt.Sprintf("file is larger than %d bytes", MaxFileSize)}
	}
	if !utf8.Valid(data) {
		return nil, nil, &SyntaxError{File: file, Msg: "file is not valid UTF-8"}
	}
	defer func() {
		// The YAML parser is third-party code fed outside input: a panic
		// in it is a bad file, not a crash.
		if r := recover(); r != nil {
			d, root, err = nil, nil, &SyntaxError{File: file, Msg: fmt.Sprintf("yaml: cannot parse: %v", r)}
		}
	}()
	f, perr := parser.ParseBytes(data, 0)
	if perr != nil {
		e := &SyntaxError{File: file, Msg: perr.Error()}
		var ye yaml.Error
		if errors.As(perr, &ye) {
			e.Msg = ye.GetMessage()
			if t := ye.GetToken(); t != nil && t.Position != nil {
				e.Line, e.Col = t.Position.Line, t.Position.Column
			}
		}
		return nil, nil, e
	}
	d = newDecoder(file)
	var docs []*ast.DocumentNode
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			docs = append(docs, doc)
		}
	}
	switch {
	case len(docs) == 0:
		return nil, nil, &SyntaxError{File: file, Msg: "empty scenario"}
	case len(docs) > 1:
		p := position(docs[1].Body)
		e := &SyntaxError{File: file, Msg: "a scenario file holds one YAML document"}
		if p != nil {
			e.Line, e.Col = p.Line, p.Column
		}
		return nil, nil, e
	}
	root = docs[0].Body
	d.collectAnchors(root)
	return d, root, nil
}

func (d *decoder) server(n ast.Node, path string) stubserver.Config {
	var cfg stubserver.Config
	m := d.mapping(n, path)
	m.duration("latency", &cfg.Latency, 0, time.Hour)
	m.oneOf("headers", &cfg.Headers, stubserver.HeadersIETF, stubserver.HeadersXRateLimit, stubserver.HeadersNone)
	m.str("upstream", &cfg.Upstream) // checked by validateServer
	if qn, qpath := m.take("quota"); qn != nil {
		cfg.Quota = d.quota(qn, qpath)
	}
	if kn, kpath := m.take("capacity"); kn != nil {
		cfg.Capacity = d.capacity(kn, kpath)
	}
	pn, ppath := m.take("phases")
	items := d.sequence(pn, ppath)
	if len(items) > MaxPhases {
		d.fail(pn, ppath, "%d phases, at most %d", len(items), MaxPhases)
		items = nil
	}
	names := map[string]bool{}
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", ppath, i)
		d.places[p] = position(item)
		ph := d.phase(d.resolve(item, p), p, i == len(items)-1)
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
	m.done()
	return cfg
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

// capacity reads server.capacity: {concurrency, queue, service, dist,
// discipline, cancel_on_disconnect}, filling the defaults the stub would
// apply (no queue, fixed service times, fifo). Concurrency and service are
// required: a capacity without them models nothing.
func (d *decoder) capacity(n ast.Node, path string) *stubserver.Capacity {
	k := &stubserver.Capacity{Dist: stubserver.DistFixed, Discipline: stubserver.DisciplineFIFO}
	m := d.mapping(n, path)
	if !m.has("concurrency") {
		d.fail(n, path, "capacity needs concurrency: N (the workers serving at once)")
	}
	m.integer("concurrency", &k.Concurrency, 1, stubserver.MaxConcurrency)
	m.integer("queue", &k.Queue, 0, stubserver.MaxQueue)
	if !m.has("service") {
		d.fail(n, path, "capacity needs service: DURATION (the mean service time, e.g. 20ms)")
	}
	m.duration("service", &k.Service, time.Nanosecond, MaxDuration)
	m.oneOf("dist", &k.Dist, stubserver.DistFixed, stubserver.DistExponential, stubserver.DistUniform)
	m.oneOf("discipline", &k.Discipline, stubserver.DisciplineFIFO, stubserver.DisciplineLIFO)
	m.boolean("cancel_on_disconnect", &k.CancelOnDisconnect)
	m.done()
	return k
}

// share reads a phase's share of the capacity: 30% or 0.3, in (0, 1].
func (d *decoder) share(n ast.Node, path string) float64 {
	const want = "want a share of the workers like 30% or 0.3, in (0, 1]"
	s, ok := scalarText(n)
	if _, isBool := n.(*ast.BoolNode); !ok || isBool {
		d.fail(n, path, "%s, got %s", want, describe(n))
		return 0
	}
	v, err := parseShare(s)
	if err != nil {
		d.fail(n, path, "%s: %v", want, err)
		return 0
	}
	return v
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

// limitKeys are the keys of one limit. The short form of a quota,
// quota: {rate: 100/s, ...}, is one limit's keys in the quota itself.
var limitKeys = []string{"name", "algorithm", "rate", "burst", "key", "mode", "max_delay", "status"}

// quota reads server.quota: the short form (one limit's keys, see
// limitKeys) or layered limits, tiers, and in either form costs, backend
// and on_error. The stub's Validate judges the combinations (limits with
// tiers, mode without leaky-bucket, two default tiers, a cost no limit can
// hold, ...); validateServer places its errors.
func (d *decoder) quota(n ast.Node, path string) *stubserver.Quota {
	q := &stubserver.Quota{}
	m := d.mapping(n, path)
	if m.has("limits") || m.has("tiers") {
		for _, k := range limitKeys {
			if m.has(k) {
				f := m.field(k)
				m.take(k)
				d.fail(f.keyNode, join(path, k), "%s belongs to a limit: with limits or tiers, write it in each limit", k)
			}
		}
	} else {
		written := slices.ContainsFunc(limitKeys, m.has)
		l, hasRate := d.limit(m)
		switch {
		case hasRate:
			q.Limits = []stubserver.Limit{l}
			d.singleQuota = true
		case written:
			d.fail(n, path, "quota needs a rate (e.g. rate: 100/s)")
		default:
			d.fail(n, path, "quota needs a rate (e.g. rate: 100/s), limits or tiers")
		}
	}
	ln, lpath := m.take("limits")
	q.Limits = append(q.Limits, d.limits(ln, lpath)...)
	tn, tpath := m.take("tiers")
	for i, item := range d.sequence(tn, tpath) {
		p := fmt.Sprintf("%s[%d]", tpath, i)
		d.places[p] = position(item)
		q.Tiers = append(q.Tiers, d.tier(item, p))
	}
	cn, cpath := m.take("costs")
	for i, item := range d.sequence(cn, cpath) {
		p := fmt.Sprintf("%s[%d]", cpath, i)
		d.places[p] = position(item)
		q.Costs = append(q.Costs, d.cost(item, p))
	}
	m.str("backend", &q.Backend)
	m.oneOf("on_error", &q.OnError, stubserver.OnErrorClosed, stubserver.OnErrorOpen)
	m.done()
	return q
}

// limit reads one limit's keys (limitKeys) from m, filling the defaults
// the stub would apply (algorithm token-bucket, key global, a leaky
// bucket's mode meter); hasRate is whether m holds a rate.
func (d *decoder) limit(m *mapping) (l stubserver.Limit, hasRate bool) {
	l = stubserver.Limit{Algorithm: stubserver.AlgTokenBucket, Key: stubserver.KeyGlobal}
	m.str("name", &l.Name)
	m.oneOf("algorithm", &l.Algorithm, stubserver.AlgTokenBucket, stubserver.AlgFixedWindow, stubserver.AlgSlidingWindow,
		stubserver.AlgSlidingWindowLog, stubserver.AlgLeakyBucket)
	if rn, rpath := m.take("rate"); rn != nil {
		hasRate = true
		l.Limit, l.Per = d.rateValue(rn, rpath)
	}
	m.integer("burst", &l.Burst, 0, 1_000_000_000)
	m.oneOf("key", &l.Key, stubserver.KeyGlobal, stubserver.KeyClient, stubserver.KeyAPIKey, stubserver.KeyEndpoint)
	m.oneOf("mode", &l.Mode, stubserver.ModeMeter, stubserver.ModeShape)
	if l.Mode == "" && l.Algorithm == stubserver.AlgLeakyBucket {
		l.Mode = stubserver.ModeMeter
	}
	m.duration("max_delay", &l.MaxDelay, 0, MaxDuration)
	m.integer("status", &l.Status, 100, 599)
	return l, hasRate
}

// limits reads a sequence of limits (quota.limits, a tier's limits).
func (d *decoder) limits(n ast.Node, path string) []stubserver.Limit {
	var out []stubserver.Limit
	for i, item := range d.sequence(n, path) {
		p := fmt.Sprintf("%s[%d]", path, i)
		d.places[p] = position(item)
		m := d.mapping(item, p)
		l, hasRate := d.limit(m)
		if !hasRate {
			d.fail(item, p, "a limit needs a rate (e.g. rate: 100/s)")
		}
		m.done()
		out = append(out, l)
	}
	return out
}

// tier reads one of quota.tiers: {name, keys, limits, default, anonymous}.
func (d *decoder) tier(n ast.Node, path string) stubserver.Tier {
	var t stubserver.Tier
	m := d.mapping(n, path)
	m.str("name", &t.Name)
	kn, kpath := m.take("keys")
	for i, item := range d.sequence(kn, kpath) {
		p := fmt.Sprintf("%s[%d]", kpath, i)
		d.places[p] = position(item)
		if s, ok := scalarText(d.resolve(item, p)); ok {
			t.Keys = append(t.Keys, s)
		} else {
			d.fail(item, p, "want an API key or a prefix ending in *, got %s", describe(d.resolve(item, p)))
		}
	}
	ln, lpath := m.take("limits")
	t.Limits = d.limits(ln, lpath)
	m.boolean("default", &t.Default)
	m.boolean("anonymous", &t.Anonymous)
	m.done()
	return t
}

// cost reads one of quota.costs: {method, path, cost}.
func (d *decoder) cost(n ast.Node, path string) stubserver.Cost {
	var c stubserver.Cost
	m := d.mapping(n, path)
	if mn, mpath := m.take("method"); mn != nil {
		c.Method, _ = d.method(mn, mpath)
	}
	if pn, ppath := m.take("path"); pn != nil {
		if s, ok := scalarText(pn); !ok || !strings.HasPrefix(s, "/") {
			d.fail(pn, ppath, "want a path pattern below /c/{client}/r/{n}, starting with / (e.g. /search, /items/*), got %s", quoteNode(pn))
		} else {
			c.Path = s
		}
	}
	if un, upath := m.take("cost"); un == nil {
		d.fail(n, path, "a cost needs cost: N (the units each matching request spends)")
	} else if v, ok := d.intValue(un, upath, 1, 1_000_000_000); ok {
		c.Cost = v
	}
	m.done()
	return c
}

// method reads an upper-case HTTP method.
func (d *decoder) method(n ast.Node, path string) (string, bool) {
	s, _ := scalarText(n)
	if !methodRE.MatchString(s) {
		d.fail(n, path, "want an upper-case HTTP method like GET or POST, got %s", quoteNode(n))
		return "", false
	}
	return s, true
}

// rateValue reads "100/s" (or a bare number: per second).
func (d *decoder) rateValue(n ast.Node, path string) (float64, time.Duration) {
	s, ok := scalarText(n)
	if !ok {
		d.fail(n, path, "want a rate like 100/s, got %s", describe(n))
		return 0, 0
	}
	count, per, err := parseRate(s)
	if err != nil {
		d.fail(n, path, "%v", err)
		return 0, 0
	}
	return count, per
}

func (d *decoder) phase(n ast.Node, path string, last bool) stubserver.Phase {
	var ph stubserver.Phase
	m := d.mapping(n, path)
	m.str("name", &ph.Name)
	m.duration("for", &ph.For, 0, MaxDuration)
	if !last && ph.For == 0 && !d.failed() {
		d.fail(n, path, "every phase but the last needs a positive `for` (e.g. for: 5s)")
	}
	rn, rpath := m.take("respond")
	ph.Respond = d.respond(rn, rpath)
	if rn == nil {
		ph.Respond.Kind = stubserver.RespondOK
	}
	an, apath := m.take("retry_after")
	ph.RetryAfter = d.retryAfter(an, apath)
	m.duration("latency", &ph.Latency, 0, time.Hour)
	if cn, cpath := m.take("capacity"); cn != nil {
		ph.Capacity = d.share(cn, cpath)
	}
	m.done()
	return ph
}

// respond reads ok | quota | passthrough | {status: N} (with rate_limit:
// true, a rate limit) | {mix: {...}} | {fault: F}.
func (d *decoder) respond(n ast.Node, path string) stubserver.Respond {
	var r stubserver.Respond
	if n == nil {
		return r
	}
	const want = "want ok, quota, passthrough, {status: N}, {mix: {...}} or {fault: reset|hang}"
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
		m.integer("status", &r.Status, 200, 599)
		m.boolean("rate_limit", &r.RateLimit)
	case "mix":
		r.Kind = stubserver.RespondMix
		mn, mpath := m.take("mix")
		r.Mix = d.mix(mn, mpath)
	case "fault":
		r.Kind = stubserver.RespondFault
		m.oneOf("fault", &r.Fault, stubserver.FaultReset, stubserver.FaultHang)
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

// mix reads {200: 90, 500: 5, reset: 2}: statuses or faults to weights.
func (d *decoder) mix(n ast.Node, path string) []stubserver.Weighted {
	m := d.mapping(n, path)
	var out []stubserver.Weighted
	for _, f := range m.pairs() {
		p := join(path, f.key)
		w := stubserver.Weighted{}
		switch f.key {
		case stubserver.FaultReset, stubserver.FaultHang:
			w.Fault = f.key
		case stubserver.RespondPassthrough:
			w.Passthrough = true
			d.places[p] = position(f.keyNode)
		default:
			st, err := strconv.Atoi(f.key)
			if err != nil || st < 200 || st > 599 {
				d.fail(f.keyNode, p, "want a status 200-599, a fault (reset, hang) or passthrough, got %q", f.key)
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
	if len(out) == 0 && len(m.fields) == 0 {
		d.fail(n, path, "mix needs at least one status or fault")
	}
	return out
}

// retryAfter reads {form, value, spread}; a bare string is the form.
func (d *decoder) retryAfter(n ast.Node, path string) stubserver.RetryAfter {
	var ra stubserver.RetryAfter
	if n == nil {
		return ra
	}
	forms := []string{stubserver.FormNone, stubserver.FormDelta, stubserver.FormDate, stubserver.FormNegative,
		stubserver.FormGarbage, stubserver.FormPastDate, stubserver.FormFractional, stubserver.FormHuge}
	if s, ok := scalarText(n); ok {
		if !slices.Contains(forms, s) {
			d.fail(n, path, "want one of %s, got %q", strings.Join(forms, ", "), s)
		}
		ra.Form = s
		return ra
	}
	m := d.mapping(n, path)
	m.oneOf("form", &ra.Form, forms...)
	if vn, vpath := m.take("value"); vn != nil {
		if ra.Form == "" || ra.Form == stubserver.FormNone {
			d.fail(vn, vpath, "value given but form is none")
		}
		switch s, _ := scalarText(vn); {
		case s == stubserver.ValueLimiter || s == stubserver.ValuePhaseEnd:
			ra.Value = s
		default:
			ra.Value = stubserver.ValueFixed
			if _, isNum := vn.(*ast.IntegerNode); isNum {
				if secs, ok := d.numberValue(vn, vpath, 0, 1e9); ok {
					ra.Fixed = time.Duration(secs) * time.Second
				}
			} else if _, isFloat := vn.(*ast.FloatNode); isFloat {
				if secs, ok := d.numberValue(vn, vpath, 0, 1e9); ok {
					ra.Fixed = time.Duration(secs * float64(time.Second))
				}
			} else if _, isStr := vn.(*ast.StringNode); isStr {
				if v, err := parseDuration(s); err == nil {
					if v < 0 || v > MaxDuration {
						d.fail(vn, vpath, "duration %s is out of range [0s, %s]", v, MaxDuration)
					}
					ra.Fixed = v
				} else {
					d.fail(vn, vpath, "want seconds, a duration, limiter or phase-end, got %q", s)
				}
			} else {
				d.fail(vn, vpath, "want seconds, a duration, limiter or phase-end, got %s", describe(vn))
			}
		}
	}
	m.duration("spread", &ra.Spread, 0, MaxDuration)
	m.done()
	return ra
}

func (d *decoder) fleet(n ast.Node, path string) Fleet {
	f := Fleet{
		Clients:  DefaultClients,
		Start:    Arrival{Kind: ArrivalBurst},
		Requests: DefaultRequests,
		Method:   DefaultMethod,
		Timeout:  DefaultTimeout,
	}
	m := d.mapping(n, path)
	m.integer("clients", &f.Clients, 1, MaxClients)
	if sn, spath := m.take("start"); sn != nil {
		if s, ok := scalarText(sn); !ok {
			d.fail(sn, spath, "want burst, ramp DURATION or poisson RATE, got %s", describe(sn))
		} else if a, err := parseArrival(s); err != nil {
			d.fail(sn, spath, "%v", err)
		} else {
			f.Start = a
		}
	}
	m.integer("requests", &f.Requests, 1, MaxRequests)
	m.duration("think", &f.Think, 0, MaxDuration)
	if mn, mpath := m.take("method"); mn != nil {
		if s, ok := d.method(mn, mpath); ok {
			f.Method = s
		}
	}
	m.duration("timeout", &f.Timeout, time.Nanosecond, MaxDuration)
	m.duration("attempt_timeout", &f.AttemptTimeout, 0, MaxDuration)
	kn, kpath := m.take("api_keys")
	items := d.sequence(kn, kpath)
	if kn != nil && len(items) == 0 {
		d.fail(kn, kpath, "want at least one {prefix: P}, or leave api_keys out")
	}
	if len(items) > MaxKeyGroups {
		d.fail(kn, kpath, "%d groups, at most %d", len(items), MaxKeyGroups)
		items = nil
	}
	var prefixes []string
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", kpath, i)
		g := KeyGroup{Share: 1}
		km := d.mapping(item, p)
		if pn, ppath := km.take("prefix"); pn == nil {
			d.fail(item, p, "a key group needs a prefix (e.g. prefix: free-)")
		} else if s, ok := scalarText(pn); !ok || !keyPrefixRE.MatchString(s) {
			d.fail(pn, ppath, "want a key prefix of 1-64 letters, digits or -._~+/, got %s", quoteNode(pn))
		} else if j := slices.IndexFunc(prefixes, func(p string) bool { return p != "" && (strings.HasPrefix(s, p) || strings.HasPrefix(p, s)) }); j >= 0 {
			d.fail(pn, ppath, "prefix %q and prefix %q of %s[%d] could make the same key; make neither begin the other", s, prefixes[j], kpath, j)
		} else {
			g.Prefix = s
		}
		prefixes = append(prefixes, g.Prefix)
		km.integer("share", &g.Share, 1, 1_000_000)
		km.done()
		f.APIKeys = append(f.APIKeys, g)
	}
	m.done()
	return f
}

func (d *decoder) subject(n ast.Node, path string) SubjectSpec {
	s := SubjectSpec{Name: DefaultSubject}
	m := d.mapping(n, path)
	if nn, npath := m.take("name"); nn != nil {
		name, _ := scalarText(nn)
		if _, err := subjects.Lookup(name); err != nil {
			d.fail(nn, npath, "unknown subject %s (known: %s, exec:COMMAND)", quoteNode(nn), strings.Join(subjects.Names(), ", "))
		} else {
			s.Name = name
		}
	}
	pn, ppath := m.take("policy")
	pm := d.mapping(pn, ppath)
	p := &s.Policy
	pm.duration("base", &p.Base, 0, MaxDuration)
	pm.duration("cap", &p.Cap, 0, MaxDuration)
	pm.integer("max_attempts", &p.MaxAttempts, 0, 1_000_000)
	pm.duration("budget", &p.Budget, 0, MaxDuration)
	pm.oneOf("jitter", &p.Jitter, JitterKinds...)
	if rn, rpath := pm.take("rate"); rn != nil {
		if count, per := d.rateValue(rn, rpath); per > 0 {
			p.Rate = count / per.Seconds()
		}
	}
	pm.integer("burst", &p.Burst, 0, 1_000_000_000)
	pm.duration("timeout", &p.Timeout, 0, MaxDuration)
	pm.done()
	if p.Base > 0 && p.Cap > 0 && p.Cap < p.Base && !d.failed() {
		d.failAt(d.places[ppath+".cap"], ppath+".cap", "cap %s is below base %s", p.Cap, p.Base)
	}
	m.done()
	return s
}

// expect reads the expect block, validated against the analyzer's check
// schema.
func (d *decoder) expect(n ast.Node, path string) Expect {
	var e Expect
	ids := analyzer.CheckIDs()
	m := d.mapping(n, path)
	e.Checks = m.stringList("checks", ids)
	e.Skip = m.stringList("skip", ids)
	for _, id := range e.Skip {
		if slices.Contains(e.Checks, id) {
			d.failAt(d.places[join(path, "skip")], join(path, "skip"), "check %q is both in checks and in skip", id)
		}
	}
	e.Require = m.stringList("require", ids)
	for _, id := range e.Require {
		if slices.Contains(e.Skip, id) {
			d.failAt(d.places[join(path, "require")], join(path, "require"), "check %q is both required and skipped", id)
		}
	}
	m.boolean("allow_unexercised", &e.AllowUnexercised)
	tn, tpath := m.take("thresholds")
	tm := d.mapping(tn, tpath)
	for _, f := range tm.pairs() {
		p := join(tpath, f.key)
		c, param, err := analyzer.ThresholdKey(f.key)
		if errors.Is(err, analyzer.ErrUnknownCheck) {
			d.fail(f.keyNode, p, "unknown check %q (want one of %s, optionally .PARAM)", f.key, strings.Join(ids, ", "))
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
	m.done()
	return e
}

// thresholdValue reads a value of expect.thresholds of a parameter of
// kind k: a number; for a duration, seconds or a Go duration ("250ms");
// for a status set, one HTTP status.
func (d *decoder) thresholdValue(n ast.Node, path string, k analyzer.ParamKind) (float64, bool) {
	switch k {
	case analyzer.KindDuration:
		switch n.(type) {
		case *ast.IntegerNode, *ast.FloatNode:
			return d.numberValue(n, path, 0, MaxDuration.Seconds())
		}
		v, ok := d.durationValue(n, path, 0, MaxDuration)
		return v.Seconds(), ok
	case analyzer.KindStatuses:
		if _, ok := n.(*ast.IntegerNode); !ok {
			d.fail(n, path, "want one HTTP status like 404, got %s", quoteNode(n))
			return 0, false
		}
		return d.numberValue(n, path, 100, 599)
	}
	return d.numberValue(n, path, 0, 1e12)
}

// validateServer runs the stub's own validation and places each of its
// field errors (`phases[1].retry_after.form: ...`) on the node the field
// names, or on the nearest enclosing node that is in the file.
func (d *decoder) validateServer(cfg stubserver.Config) {
	err := cfg.Validate()
	if err == nil {
		return
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var fe *stubserver.FieldError
		if !errors.As(e, &fe) {
			d.failAt(d.places["server"], "server", "%v", e)
			continue
		}
		field := fe.Field
		if d.singleQuota {
			// quota: {rate: ...} is the one limit's own mapping.
			field = strings.Replace(field, "quota.limits[0].", "quota.", 1)
		}
		path := "server." + field
		place := path
		for d.places[place] == nil && place != "server" {
			if i := strings.LastIndexAny(place, ".["); i > 0 {
				place = place[:i]
			} else {
				place = "server"
			}
		}
		d.failAt(d.places[place], path, "%s", fe.Msg)
	}
}
