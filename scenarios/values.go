package scenarios

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// parseDuration parses a Go duration; "0" needs no unit.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return 0, fmt.Errorf("duration %q has no unit (write %ss or %sms)", s, s, s)
		}
		return 0, fmt.Errorf("bad duration %q (want e.g. 250ms, 5s, 1m30s)", s)
	}
	return d, nil
}

// parseRate parses "N/UNIT" or "N/DURATION" ("100/s", "100/1m", "5/100ms",
// "10000/1d"); a bare positive number is per second. It returns count N per
// interval.
func parseRate(s string) (count float64, per time.Duration, err error) {
	s = strings.TrimSpace(s)
	num, unit, slash := strings.Cut(s, "/")
	count, perr := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if perr != nil || math.IsNaN(count) || math.IsInf(count, 0) {
		return 0, 0, fmt.Errorf("bad rate %q (want e.g. 100/s, 100/1m, 5/100ms)", s)
	}
	if count <= 0 {
		return 0, 0, fmt.Errorf("rate %q must be positive", s)
	}
	per = time.Second
	if slash {
		unit = strings.TrimSpace(unit)
		if unit != "" && (unit[0] < '0' || unit[0] > '9') {
			unit = "1" + unit
		}
		per, perr = parseInterval(unit)
		if perr != nil {
			return 0, 0, fmt.Errorf("bad rate %q: interval %q is not a duration (want e.g. 100/s, 100/1m, 5/100ms)", s, strings.TrimPrefix(unit, "1"))
		}
		if per <= 0 {
			return 0, 0, fmt.Errorf("rate %q: interval must be positive", s)
		}
	}
	if count/per.Seconds() > 1e9 {
		return 0, 0, fmt.Errorf("rate %q is over 1e9/s", s)
	}
	return count, per, nil
}

// parseInterval parses a rate's interval: a Go duration, or days ("1d",
// "7d"), which Go durations do not have.
func parseInterval(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseFloat(n, 64)
		if err != nil || math.IsNaN(days) || math.Abs(days) > 100_000 {
			return 0, fmt.Errorf("bad interval %q", s)
		}
		return time.Duration(days * float64(24*time.Hour)), nil
	}
	return time.ParseDuration(s)
}

// parseArrival parses a fleet start: "burst", "ramp 10s", "poisson 200/s".
func parseArrival(s string) (Arrival, error) {
	kind, arg, _ := strings.Cut(strings.TrimSpace(s), " ")
	arg = strings.TrimSpace(arg)
	switch kind {
	case ArrivalBurst:
		if arg != "" {
			return Arrival{}, fmt.Errorf("burst takes no argument, got %q", arg)
		}
		return Arrival{Kind: ArrivalBurst}, nil
	case ArrivalRamp:
		if arg == "" {
			return Arrival{}, fmt.Errorf("ramp needs a duration (e.g. ramp 10s)")
		}
		d, err := parseDuration(arg)
		if err != nil {
			return Arrival{}, fmt.Errorf("ramp: %w", err)
		}
		if d <= 0 || d > MaxDuration {
			return Arrival{}, fmt.Errorf("ramp duration %s is out of range (0, %s]", d, MaxDuration)
		}
		return Arrival{Kind: ArrivalRamp, Over: d}, nil
	case ArrivalPoisson:
		if arg == "" {
			return Arrival{}, fmt.Errorf("poisson needs a rate (e.g. poisson 200/s)")
		}
		n, per, err := parseRate(arg)
		if err != nil {
			return Arrival{}, fmt.Errorf("poisson: %w", err)
		}
		return Arrival{Kind: ArrivalPoisson, Rate: n / per.Seconds()}, nil
	}
	return Arrival{}, fmt.Errorf("bad start %q (want burst, ramp DURATION or poisson RATE)", s)
}

// parseShare parses a share in (0, 1]: a percentage ("30%", "2.5%") or a
// fraction ("0.3", "1").
func parseShare(s string) (float64, error) {
	s = strings.TrimSpace(s)
	num, pct := strings.CutSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a number or a percentage", s)
	}
	if pct {
		v /= 100
	}
	if v <= 0 || v > 1 {
		return 0, fmt.Errorf("%q is outside (0, 1]", s)
	}
	return v, nil
}
