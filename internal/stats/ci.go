package stats

import "math"

// Confidence intervals over repetitions, and how many repetitions a
// confidence target needs (Jain, The Art of Computer Systems Performance
// Analysis, 1991, §13.9).

// DefaultLevel replaces a confidence level outside (0, 1).
const DefaultLevel = 0.95

// RepetitionsCeiling is the most RepetitionsNeeded and JainRepetitions ever
// ask for: the answer when the target cannot be met (a mean of zero, a
// relative error ≤ 0) or needs more.
const RepetitionsCeiling = 1_000_000

// CI is a two-sided confidence interval for a mean: intervals Mean ±
// HalfWidth built this way cover the true mean with probability Level. StdDev is the sample standard
// deviation (n-1 in the denominator); with it, N and Mean, two CIs can be
// compared (CompareCIs).
//
// With N < 2 there is no spread to estimate: HalfWidth and StdDev are 0 and
// Bounded reports false. Every field stays finite, so a CI always encodes as
// valid JSON; check Bounded (or N) before reading HalfWidth as a precision.
type CI struct {
	Mean      float64 `json:"mean"`
	HalfWidth float64 `json:"half_width"`
	Level     float64 `json:"level"`
	N         int     `json:"n"`
	StdDev    float64 `json:"stddev"`
}

// Bounded reports whether the interval exists (N ≥ 2). A bounded interval
// of constant values has HalfWidth 0.
func (c CI) Bounded() bool { return c.N >= 2 }

// Low is the interval's lower end (Mean when not Bounded).
func (c CI) Low() float64 { return c.Mean - c.HalfWidth }

// High is the interval's upper end (Mean when not Bounded).
func (c CI) High() float64 { return c.Mean + c.HalfWidth }

// RelHalfWidth is HalfWidth as a fraction of |Mean|, to test against a
// relative error target. It is +Inf when the interval is not Bounded, or has
// a width around a zero mean, and 0 for a bounded interval of width 0. Not
// for JSON: +Inf does not encode.
func (c CI) RelHalfWidth() float64 {
	switch {
	case !c.Bounded():
		return math.Inf(1)
	case c.HalfWidth == 0:
		return 0
	case c.Mean == 0:
		return math.Inf(1)
	}
	return c.HalfWidth / math.Abs(c.Mean)
}

// MeanCI returns the two-sided confidence interval at level (e.g. 0.95) for
// the mean of xs, from Student's t with N-1 degrees of freedom:
// HalfWidth = t(1-(1-level)/2, N-1)·s/√N. NaN and ±Inf values are skipped
// (N counts the rest). Empty input gives N = 0 and Mean 0; one value gives
// that value with no interval (see CI); constant values give HalfWidth 0.
// A level outside (0, 1) is replaced by DefaultLevel, and Level reports the
// level used.
func MeanCI(xs []float64, level float64) CI {
	level = validLevel(level)
	s := describe(xs)
	ci := CI{Mean: s.mean, Level: level, N: s.n}
	if s.n >= 2 {
		ci.StdDev = s.sd
		if s.sd > 0 {
			ci.HalfWidth = TQuantile(twoSided(level), s.n-1) * s.sd / math.Sqrt(float64(s.n))
		}
	}
	return ci
}

// JainRepetitions is Jain's formula for the repetitions that estimate a
// mean within ±relErr (a fraction: 0.05 for 5 %) at the given confidence
// level, from a pilot's mean and standard deviation:
//
//	n = ⌈(z·s / (relErr·|x̄|))²⌉,  z the normal quantile 1-(1-level)/2
//
// (Jain writes r in percent: (100·z·s / (r·x̄))²). At least 1;
// RepetitionsCeiling when the target is unreachable (zero mean with a
// spread, relErr ≤ 0, non-finite inputs). The normal quantile understates
// the repetitions a small sample needs; RepetitionsNeeded corrects that.
func JainRepetitions(mean, stddev, level, relErr float64) int {
	z := NormalQuantile(twoSided(validLevel(level)))
	return ceilRepetitions(z, mean, stddev, relErr)
}

// RepetitionsNeeded returns how many repetitions in all (pilot included)
// estimate the mean within ±relErr (a fraction) at the given confidence
// level, taking the mean and spread from pilot. It refines Jain's formula
// with Student's t at the final sample size, not the normal z: the
// smallest n ≥ len(pilot) with
//
//	t(1-(1-level)/2, n-1) · s / √n  ≤  relErr · |x̄|
//
// which is exactly when MeanCI over n repetitions with the pilot's spread
// would meet the target. It is never less than JainRepetitions, and exceeds
// it by about (1+z²)/2 (2 to 3 at 95 %) for large n; for the storage study's
// pilot (x̄ = 619, s = 172, 95 %, 10 %) Jain gives 30 and this gives 33.
//
// NaN and ±Inf values are skipped. With fewer than two values the spread is
// unknown and the answer is 2: run another, then ask again (the answer is
// always an estimate to re-evaluate as repetitions accumulate). A constant
// pilot needs no more than itself. The result is capped at
// RepetitionsCeiling (also the answer when the target is unreachable); the
// caller applies its own maximum.
func RepetitionsNeeded(pilot []float64, level, relErr float64) int {
	level = validLevel(level)
	s := describe(pilot)
	if s.n < 2 {
		return 2
	}
	if s.sd == 0 {
		return s.n
	}
	n := max(s.n, ceilRepetitions(NormalQuantile(twoSided(level)), s.mean, s.sd, relErr))
	target := relErr * math.Abs(s.mean)
	// t/√n falls as n grows and t > z, so counting up from Jain's n finds
	// the smallest; it takes a few steps (a dozen at most, for tiny n).
	for n < RepetitionsCeiling && TQuantile(twoSided(level), n-1)*s.sd/math.Sqrt(float64(n)) > target {
		n++
	}
	return n
}

// ceilRepetitions evaluates ⌈(q·s / (relErr·|mean|))²⌉ within [1, RepetitionsCeiling].
func ceilRepetitions(q, mean, stddev, relErr float64) int {
	switch {
	case !finite(mean) || !finite(stddev) || !finite(relErr) || relErr <= 0:
		return RepetitionsCeiling
	case stddev == 0:
		return 1
	case mean == 0:
		return RepetitionsCeiling
	}
	r := q * stddev / (relErr * math.Abs(mean))
	n := r * r
	if !(n < RepetitionsCeiling) {
		return RepetitionsCeiling
	}
	// Forgive rounding noise so that an exact 30 stays 30.
	return max(1, int(math.Ceil(n*(1-1e-12))))
}

// validLevel replaces a confidence level outside (0, 1) by DefaultLevel.
func validLevel(level float64) float64 {
	if !(level > 0 && level < 1) {
		return DefaultLevel
	}
	return level
}

// twoSided turns a two-sided confidence level into the quantile's
// probability: 0.95 → 0.975.
func twoSided(level float64) float64 { return 1 - (1-level)/2 }

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// sample describes the finite values of a slice.
type sample struct {
	n        int
	mean, sd float64 // sd is 0 for n < 2
}

// describe computes the mean and sample standard deviation of the finite
// values in xs with the corrected two-pass algorithm; constant values give
// exactly that value and sd 0.
func describe(xs []float64) sample {
	var s sample
	var m, lo, hi float64 // m: running mean, which cannot overflow
	for _, x := range xs {
		if !finite(x) {
			continue
		}
		if s.n == 0 || x < lo {
			lo = x
		}
		if s.n == 0 || x > hi {
			hi = x
		}
		s.n++
		m += (x - m) / float64(s.n)
	}
	switch {
	case s.n == 0:
		return s
	case lo == hi:
		s.mean = lo
		return s
	}
	n := float64(s.n)
	var dev, sq float64
	for _, x := range xs {
		if finite(x) {
			dev += x - m
			sq += (x - m) * (x - m)
		}
	}
	s.mean = m + dev/n
	if s.n >= 2 {
		s.sd = math.Sqrt(max(0, (sq-dev*dev/n)/(n-1)))
	}
	return s
}
