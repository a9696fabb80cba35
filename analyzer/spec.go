package analyzer

import (
	"fmt"
	"sort"
	"strings"
)

// String is the spec as ParseCheckSpec reads it, parameters sorted by name.
func (s CheckSpec) String() string {
	if len(s.Params) == 0 {
		return s.ID
	}
	keys := make([]string, 0, len(s.Params))
	for k := range s.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(s.ID)
	for i, k := range keys {
		if i == 0 {
			b.WriteByte(':')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + s.Params[k])
	}
	return b.String()
}

// ParseCheckSpec parses a --check value: a check id, optionally followed by
// ':' and comma-separated key=value parameters. "threshold" is a number for
// every check; durations take Go syntax ("10ms") or seconds; status sets are
// joined by '|' ("statuses=400|404"). Unknown ids and parameters are errors
// that name them.
func ParseCheckSpec(s string) (CheckSpec, error) {
	id, rest, hasParams := strings.Cut(strings.TrimSpace(s), ":")
	id = strings.TrimSpace(id)
	def := lookupCheck(id)
	if def == nil {
		return CheckSpec{}, unknownCheck(id)
	}
	spec := CheckSpec{ID: id}
	if !hasParams {
		return spec, nil
	}
	if strings.TrimSpace(rest) == "" {
		return CheckSpec{}, fmt.Errorf("analyzer: check %s: empty parameter list after ':'", id)
	}
	spec.Params = make(map[string]string)
	for _, kv := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return CheckSpec{}, fmt.Errorf("analyzer: check %s: parameter %q: want key=value", id, kv)
		}
		if _, dup := spec.Params[k]; dup {
			return CheckSpec{}, fmt.Errorf("analyzer: check %s: parameter %q given twice", id, k)
		}
		p, ok := def.Param(k)
		if !ok {
			return CheckSpec{}, fmt.Errorf("analyzer: check %s: %w %q (known: %s)", id, ErrUnknownParam, k, strings.Join(def.ParamNames(), ", "))
		}
		if _, err := parseParam(p.Kind, v); err != nil {
			return CheckSpec{}, fmt.Errorf("analyzer: check %s: %s=%q: %w", id, k, v, err)
		}
		spec.Params[k] = v
	}
	return spec, nil
}

// ParseCheckIDs parses a comma-separated list of check ids (a --skip value).
func ParseCheckIDs(s string) ([]string, error) {
	var ids []string
	for _, id := range strings.Split(s, ",") {
		id = strings.TrimSpace(id)
		if id == "" {
			continue
		}
		if lookupCheck(id) == nil {
			return nil, unknownCheck(id)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
