package stats

import (
	"fmt"
	"math"
)

// Whether a per-second series (throughput during the measure phase) is in
// a steady state: no large significant trend, no large significant drift.

// Steadiness thresholds. A series is not steady when its linear trend is
// both significant and steep, or when its last third differs from its first
// both significantly and by much. Requiring significance keeps noise from
// tripping the size thresholds on short series; requiring size keeps tiny
// but real trends on long series from being reported.
const (
	// SteadyMinSamples is the shortest series CheckSteady judges (seconds).
	SteadyMinSamples = 10
	// SteadyLevel is the confidence level of the trend and drift tests
	// (two-sided).
	SteadyLevel = 0.95
	// SteadyMaxSlopePctPerMin is the steepest trend tolerated, in percent
	// of the series mean per minute.
	SteadyMaxSlopePctPerMin = 5.0
	// SteadyMaxDriftPct is the largest change tolerated between the means of
	// the first and last thirds, in percent of the series mean.
	SteadyMaxDriftPct = 10.0
)

// Steadiness is CheckSteady's verdict. Percentages are of the series mean
// (0 when the mean is 0), negative when the series falls.
type Steadiness struct {
	Steady bool `json:"steady"`
	// SlopePctPerMin is the least-squares trend, in percent of the mean per
	// minute.
	SlopePctPerMin float64 `json:"slope_pct_per_min"`
	// DriftPct is mean(last third) − mean(first third), in percent of the
	// mean.
	DriftPct float64 `json:"drift_pct"`
	// Reason explains a verdict of not steady ("falls 12.0 %/min"), or why
	// the series could not be judged ("too short to judge: …"); "" for a
	// steady series. It has no subject: the caller names the metric.
	Reason string `json:"reason,omitempty"`
}

// CheckSteady judges a series sampled once a second. It is not steady when
//
//   - the least-squares slope is significant (t-test on the slope, n-2
//     degrees of freedom, at SteadyLevel) and steeper than
//     SteadyMaxSlopePctPerMin: Reason "falls 12.0 %/min" or "rises …"; or
//   - otherwise, the means of the first and last thirds differ
//     significantly (Welch's t-test at SteadyLevel) and by more than
//     SteadyMaxDriftPct: Reason "drifts down 15.0 % from the first third to
//     the last" (a step change, or a slow trend over a long run).
//
// NaN and ±Inf samples are skipped (the others keep their times). A series
// with fewer than SteadyMinSamples finite samples, empty included, is
// reported steady with a Reason saying it is too short to judge; a constant
// series is steady with slope and drift 0. The autocorrelation of real
// throughput makes both tests somewhat eager; the size thresholds are the
// real guard.
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
	if n < 3 {
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

	slope, slopeSignificant := trend(xs, ys, all.mean)
	st.SlopePctPerMin = pct(60 * slope)

	k := n / 3
	first, last := ys[:k], ys[n-k:]
	st.DriftPct = pct(describe(last).mean - describe(first).mean)
	driftSignificant := CompareMeans(first, last, SteadyLevel).Significant

	switch {
	case n < SteadyMinSamples:
		st.Reason = fmt.Sprintf("too short to judge: %s, need %d", plural(n, "sample"), SteadyMinSamples)
	case slopeSignificant && math.Abs(st.SlopePctPerMin) > SteadyMaxSlopePctPerMin:
		st.Steady = false
		st.Reason = fmt.Sprintf("%s %.1f %%/min", direction(st.SlopePctPerMin, "falls", "rises"), math.Abs(st.SlopePctPerMin))
	case driftSignificant && math.Abs(st.DriftPct) > SteadyMaxDriftPct:
		st.Steady = false
		st.Reason = fmt.Sprintf("drifts %s %.1f %% from the first third to the last",
			direction(st.DriftPct, "down", "up"), math.Abs(st.DriftPct))
	}
	return st
}

// trend fits y = a + b·x by least squares (len ≥ 3, mean of ys given) and
// reports b and whether it differs from 0 by a two-sided t-test at
// SteadyLevel.
func trend(xs, ys []float64, ymean float64) (slope float64, significant bool) {
	n := float64(len(xs))
	var xmean float64
	for _, x := range xs {
		xmean += x
	}
	xmean /= n
	var sxx, sxy float64
	for i, x := range xs {
		sxx += (x - xmean) * (x - xmean)
		sxy += (x - xmean) * (ys[i] - ymean)
	}
	if sxx == 0 || sxy == 0 {
		return 0, false
	}
	slope = sxy / sxx
	var sse float64
	for i, x := range xs {
		r := ys[i] - ymean - slope*(x-xmean)
		sse += r * r
	}
	se := math.Sqrt(sse / (n - 2) / sxx)
	if se == 0 {
		return slope, true // a perfect line
	}
	return slope, math.Abs(slope)/se > tQuantile(twoSided(SteadyLevel), n-2)
}

func direction(v float64, neg, pos string) string {
	if v < 0 {
		return neg
	}
	return pos
}
