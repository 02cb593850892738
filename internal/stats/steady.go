package stats

import (
	"fmt"
	"math"
	"sort"
)

// Whether a per-second series (throughput during the measure phase) is in
// a steady state: no large trend that stands out of its noise, no large
// significant drift.

// Steadiness thresholds. A series is not steady when its trend's
// confidence interval excludes zero and the trend is steep, or when its
// last third differs from its first both significantly and by much.
// Requiring significance keeps noise (a fast first second, a checkpoint's
// dip) from tripping the size thresholds on short series; requiring size
// keeps tiny but real trends on long series from being reported.
const (
	// SteadyMinSamples is the shortest series CheckSteady judges
	// (seconds): with fewer, even a series that falls every second has a
	// trend whose interval at SteadyLevel includes zero (Sen's interval
	// needs 6 samples at 95 %), so no trend could ever be told from noise.
	SteadyMinSamples = 6
	// SteadyLevel is the confidence level of the trend's interval and of
	// the drift test (two-sided).
	SteadyLevel = 0.95
	// SteadyMaxSlopePctPerMin is the steepest trend tolerated, in percent
	// of the series mean per minute.
	SteadyMaxSlopePctPerMin = 5.0
	// SteadyMaxDriftPct is the largest change tolerated between the means of
	// the first and last thirds, in percent of the series mean.
	SteadyMaxDriftPct = 10.0
	// SteadyMaxPoints bounds the trend's work (its pairs grow as n²): a
	// longer series is judged on the means of equal blocks of consecutive
	// seconds, at most this many.
	SteadyMaxPoints = 600
)

// Steadiness is CheckSteady's verdict. Percentages are of the series mean
// (0 when the mean is 0), negative when the series falls.
type Steadiness struct {
	Steady bool `json:"steady"`
	// SlopePctPerMin is the trend (Theil–Sen: the median of the slopes
	// between every two samples), in percent of the mean per minute.
	SlopePctPerMin float64 `json:"slope_pct_per_min"`
	// SlopeLowPctPerMin and SlopeHighPctPerMin bound the trend at
	// SteadyLevel (Sen's distribution-free interval); ±1e9 when the
	// series is too short to set them (JSON has no infinity). Both 0 (and
	// left out of JSON) for a constant series, and in an aggregate: the
	// repetitions' intervals do not fold into one.
	SlopeLowPctPerMin  float64 `json:"slope_low_pct_per_min,omitempty"`
	SlopeHighPctPerMin float64 `json:"slope_high_pct_per_min,omitempty"`
	// DriftPct is mean(last third) − mean(first third), in percent of the
	// mean.
	DriftPct float64 `json:"drift_pct"`
	// Reason explains a verdict of not steady ("falls 12.0 %/min (95 % CI
	// 8.1 to 15.3)"), or why the series could not be judged ("too short to
	// judge: …"); "" for a steady series. It has no subject: the caller
	// names the metric.
	Reason string `json:"reason,omitempty"`
}

// unbounded stands for the trend's interval when the series is too short
// to set it.
const unbounded = 1e9

// CheckSteady judges a series sampled once a second. It is not steady when
//
//   - the trend's interval at SteadyLevel excludes zero (the trend stands
//     out of the noise) and the trend is steeper than
//     SteadyMaxSlopePctPerMin: Reason "falls 12.0 %/min (95 % CI 8.1 to
//     15.3)" or "rises …"; or
//   - otherwise, the means of the first and last thirds differ
//     significantly (Welch's t-test at SteadyLevel) and by more than
//     SteadyMaxDriftPct: Reason "drifts down 15.0 % from the first third to
//     the last" (a step change, or a slow trend over a long run).
//
// The trend is Theil–Sen's with Sen's interval (from Kendall's S, ties
// allowed): rank-based, so one fast or slow second (the first after the
// warmup, a checkpoint) moves it no more than any other, where a
// least-squares line would tilt towards it. NaN and ±Inf samples are
// skipped (the others keep their times). A series with fewer than
// SteadyMinSamples finite samples, empty included, is reported steady
// with a Reason saying it is too short to judge; a constant series is
// steady with slope and drift 0.
func CheckSteady(series []float64) Steadiness {
	var xs, ys []float64
	for i, y := range series {
		if finite(y) {
			xs = append(xs, float64(i))
			ys = append(ys, y)
		}
	}
	n := len(ys)
	st := Steadiness{Steady: true}
	if n < SteadyMinSamples {
		st.Reason = fmt.Sprintf("too short to judge: %s, need %d", plural(n, "sample"), SteadyMinSamples)
		return st
	}
	all := describe(ys)
	base := math.Abs(all.mean)
	pct := func(v float64) float64 {
		if base == 0 {
			return 0
		}
		return 100 * v / base
	}

	bx, by := blocks(xs, ys, SteadyMaxPoints)
	slope, lo, hi := senSlope(bx, by, SteadyLevel)
	st.SlopePctPerMin = pct(60 * slope)
	st.SlopeLowPctPerMin, st.SlopeHighPctPerMin = -unbounded, unbounded
	if !math.IsInf(lo, 0) {
		st.SlopeLowPctPerMin, st.SlopeHighPctPerMin = pct(60*lo), pct(60*hi)
	}
	trendStandsOut := lo > 0 || hi < 0

	k := n / 3
	first, last := ys[:k], ys[n-k:]
	st.DriftPct = pct(describe(last).mean - describe(first).mean)
	driftSignificant := CompareMeans(first, last, SteadyLevel).Significant

	switch {
	case trendStandsOut && math.Abs(st.SlopePctPerMin) > SteadyMaxSlopePctPerMin:
		st.Steady = false
		l, h := math.Abs(st.SlopeLowPctPerMin), math.Abs(st.SlopeHighPctPerMin)
		st.Reason = fmt.Sprintf("%s %.1f %%/min (%.0f %% CI %.1f to %.1f)", direction(st.SlopePctPerMin, "falls", "rises"),
			math.Abs(st.SlopePctPerMin), 100*SteadyLevel, min(l, h), max(l, h))
	case driftSignificant && math.Abs(st.DriftPct) > SteadyMaxDriftPct:
		st.Steady = false
		st.Reason = fmt.Sprintf("drifts %s %.1f %% from the first third to the last",
			direction(st.DriftPct, "down", "up"), math.Abs(st.DriftPct))
	}
	return st
}

// blocks returns the series as at most maxPoints points: itself when it is
// that short, else the means (of x and of y) of equal runs of consecutive
// samples.
func blocks(xs, ys []float64, maxPoints int) (bx, by []float64) {
	if len(xs) <= maxPoints {
		return xs, ys
	}
	size := (len(xs) + maxPoints - 1) / maxPoints
	for i := 0; i < len(xs); i += size {
		j := min(i+size, len(xs))
		var sx, sy float64
		for k := i; k < j; k++ {
			sx += xs[k]
			sy += ys[k]
		}
		bx = append(bx, sx/float64(j-i))
		by = append(by, sy/float64(j-i))
	}
	return bx, by
}

// senSlope is the Theil–Sen slope of y over x (x strictly increasing) and
// Sen's (1968) interval for it at level: the order statistics of the
// pairwise slopes that Kendall's S, whose variance is corrected for tied
// y values, puts at the interval's ends. An end the series is too short
// to set is ±Inf. A constant series has slope 0 and interval [0, 0].
func senSlope(xs, ys []float64, level float64) (slope, lo, hi float64) {
	n := len(xs)
	slopes := make([]float64, 0, n*(n-1)/2)
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			slopes = append(slopes, (ys[j]-ys[i])/(xs[j]-xs[i]))
		}
	}
	sort.Float64s(slopes)
	N := len(slopes)
	if N == 0 {
		return 0, math.Inf(-1), math.Inf(1)
	}
	if N%2 == 1 {
		slope = slopes[N/2]
	} else {
		slope = (slopes[N/2-1] + slopes[N/2]) / 2
	}
	fn := float64(n)
	varS := fn * (fn - 1) * (2*fn + 5) / 18
	tied := map[float64]int{}
	for _, y := range ys {
		tied[y]++
	}
	for _, t := range tied {
		ft := float64(t)
		varS -= ft * (ft - 1) * (2*ft + 5) / 18
	}
	c := NormalQuantile(twoSided(level)) * math.Sqrt(max(varS, 0))
	// 1-based ranks (N − C)/2 and (N + C)/2 + 1, taken symmetrically.
	low := int((float64(N) - c) / 2)
	lo, hi = math.Inf(-1), math.Inf(1)
	if low >= 1 {
		lo, hi = slopes[low-1], slopes[N-low]
	}
	return slope, lo, hi
}

func direction(v float64, neg, pos string) string {
	if v < 0 {
		return neg
	}
	return pos
}
