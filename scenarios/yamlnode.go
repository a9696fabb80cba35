package scenarios

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// SyntaxError is a problem in a scenario file, with its place: bad YAML, an
// unknown key, a value of the wrong type or an impossible value. Error
// returns "file:line:col: path: message".
type SyntaxError struct {
	File string
	Line int // 1-based; 0 when the problem has no single place
	Col  int // 1-based; 0 when unknown
	// Path is the offending key, e.g. "server.phases[1].for"; "" for
	// problems in the YAML itself.
	Path string
	Msg  string
}

func (e *SyntaxError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// maxErrors caps how many problems one Parse reports.
const maxErrors = 10

// decoder walks a YAML AST by hand, so that every problem — syntax or
// meaning — carries the line and column of its node. It records problems
// and goes on; helpers return zero values after a problem, never panic.
// goccy/go-yaml's own strict decoding stops at the first problem and
// misses most of TestParseErrors (docs/design/scenario-decoder.md).
type decoder struct {
	file    string
	anchors map[string]ast.Node
	errs    []*SyntaxError
	// places maps every key path read ("server.phases[0].for") to the
	// node's position, to place errors reported later by a path alone.
	places map[string]*token.Position
	merges int // merge keys expanded, to stop self-merging anchors
	// singleQuota: server.quota was one limit's mapping ({rate: ...}).
	singleQuota bool
}

func newDecoder(file string) *decoder {
	return &decoder{file: file, anchors: map[string]ast.Node{}, places: map[string]*token.Position{}}
}

// err returns the problems found, sorted by place, as one error (nil when
// none): a *SyntaxError when there is one, else their errors.Join.
func (d *decoder) err() error {
	if len(d.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(d.errs, func(a, b *SyntaxError) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	if len(d.errs) == 1 {
		return d.errs[0]
	}
	errs := make([]error, 0, len(d.errs))
	for _, e := range d.errs {
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

func (d *decoder) failed() bool { return len(d.errs) > 0 }

func (d *decoder) failAt(p *token.Position, path, format string, args ...any) {
	if len(d.errs) >= maxErrors {
		return
	}
	e := &SyntaxError{File: d.file, Path: path, Msg: fmt.Sprintf(format, args...)}
	if p != nil {
		e.Line, e.Col = p.Line, p.Column
	}
	d.errs = append(d.errs, e)
}

func (d *decoder) fail(n ast.Node, path, format string, args ...any) {
	d.failAt(position(n), path, format, args...)
}

// position is where a node starts: a block mapping's first key, else the
// node's own token.
func position(n ast.Node) *token.Position {
	if n == nil {
		return nil
	}
	if m, ok := n.(*ast.MappingNode); ok && !m.IsFlowStyle && len(m.Values) > 0 {
		n = m.Values[0].Key
	}
	if t := n.GetToken(); t != nil {
		return t.Position
	}
	return nil
}

// collectAnchors records every anchor's node so aliases can be resolved.
func (d *decoder) collectAnchors(root ast.Node) {
	for _, n := range ast.Filter(ast.AnchorType, root) {
		if a := n.(*ast.AnchorNode); a.Name != nil {
			d.anchors[a.Name.GetToken().Value] = a.Value
		}
	}
}

// resolve looks through anchors, aliases and tags to the value node. A
// null node resolves to nil: an empty key means the same as a missing one.
func (d *decoder) resolve(n ast.Node, path string) ast.Node {
	for range 16 {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		case *ast.AliasNode:
			name := ""
			if v.Value != nil {
				name = v.Value.GetToken().Value
			}
			target, ok := d.anchors[name]
			if !ok {
				d.fail(v, path, "unknown alias %q", name)
				return nil
			}
			n = target
		case *ast.NullNode:
			return nil
		default:
			return n
		}
	}
	d.fail(n, path, "aliases nested too deep")
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapping is a YAML mapping being read key by key; done reports the keys
// nobody asked for.
type mapping struct {
	d      *decoder
	path   string
	node   ast.Node
	fields []*entry
	known  []string
	// notMapping: the node was something else, already reported; the
	// keys it lacks are that one problem, not more (see keys.read).
	notMapping bool
}

type entry struct {
	key     string
	keyNode ast.Node
	value   ast.Node
	used    bool
}

// mapping reads n as a mapping; nil (absent or null) is an empty one.
func (d *decoder) mapping(n ast.Node, path string) *mapping {
	m := &mapping{d: d, path: path, node: n}
	n = d.resolve(n, path)
	if n == nil {
		return m
	}
	var values []*ast.MappingValueNode
	switch v := n.(type) {
	case *ast.MappingNode:
		values = v.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{v}
	default:
		d.fail(n, path, "want a mapping, got %s", describe(n))
		m.notMapping = true
		return m
	}
	seen := map[string]bool{}
	var merged []*entry
	for _, mv := range values {
		if _, ok := mv.Key.(*ast.MergeKeyNode); ok {
			merged = append(merged, d.merge(mv.Value, path)...)
			continue
		}
		k := d.resolve(mv.Key, path)
		text, ok := scalarText(k)
		if !ok {
			d.fail(mv.Key, path, "want a plain key, got %s", describe(k))
			continue
		}
		if seen[text] {
			d.fail(mv.Key, join(path, text), "duplicate key %q", text)
			continue
		}
		seen[text] = true
		m.fields = append(m.fields, &entry{key: text, keyNode: mv.Key, value: mv.Value})
	}
	// A merge key (<<: *base or <<: [*a, *b]) adds the keys the mapping
	// does not set itself; earlier sources win over later ones.
	for _, f := range merged {
		if !seen[f.key] {
			seen[f.key] = true
			m.fields = append(m.fields, f)
		}
	}
	return m
}

// merge returns the fields a merge key's value brings: a mapping's, or
// those of a sequence of mappings in order.
func (d *decoder) merge(n ast.Node, path string) []*entry {
	if d.merges++; d.merges > 1000 {
		d.fail(n, path, "merge keys nested too deep")
		return nil
	}
	n = d.resolve(n, path)
	if s, ok := n.(*ast.SequenceNode); ok {
		var out []*entry
		for _, item := range s.Values {
			out = append(out, d.merge(item, path)...)
		}
		return out
	}
	if n == nil {
		return nil
	}
	return d.mapping(n, path).fields
}

// take returns key's value node (nil when absent or null) and its path.
func (m *mapping) take(key string) (ast.Node, string) {
	m.known = append(m.known, key)
	path := join(m.path, key)
	for _, f := range m.fields {
		if f.key == key {
			f.used = true
			m.d.places[path] = position(f.value)
			if m.d.places[path] == nil {
				m.d.places[path] = position(f.keyNode)
			}
			return m.d.resolve(f.value, path), path
		}
	}
	return nil, path
}

// field returns key's field, nil when the mapping has no such key; it does
// not take it.
func (m *mapping) field(key string) *entry {
	for _, f := range m.fields {
		if f.key == key {
			return f
		}
	}
	return nil
}

// has reports whether the mapping holds key (even with a null value).
func (m *mapping) has(key string) bool { return m.field(key) != nil }

// done reports every key that was never taken.
func (m *mapping) done() {
	for _, f := range m.fields {
		if !f.used {
			m.d.fail(f.keyNode, join(m.path, f.key), "unknown key %q (want one of %s)", f.key, strings.Join(m.known, ", "))
		}
	}
}

// pairs returns the mapping's keys and value nodes in file order, marking
// all used (for mappings whose keys are data, like a mix).
func (m *mapping) pairs() []*entry {
	for _, f := range m.fields {
		f.used = true
	}
	return m.fields
}

func describe(n ast.Node) string {
	switch n.(type) {
	case nil:
		return "nothing"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a sequence"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	}
	return strings.ToLower(n.Type().String())
}

// scalarText is a scalar's text as written (unquoted).
func scalarText(n ast.Node) (string, bool) {
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		if v.Value == nil {
			return "", true
		}
		return v.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return n.GetToken().Value, true
	}
	return "", false
}

func quoteNode(n ast.Node) string {
	if s, ok := scalarText(n); ok {
		return fmt.Sprintf("%q", s)
	}
	return describe(n)
}

func (d *decoder) intValue(n ast.Node, path string, lo, hi int) (int, bool) {
	in, ok := n.(*ast.IntegerNode)
	if !ok {
		d.fail(n, path, "want an integer, got %s", quoteNode(n))
		return 0, false
	}
	var v int64
	switch x := in.Value.(type) {
	case int64:
		v = x
	case uint64:
		if x > math.MaxInt64 {
			v = math.MaxInt64
		} else {
			v = int64(x)
		}
	}
	if v < int64(lo) || v > int64(hi) {
		d.fail(n, path, "%d is out of range [%d, %d]", v, lo, hi)
		return 0, false
	}
	return int(v), true
}

func (d *decoder) numberValue(n ast.Node, path string, lo, hi float64) (float64, bool) {
	var v float64
	switch x := n.(type) {
	case *ast.IntegerNode:
		switch i := x.Value.(type) {
		case int64:
			v = float64(i)
		case uint64:
			v = float64(i)
		}
	case *ast.FloatNode:
		v = x.Value
	default:
		d.fail(n, path, "want a number, got %s", quoteNode(n))
		return 0, false
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi {
		d.fail(n, path, "%s is out of range [%s, %s]", formatFloat(v), formatFloat(lo), formatFloat(hi))
		return 0, false
	}
	return v, true
}

// durationValue reads a Go duration ("250ms", "1m30s") in [lo, hi]; a
// bare 0 is allowed, other bare numbers are errors (missing unit).
func (d *decoder) durationValue(n ast.Node, path string, lo, hi time.Duration) (time.Duration, bool) {
	s, ok := scalarText(n)
	if !ok {
		d.fail(n, path, "want a duration like 250ms or 5s, got %s", describe(n))
		return 0, false
	}
	v, err := parseDuration(s)
	if err != nil {
		d.fail(n, path, "%v", err)
		return 0, false
	}
	if v < lo || v > hi {
		if v < 0 {
			d.fail(n, path, "negative duration %q", s)
		} else {
			d.fail(n, path, "duration %s is out of range [%s, %s]", v, lo, hi)
		}
		return 0, false
	}
	return v, true
}

// sequence reads a sequence's items; nil is an empty one.
func (d *decoder) sequence(n ast.Node, path string) []ast.Node {
	if n == nil {
		return nil
	}
	s, ok := n.(*ast.SequenceNode)
	if !ok {
		d.fail(n, path, "want a sequence, got %s", describe(n))
		return nil
	}
	return s.Values
}

// item records the place of a sequence's i-th item n and returns its
// path.
func (d *decoder) item(path string, i int, n ast.Node) string {
	p := fmt.Sprintf("%s[%d]", path, i)
	d.places[p] = position(n)
	return p
}

// stringList reads a sequence of distinct strings, each one of allowed.
func (d *decoder) stringList(n ast.Node, path string, allowed []string) []string {
	var out []string
	for i, item := range d.sequence(n, path) {
		p := fmt.Sprintf("%s[%d]", path, i)
		orig := item
		item = d.resolve(item, p)
		s, ok := scalarText(item)
		if !ok || !slices.Contains(allowed, s) {
			d.fail(orig, p, "want one of %s, got %s", strings.Join(allowed, ", "), quoteNode(item))
			continue
		}
		if slices.Contains(out, s) {
			d.fail(orig, p, "%q listed twice", s)
			continue
		}
		out = append(out, s)
	}
	return out
}
