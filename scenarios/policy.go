package scenarios

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
	"github.com/retrylab/retrylab/subjects"
)

// MaxPolicyText bounds the text ParsePolicy reads (run --policy).
const MaxPolicyText = 1 << 10

// PolicyError is a problem in a policy written as ParsePolicy takes it:
// the item (1-based, as written) and what is wrong with it. Error returns
// `item N "ITEM": what is wrong`.
type PolicyError struct {
	Item int    // 1-based; 0 when the problem is the whole text
	Text string // the item as written, clipped
	Msg  string
}

func (e *PolicyError) Error() string {
	if e.Item == 0 {
		return e.Msg
	}
	return fmt.Sprintf("item %d %q: %s", e.Item, e.Text, e.Msg)
}

// ParsePolicy reads a retry policy written on one line as comma-separated
// KEY=VALUE items, "max_attempts=8,budget=6s,base=200ms,cap=4s,jitter=full":
// the keys and values of a scenario's subject.policy (the same table reads
// both, so they cannot drift), each key at most once, and cap not below
// base. Spaces around items, keys and values are ignored. The first
// problem is returned as a *PolicyError naming its item.
func ParsePolicy(s string) (subjects.Policy, error) {
	var p subjects.Policy
	if len(s) > MaxPolicyText {
		return p, &PolicyError{Msg: fmt.Sprintf("longer than %d bytes", MaxPolicyText)}
	}
	if strings.TrimSpace(s) == "" {
		return p, &PolicyError{Msg: "empty: want KEY=VALUE items such as max_attempts=8,budget=6s (keys: " + strings.Join(policyKeys.names(), ", ") + ")"}
	}
	seen := map[string]int{}
	for i, item := range strings.Split(s, ",") {
		n := i + 1
		bad := func(format string, args ...any) error {
			return &PolicyError{Item: n, Text: clip(strings.TrimSpace(item)), Msg: fmt.Sprintf(format, args...)}
		}
		name, value, ok := strings.Cut(item, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		switch {
		case strings.TrimSpace(item) == "":
			return p, bad("empty item (two commas, or one at an end)")
		case !ok:
			return p, bad("want KEY=VALUE")
		case value == "":
			return p, bad("%s has no value", name)
		}
		k := policyKey(name)
		if k == nil {
			return p, bad("unknown key %q (want one of %s)", name, strings.Join(policyKeys.names(), ", "))
		}
		if prev, dup := seen[name]; dup {
			return p, bad("%s is given twice (first in item %d)", name, prev)
		}
		seen[name] = n
		d := newDecoder("")
		k.dec(&mapping{d: d, path: name}, scalarNode(value), name, &p)
		if d.failed() {
			return p, bad("%s: %s", name, d.errs[0].Msg)
		}
	}
	if p.Base > 0 && p.Cap > 0 && p.Cap < p.Base {
		return p, &PolicyError{Item: seen["cap"], Text: "cap=" + p.Cap.String(), Msg: fmt.Sprintf("cap %s is below base %s", p.Cap, p.Base)}
	}
	return p, nil
}

// FormatPolicy writes p as ParsePolicy reads it, its non-zero fields in
// the scenario's order ("" for the zero policy).
func FormatPolicy(p subjects.Policy) string {
	var parts []string
	for _, kv := range policyKeys.encode(&p) {
		parts = append(parts, fmt.Sprintf("%s=%v", kv.k, kv.v))
	}
	return strings.Join(parts, ",")
}

// policyKey is the policy table's key name, or nil.
func policyKey(name string) *key[subjects.Policy] {
	for i := range policyKeys {
		if policyKeys[i].name == name {
			return &policyKeys[i]
		}
	}
	return nil
}

// scalarNode is text as the YAML scalar a scenario file would hold,
// unquoted: an integer or a float when it reads as one, else a string.
func scalarNode(text string) ast.Node {
	pos := &token.Position{Line: 1, Column: 1}
	tk := token.New(text, text, pos)
	switch tk.Type {
	case token.IntegerType, token.BinaryIntegerType, token.OctetIntegerType, token.HexIntegerType:
		return ast.Integer(tk)
	case token.FloatType:
		return ast.Float(tk)
	}
	return ast.String(token.String(text, text, pos))
}

// clip shortens s for an error message.
func clip(s string) string {
	if r := []rune(s); len(r) > 60 {
		return string(r[:60]) + "…"
	}
	return s
}
