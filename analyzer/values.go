package analyzer

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The one parser of check parameter values, for --check flags,
// scenario files and timelines.

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
