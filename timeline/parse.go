package timeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// parser decodes one NDJSON line. Attempt and outcome records, the bulk of
// every stream, are parsed by hand in one pass without reflection; the meta
// record, one per stream, goes through encoding/json. Keys it does not know
// are skipped, so records may grow new fields.
//
// The strings of one record that are not interned are slices of one copy of
// the line, and that copy is carved from a block shared with the lines
// around it (copyLine), so decoding allocates about once per block rather
// than once per line. Holding one of these strings keeps its block alive;
// callers that keep strings of many records (map keys) strings.Clone them.
// With a caller's Block (Decoder.DecodeIn) the copy goes there instead, and
// nothing is allocated per line.
type parser struct {
	b    []byte
	i    int
	strs map[string]string // interned short strings (methods, phases, results)

	line    string // copy of b, made on first use by str; "" until then
	lineSet bool
	// where the last rawString result lies in b; esc when it was decoded
	// from escapes (and so is not a slice of b)
	sStart, sEnd int
	esc          bool

	// arena holds copies of lines whose strings were handed out; it is
	// never written over, only replaced when full (see copyLine)
	arena []byte
	// block, when set (Decoder.DecodeIn), takes the copies instead of arena
	block *Block
	// inPlace: the strings point into the line itself, which its caller
	// keeps unchanged as long as the record's strings are used (the
	// borrowed chunks of DecodeBatches)
	inPlace bool

	// the interned values each field had last (strCached)
	last struct{ typ, method, phase, result, retryafter, fault, limit, upstream, backend, grpccode recent }
}

func (p *parser) record(line []byte, rec *Record) error {
	p.b, p.i = line, 0
	p.line, p.lineSet = "", false
	rec.Type = ""
	rec.Meta = nil
	rec.End = nil
	rec.Attempt = Attempt{}
	rec.Outcome = Outcome{}
	a, o := &rec.Attempt, &rec.Outcome
	var pending error // a value that did not fit before the type was known
	p.ws()
	if !p.eat('{') {
		return p.errf("want '{' to open a record")
	}
	p.ws()
	if p.eat('}') {
		return errors.New(`record has no "type"`)
	}
	for {
		p.ws()
		key, err := p.rawString()
		if err != nil {
			return err
		}
		p.ws()
		if !p.eat(':') {
			return p.errf("want ':' after key %q", key)
		}
		p.ws()
		vs := p.i
		switch string(key) {
		case "type":
			rec.Type, err = p.strCached(&p.last.typ)
		case "client":
			a.Client, err = p.str(false)
			o.Client = a.Client
		case "key":
			a.Key, err = p.str(false)
			o.Key = a.Key
		case "attempt":
			a.Attempt, err = p.int()
		case "method":
			a.Method, err = p.strCached(&p.last.method)
		case "path":
			a.Path, err = p.str(false)
		case "at":
			a.At, err = p.int64()
		case "done":
			a.Done, err = p.int64()
		case "status":
			a.Status, err = p.int()
			o.Status = a.Status
		case "fault":
			a.Fault, err = p.strCached(&p.last.fault)
		case "phase":
			a.Phase, err = p.strCached(&p.last.phase)
		case "retry_after":
			a.RetryAfter, err = p.strCached(&p.last.retryafter)
		case "not_before":
			a.NotBefore, err = p.int64()
			a.HasNotBefore = err == nil
		case "idem":
			a.Idempotent, err = p.bool()
		case "idem_key":
			a.IdemKey, err = p.str(false)
		case "backend":
			a.Backend, err = p.strCached(&p.last.backend)
		case "ratelimit":
			a.RateLimit, err = p.str(false)
		case "limit":
			a.Limit, err = p.strCached(&p.last.limit)
		case "queue":
			a.Queue, err = p.int64()
		case "service":
			a.Service, err = p.int64()
		case "upstream":
			a.Upstream, err = p.strCached(&p.last.upstream)
		case "waited":
			a.Waited, err = p.int64()
		case "grpc_code":
			a.GRPCCode, err = p.strCached(&p.last.grpccode)
		case "pushback":
			a.Pushback, err = p.str(false)
		case "retry_info":
			a.RetryInfo, err = p.str(false)
		case "grpc_previous_attempts":
			a.PreviousAttempts, err = p.int()
		case "wait_claim":
			a.WaitClaim, err = p.str(false)
		case "scheduled":
			o.Scheduled, err = p.int64()
		case "start":
			o.Start, err = p.int64()
		case "end":
			o.End, err = p.int64()
		case "result":
			o.Result, err = p.strCached(&p.last.result)
		case "attempts":
			o.Attempts, err = p.int()
		case "error":
			o.Error, err = p.str(false)
		case "harness":
			o.Harness, err = p.bool()
		default:
			err = p.skip()
		}
		if err != nil {
			err = fmt.Errorf("key %q: %w", key, err)
			if rec.Type != TypeMeta && rec.Type != TypeEnd && rec.Type != "" {
				return err
			}
			// Meta and end fields share names with ours but not their types
			// (meta's start is a date); their paths below re-read the line.
			p.i = vs
			if serr := p.skip(); serr != nil {
				return err
			}
			if pending == nil {
				pending = err
			}
		}
		p.ws()
		if p.eat(',') {
			continue
		}
		if p.eat('}') {
			break
		}
		if p.i >= len(p.b) {
			return errTruncated
		}
		return p.errf("want ',' or '}' after the value of %q", key)
	}
	p.ws()
	if p.i != len(p.b) {
		return p.errf("data after the record")
	}
	if pending != nil && rec.Type != TypeMeta && rec.Type != TypeEnd {
		return pending
	}
	switch rec.Type {
	case "":
		return errors.New(`record has no "type"`)
	case TypeMeta:
		rec.Attempt, rec.Outcome = Attempt{}, Outcome{}
		m := new(Meta)
		if err := json.Unmarshal(p.b, m); err != nil {
			return fmt.Errorf("meta: %w", err)
		}
		if m.Format > Format {
			return fmt.Errorf("meta: format %d is newer than this retrylab reads (%d)", m.Format, Format)
		}
		if m.Scheduled < 0 || m.Duration < 0 {
			return errors.New("meta: negative scheduled or duration")
		}
		rec.Meta = m
	case TypeEnd:
		rec.Attempt, rec.Outcome = Attempt{}, Outcome{}
		e := new(End)
		if err := json.Unmarshal(p.b, e); err != nil {
			return fmt.Errorf("end: %w", err)
		}
		if e.At < 0 || e.InFlight < 0 || e.Unstarted < 0 || e.DialErrors < 0 || e.FleetReady < 0 {
			return errors.New("end: negative time or count")
		}
		if e.Reason == "" {
			return errors.New(`end record needs a "reason"`)
		}
		if len(e.Errors) == 0 {
			e.Errors = nil // "errors":[] and none are the same record
		}
		rec.End = e
	case TypeAttempt:
		rec.Outcome = Outcome{}
		switch {
		case a.Attempt < 1:
			return errors.New(`attempt record needs "attempt" >= 1`)
		case a.At < 0:
			return fmt.Errorf("attempt arrives at %d ns, before the run's start", a.At)
		case a.Done < a.At:
			return fmt.Errorf("attempt answered (done %d ns) before it arrived (at %d ns)", a.Done, a.At)
		case a.Status < 0 || a.Status > 999:
			return fmt.Errorf("attempt status %d is not an HTTP status", a.Status)
		}
	case TypeOutcome:
		rec.Attempt = Attempt{}
		switch {
		case o.Result == "":
			return errors.New(`outcome record needs a "result"`)
		case o.Scheduled < 0 || o.Start < 0:
			return errors.New("outcome scheduled or started before the run's start")
		case o.End < o.Start:
			return fmt.Errorf("outcome ends (end %d ns) before it started (start %d ns)", o.End, o.Start)
		}
	default:
		return fmt.Errorf("unknown record type %q (this retrylab reads meta, attempt, outcome and end)", rec.Type)
	}
	return nil
}

func (p *parser) errf(format string, args ...any) error {
	if p.i >= len(p.b) {
		return errTruncated
	}
	return fmt.Errorf("column %d: %s", p.i+1, fmt.Sprintf(format, args...))
}

func (p *parser) ws() {
	if p.i < len(p.b) && p.b[p.i] > ' ' { // the usual case, inlined
		return
	}
	p.wsSlow()
}

func (p *parser) wsSlow() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// rawString returns the bytes of a string without escapes, or its decoded
// form when it has them (keys and values alike).
func (p *parser) rawString() ([]byte, error) {
	if !p.eat('"') {
		return nil, p.errf("want a string")
	}
	start := p.i
	high := false
	p.esc = true // until proven a plain slice of b
	// The loops work on locals (the compiler keeps them in registers),
	// written back to p.i before anything that reads it.
	b, i := p.b, p.i
	for i < len(b) {
		// Skip the plain bytes in a tight loop, then look at the one that
		// stopped it.
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			s := b[start:i]
			if high && !utf8.Valid(s) {
				// encoding/json turns invalid UTF-8 into U+FFFD; so do we.
				return p.escapedString(start - 1)
			}
			p.sStart, p.sEnd, p.esc = start, i, false
			p.i = i + 1
			return s, nil
		case c >= utf8.RuneSelf:
			high = true
		case c == '\\':
			return p.escapedString(start - 1)
		case c < 0x20:
			p.i = i
			return nil, p.errf("control character in string")
		}
		i++
	}
	p.i = i
	return nil, errTruncated
}

// plainByte marks the bytes a string may hold as they are: printable ASCII
// other than '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// escapedString decodes the string starting at the quote at start through
// encoding/json, which knows every escape.
func (p *parser) escapedString(start int) ([]byte, error) {
	p.i = start + 1
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case '\\':
			p.i += 2
			continue
		case '"':
			p.i++
			var s string
			if err := json.Unmarshal(p.b[start:p.i], &s); err != nil {
				return nil, fmt.Errorf("bad string: %w", err)
			}
			return []byte(s), nil
		}
		p.i++
	}
	return nil, errTruncated
}

// str reads a string value. Interned strings (a few distinct values repeated
// on every line) are shared rather than allocated each time.
func (p *parser) str(intern bool) (string, error) {
	return p.strIn(intern, nil)
}

// strCached is str(true) that first compares the value with the two this
// field had last (*last), which it usually repeats (one phase after
// another, attempts and outcomes alternating).
func (p *parser) strCached(last *recent) (string, error) {
	return p.strIn(true, last)
}

// recent is the two values a field had last, the latest first.
type recent [2]string

func (p *parser) strIn(intern bool, last *recent) (string, error) {
	b, err := p.rawString()
	if err != nil {
		return "", err
	}
	if !intern || len(b) > 32 {
		if p.esc {
			return string(b), nil
		}
		if !p.lineSet {
			p.line, p.lineSet = p.copyLine(), true
		}
		return p.line[p.sStart:p.sEnd], nil
	}
	if last != nil { // no allocation for the comparisons
		if last[0] == string(b) {
			return last[0], nil
		}
		if last[1] == string(b) {
			last[0], last[1] = last[1], last[0]
			return last[0], nil
		}
	}
	if s, ok := p.strs[string(b)]; ok { // no allocation for the lookup
		if last != nil {
			last[0], last[1] = s, last[0]
		}
		return s, nil
	}
	if p.strs == nil || len(p.strs) > 4096 {
		p.strs = make(map[string]string)
	}
	s := string(b)
	p.strs[s] = s
	if last != nil {
		last[0], last[1] = s, last[0]
	}
	return s, nil
}

// arenaSize is the size of the blocks lines are copied into. A string kept
// from a record keeps its block alive, so it is small enough that the
// handful a caller keeps uncloned (examples) cost little, and large enough
// that one allocation serves hundreds of lines.
const arenaSize = 32 << 10

// copyLine returns a copy of the current line as a string, carved from a
// shared block rather than allocated alone: one allocation per block
// instead of one per line.
func (p *parser) copyLine() string {
	n := len(p.b)
	if p.inPlace {
		return unsafe.String(&p.b[0], n)
	}
	if p.block != nil {
		return p.block.copy(p.b)
	}
	if n > arenaSize/4 {
		return string(p.b)
	}
	if cap(p.arena)-len(p.arena) < n {
		p.arena = make([]byte, 0, arenaSize)
	}
	start := len(p.arena)
	p.arena = append(p.arena, p.b...)
	return unsafe.String(&p.arena[start], n)
}

func (p *parser) int64() (int64, error) {
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	var n uint64
	b, i := p.b, p.i // locals in the loop, as in rawString
	for i < len(b) {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		if n > (1<<63-1)/10 {
			p.i = i
			return 0, p.errf("number out of range")
		}
		n = n*10 + uint64(d)
		i++
	}
	digits := i - p.i
	p.i = i
	if digits == 0 {
		if p.i >= len(p.b) {
			return 0, errTruncated
		}
		return 0, p.errf("want an integer")
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			// A float where an integer belongs: accept it only if it is whole.
			p.i = start
			return p.float()
		}
	}
	if n > 1<<63-1 {
		return 0, p.errf("number out of range")
	}
	if p.b[start] == '-' {
		return -int64(n), nil
	}
	return int64(n), nil
}

func (p *parser) float() (int64, error) {
	start := p.i
	for p.i < len(p.b) && (p.b[p.i] == '-' || p.b[p.i] == '+' || p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E' || (p.b[p.i] >= '0' && p.b[p.i] <= '9')) {
		p.i++
	}
	f, err := strconv.ParseFloat(string(p.b[start:p.i]), 64)
	if err != nil || f != float64(int64(f)) {
		return 0, fmt.Errorf("column %d: want an integer", start+1)
	}
	return int64(f), nil
}

func (p *parser) int() (int, error) {
	n, err := p.int64()
	if err != nil {
		return 0, err
	}
	if n < -1<<31 || n > 1<<31-1 {
		return 0, p.errf("number out of range")
	}
	return int(n), nil
}

func (p *parser) bool() (bool, error) {
	switch {
	case len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "true":
		p.i += 4
		return true, nil
	case len(p.b)-p.i >= 5 && string(p.b[p.i:p.i+5]) == "false":
		p.i += 5
		return false, nil
	}
	return false, p.errf("want true or false")
}

// skip passes over one JSON value of any kind, checking its syntax.
func (p *parser) skip() error {
	start := p.i
	depth := 0
	for {
		p.ws()
		if p.i >= len(p.b) {
			return errTruncated
		}
		switch c := p.b[p.i]; {
		case c == '{' || c == '[':
			depth++
			p.i++
			continue
		case c == '}' || c == ']':
			if depth == 0 {
				return p.errf("unexpected %q", c)
			}
			depth--
			p.i++
		case c == '"':
			if _, err := p.rawString(); err != nil {
				return err
			}
		case c == ',' || c == ':':
			if depth == 0 {
				return p.errf("unexpected %q", c)
			}
			p.i++
			continue
		default:
			s := p.i
			for p.i < len(p.b) && !isDelim(p.b[p.i]) {
				p.i++
			}
			tok := p.b[s:p.i]
			if !json.Valid(tok) {
				return fmt.Errorf("column %d: bad value %q", s+1, tok)
			}
		}
		if depth == 0 {
			if !json.Valid(p.b[start:p.i]) {
				return fmt.Errorf("column %d: bad value", start+1)
			}
			return nil
		}
	}
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ':', ' ', '\t', '\r', '\n', '"', '{', '[':
		return true
	}
	return false
}
