package analyzer

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrUnknownCheck is wrapped by errors about a check id this version does
// not know (ParseCheckSpec, ParseCheckIDs, Options.Validate).
var ErrUnknownCheck = errors.New("unknown check")

// A CheckSpec selects a check and overrides its parameters, the value of a
// --check flag: "waves", "waves:threshold=2.5",
// "retry-after:tolerance=10ms,threshold=0". Parameters absent from Params
// keep the value from the scenario's expect block or the default.
type CheckSpec struct {
	ID     string
	Params map[string]string // validated by ParseCheckSpec
}

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

func unknownCheck(id string) error {
	return fmt.Errorf("analyzer: %w %q (known: %s)", ErrUnknownCheck, id, strings.Join(CheckIDs(), ", "))
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

// paramValue is a parsed parameter: a number (durations in seconds) or a
// status set.
type paramValue struct {
	num      float64
	statuses []int
}

// ParseValue parses text as the value of a parameter of kind k, for a
// scenario's expect.thresholds: a number; a duration in seconds (Go
// syntax or seconds); one HTTP status for a status set. It is the parser
// --check values go through too (ParseCheckSpec), so a value means the
// same from a flag and from a file.
func ParseValue(k ParamKind, text string) (float64, error) {
	v, err := parseParam(k, strings.TrimSpace(text))
	if err != nil {
		return 0, err
	}
	if k == KindStatuses {
		if len(v.statuses) != 1 {
			return 0, fmt.Errorf("want one HTTP status like 404, got %q", text)
		}
		return float64(v.statuses[0]), nil
	}
	return v.num, nil
}

// maxValue bounds every number a parameter takes (durations in seconds).
const maxValue = 1e12

// parseParam is the one parser of parameter values (ParseValue).
func parseParam(kind ParamKind, v string) (paramValue, error) {
	switch kind {
	case KindDuration:
		if d, err := time.ParseDuration(v); err == nil {
			if d < 0 {
				return paramValue{}, fmt.Errorf("negative duration %q", v)
			}
			return paramValue{num: d.Seconds()}, nil
		}
		f, err := parseNumber(v)
		if err != nil {
			if _, nerr := strconv.ParseFloat(v, 64); nerr == nil {
				return paramValue{}, err // a number out of range
			}
			return paramValue{}, fmt.Errorf("want a duration such as 10ms, or seconds, got %q", v)
		}
		return paramValue{num: f}, nil
	case KindStatuses:
		var st []int
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == '|' || r == '+' || r == ' ' }) {
			n, err := strconv.Atoi(f)
			if err != nil || n < 100 || n > 599 {
				return paramValue{}, fmt.Errorf("%q is not an HTTP status", f)
			}
			st = append(st, n)
		}
		if len(st) == 0 {
			return paramValue{}, errors.New("want statuses joined by '|', such as 400|404")
		}
		return paramValue{statuses: st}, nil
	default:
		f, err := parseNumber(v)
		if err != nil {
			return paramValue{}, err
		}
		return paramValue{num: f}, nil
	}
}

func parseNumber(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("want a number, got %q", v)
	}
	if f < 0 || f > maxValue {
		return 0, fmt.Errorf("%s is out of range [0, %g]", v, maxValue)
	}
	return f, nil
}
