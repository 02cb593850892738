package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"replab/internal/linkem"
)

// Limits of the values a spec accepts.
const (
	MaxDelay   = 10 * time.Second
	MinRateBps = 9600
	MaxRateBps = 10_000_000_000
	MinMTU     = 576
	MaxMTU     = 9000
	MaxQueue   = 1 << 30 // bytes
	MaxBDPMult = 100
	MinMemory  = 16 << 20
	MaxSysctl  = math.MaxInt32 // tcp_rmem, rmem_max, … are C ints
)

const (
	durationHint = `use a duration like "80ms", "1.5s", "250us"`
	rateHint     = `use a rate like "100mbit", "2.5gbit", "9600bit" (units bit, kbit, mbit, gbit) or "unlimited"`
	sizeHint     = `use a size like "64KiB", "100KB", "1500B" (units B, KB, MB, GB, KiB, MiB, GiB)`
	percentHint  = `use a percentage like "1%" or "0.5%"`
	gemodelHint  = `want "gemodel P R 1-H 1-K" with four percentages, e.g. "gemodel 1% 10% 100% 0%"`
)

// splitNumber splits "1.5 kbit" into "1.5" and "kbit". The number is a plain
// non-negative decimal (no sign, no exponent); ok is false when s does not
// start with one.
func splitNumber(s string) (num, unit string, ok bool) {
	s = strings.TrimSpace(s)
	i, digits, dot := 0, 0, false
	for i < len(s) {
		c := s[i]
		if c >= '0' && c <= '9' {
			digits++
		} else if c == '.' && !dot {
			dot = true
		} else {
			break
		}
		i++
	}
	if digits == 0 {
		return "", "", false
	}
	return s[:i], strings.TrimSpace(s[i:]), true
}

// parseDuration reads a duration in [0, MaxDelay].
func parseDuration(s string) (time.Duration, string) {
	return parseDurationMax(s, MaxDelay)
}

// parseDurationMax reads a duration in [0, limit].
func parseDurationMax(s string, limit time.Duration) (time.Duration, string) {
	num, unit, ok := splitNumber(s)
	if ok && unit == "" && num != "0" {
		return 0, fmt.Sprintf(`missing unit; use a duration like "%sms", "1.5s", "250us"`, num)
	}
	t := strings.TrimSpace(s)
	if ok {
		t = num + unit // "80 ms" is fine
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		if strings.HasPrefix(t, "-") {
			return 0, "must not be negative"
		}
		if t == "" {
			return 0, "empty; " + durationHint
		}
		return 0, "not a duration; " + durationHint
	}
	if d < 0 {
		return 0, "must not be negative"
	}
	if d > limit {
		return 0, fmt.Sprintf("too long; at most %v", limit)
	}
	return d, ""
}

// parseRate reads a rate in bits per second; "unlimited" is 0.
func parseRate(s string) (int64, string) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "unlimited") {
		return 0, ""
	}
	num, unit, ok := splitNumber(t)
	if !ok {
		if strings.HasPrefix(t, "-") {
			return 0, "must not be negative"
		}
		return 0, "not a rate; " + rateHint
	}
	if unit == "" {
		return 0, "missing unit; " + rateHint
	}
	var mult float64
	u := strings.ToLower(unit)
	switch u {
	case "bit":
		mult = 1
	case "kbit":
		mult = 1e3
	case "mbit":
		mult = 1e6
	case "gbit":
		mult = 1e9
	case "bps", "kbps", "mbps", "gbps":
		bitUnit := strings.TrimSuffix(u, "ps") + "it" // kbps -> kbit
		f, _ := strconv.ParseFloat(num, 64)
		return 0, fmt.Sprintf(`%q is ambiguous: in tc it means %sbytes per second; write "%s%s" for %s %sbits/s or "%s%s" for %s %sbytes/s`,
			clean(unit), siPrefixWord(u), num, bitUnit, num, siPrefixWord(u), strconv.FormatFloat(f*8, 'f', -1, 64), bitUnit, num, siPrefixWord(u))
	default:
		return 0, fmt.Sprintf("unknown unit %q; %s", clean(unit), rateHint)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, "not a rate; " + rateHint
	}
	bps := math.Round(f * mult)
	if bps < MinRateBps || bps > MaxRateBps {
		return 0, `must be between 9600bit and 10gbit, or "unlimited"`
	}
	return int64(bps), ""
}

// siPrefixWord turns "kbps" into "kilo", "mbps" into "mega", ….
func siPrefixWord(u string) string {
	switch u {
	case "bps":
		return ""
	case "kbps":
		return "kilo"
	case "mbps":
		return "mega"
	case "gbps":
		return "giga"
	}
	return ""
}

// parseSize reads a byte size with a unit.
func parseSize(s string) (int64, string) {
	t := strings.TrimSpace(s)
	num, unit, ok := splitNumber(t)
	if !ok {
		if strings.HasPrefix(t, "-") {
			return 0, "must not be negative"
		}
		return 0, "not a size; " + sizeHint
	}
	if unit == "" {
		return 0, "missing unit; " + sizeHint
	}
	var mult float64
	switch strings.ToLower(unit) {
	case "b":
		mult = 1
	case "kb":
		mult = 1e3
	case "mb":
		mult = 1e6
	case "gb":
		mult = 1e9
	case "kib":
		mult = 1 << 10
	case "mib":
		mult = 1 << 20
	case "gib":
		mult = 1 << 30
	case "bit", "kbit", "mbit", "gbit":
		return 0, "sizes are in bytes, not bits; " + sizeHint
	default:
		return 0, fmt.Sprintf("unknown unit %q; %s", clean(unit), sizeHint)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, "not a size; " + sizeHint
	}
	b := math.Round(f * mult)
	if b > 1<<50 {
		return 0, "too large"
	}
	return int64(b), ""
}

// parsePercent reads "1%" or "0.5%" as a probability (0.01, 0.005). The
// range is the caller's to check.
func parsePercent(s string) (float64, string) {
	t := strings.TrimSpace(s)
	num, unit, ok := splitNumber(t)
	if !ok {
		if strings.HasPrefix(t, "-") {
			return 0, "must not be negative"
		}
		return 0, "not a percentage; " + percentHint
	}
	if unit == "" {
		return 0, `missing "%"; ` + percentHint
	}
	if unit != "%" {
		return 0, fmt.Sprintf("unknown unit %q; %s", clean(unit), percentHint)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f > 100 {
		return 0, "must be between 0% and 100%"
	}
	return f / 100, ""
}

// parseLoss reads "1%" (independent loss, below 100%) or netem's bursty
// "gemodel P R 1-H 1-K".
func parseLoss(s string) (float64, *linkem.GilbertElliott, string) {
	t := strings.TrimSpace(s)
	if f := strings.Fields(t); len(f) > 0 && strings.EqualFold(f[0], "gemodel") {
		if len(f) != 5 {
			return 0, nil, fmt.Sprintf("%s; got %d values", gemodelHint, len(f)-1)
		}
		var v [4]float64
		names := [4]string{"P", "R", "1-H", "1-K"}
		for i := range v {
			p, msg := parsePercent(f[i+1])
			if msg != "" {
				return 0, nil, fmt.Sprintf("gemodel %s = %q: %s; %s", names[i], clean(f[i+1]), msg, gemodelHint)
			}
			v[i] = p
		}
		return 0, &linkem.GilbertElliott{P: v[0], R: v[1], LossBad: v[2], LossGood: v[3]}, ""
	}
	p, msg := parsePercent(t)
	if msg == "must be between 0% and 100%" {
		p, msg = 1, ""
	}
	if msg != "" {
		if msg == "not a percentage; "+percentHint {
			msg = `not a percentage; use a percentage like "1%" or "0.5%", or "gemodel P R 1-H 1-K" for bursty loss`
		}
		return 0, nil, msg
	}
	if p >= 1 {
		return 0, nil, "must be at least 0% and below 100%; to cut the link use down = true"
	}
	return p, nil, ""
}

// parseQueue reads a queue limit: a size, or a multiple of the
// bandwidth-delay product ("1bdp", "0.5bdp"), returned as bdp > 0.
func parseQueue(s string) (bytes int64, bdp float64, msg string) {
	t := strings.TrimSpace(s)
	if num, unit, ok := splitNumber(t); ok && strings.EqualFold(unit, "bdp") {
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || f <= 0 || f > MaxBDPMult {
			return 0, 0, fmt.Sprintf("BDP multiple must be above 0 and at most %d", MaxBDPMult)
		}
		return 0, f, ""
	}
	b, msg := parseSize(t)
	if msg != "" {
		if strings.HasPrefix(msg, "missing unit") || strings.HasPrefix(msg, "unknown unit") || strings.HasPrefix(msg, "not a size") {
			msg += `, or a multiple of the bandwidth-delay product like "1bdp"`
		}
		return 0, 0, msg
	}
	if b > MaxQueue {
		return 0, 0, "too large; at most 1GiB"
	}
	return b, 0, ""
}

// bdpQueue computes mult bandwidth-delay products (rate × round trip, taking
// the round trip as twice this direction's delay) in bytes, at least two
// packets.
func bdpQueue(mult float64, rateBps int64, delay time.Duration, mtu int) int64 {
	b := mult * float64(rateBps) * 2 * delay.Seconds() / 8
	b = min(math.Ceil(b), MaxQueue)
	return max(int64(b), 2*int64(mtu))
}

// parseMem reads tcp_rmem / tcp_wmem: the sysctl's three byte counts
// "4096 131072 33554432" (each may also carry a size unit), or one size,
// meaning the maximum, with min 4096 and default 131072 (or the maximum, if
// smaller).
func parseMem(s string) ([3]int64, string) {
	var out [3]int64
	const hint = `use three byte counts "min default max" like "4096 131072 33554432", or one maximum size like "32MiB"`
	f := strings.Fields(s)
	switch len(f) {
	case 1:
		if _, unit, ok := splitNumber(f[0]); ok && unit == "" {
			return out, "missing unit; " + hint
		}
		b, msg := parseSize(f[0])
		if msg != "" {
			return out, msg
		}
		if b < 4096 || b > MaxSysctl {
			return out, "maximum must be between 4KiB and 2GiB-1"
		}
		return [3]int64{4096, min(131072, b), b}, ""
	case 3:
		for i, w := range f {
			b, err := strconv.ParseInt(w, 10, 64)
			if err != nil {
				var msg string
				if b, msg = parseSize(w); msg != "" {
					return out, fmt.Sprintf("%q: %s", clean(w), hint)
				}
			}
			if b < 1 || b > MaxSysctl {
				return out, "each value must be between 1 and 2147483647 bytes"
			}
			out[i] = b
		}
		if out[0] > out[1] || out[1] > out[2] {
			return out, "want min <= default <= max"
		}
		return out, ""
	}
	return out, hint
}
