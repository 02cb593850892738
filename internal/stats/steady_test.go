package stats

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// series returns n per-second samples f(i) plus normal noise of standard
// deviation sd, the same every time.
func series(n int, sd float64, f func(i int) float64) []float64 {
	r := rand.New(rand.NewPCG(1, 2))
	ys := make([]float64, n)
	for i := range ys {
		ys[i] = f(i) + sd*r.NormFloat64()
	}
	return ys
}

// leastSquaresPctPerMin is the least-squares slope of ys, in percent of
// its mean per minute: what the check used before, tilted by one outlier.
func leastSquaresPctPerMin(ys []float64) float64 {
	n := float64(len(ys))
	var xm, ym float64
	for i, y := range ys {
		xm += float64(i)
		ym += y
	}
	xm, ym = xm/n, ym/n
	var sxx, sxy float64
	for i, y := range ys {
		sxx += (float64(i) - xm) * (float64(i) - xm)
		sxy += (float64(i) - xm) * (y - ym)
	}
	return 100 * 60 * sxy / sxx / ym
}

// quickstart is a 15-second measure phase like the README's demo: about
// 2,850 commits a second with 3 % noise, the first second 40 % faster
// (the backends had not yet queued on WAL flushes).
func quickstart() []float64 {
	ys := series(15, 85, func(int) float64 { return 2850 })
	ys[0] = 4000
	return ys
}

func TestCheckSteady(t *testing.T) {
	flat := func(int) float64 { return 1000 }
	alternating := make([]float64, 12)
	for i := range alternating {
		alternating[i] = 50 + 100*float64(i%2)
	}
	withGaps := series(120, 3, func(i int) float64 { return 100 - 0.2*float64(i) })
	withGaps[5], withGaps[60], withGaps[119] = math.NaN(), math.Inf(1), math.NaN()
	falling := func(n int) []float64 { return series(n, 0, func(i int) float64 { return 100 - 10*float64(i) }) }

	cases := []struct {
		name   string
		series []float64
		steady bool
		reason string  // prefix
		slope  float64 // %/min, ± tol
		drift  float64 // %, ± tol
		tol    float64
	}{
		{"noise without trend is steady", series(600, 50, flat), true, "", 0, 0, 1},
		{"a flat noisy 15 s run with one fast first second is steady", quickstart(), true, "", 0, 0, 10},
		{"a flat noisy 15 s run is steady", series(15, 85, func(int) float64 { return 2850 }), true, "", 0, 0, 10},
		{"a real fall over 15 s stands out of its noise",
			series(15, 85, func(i int) float64 { return 3000 - 40*float64(i) }), false, "falls ", -90, -20, 10},
		{"a fall of 0.2/s from 100 (13.6 %/min of the mean) is not steady",
			series(120, 3, func(i int) float64 { return 100 - 0.2*float64(i) }), false, "falls ", -13.6, -18.2, 1},
		{"a rise is not steady either",
			series(120, 3, func(i int) float64 { return 100 + 0.2*float64(i) }), false, "rises ", 10.7, 14.3, 1},
		{"a step from 100 to 80 halfway through 10 minutes drifts",
			series(600, 3, func(i int) float64 {
				if i < 300 {
					return 100
				}
				return 80
			}), false, "drifts down 22.", -3.0, -22.2, 0.5},
		{"a significant trend of 3 %/min over two minutes is steady",
			series(120, 1, func(i int) float64 { return 100 + 0.05*float64(i) }), true, "", 2.9, 3.9, 0.3},
		{"a steep wiggle without a trend is steady", alternating, true, "", 0, 0, 1},
		{"a perfect line is not steady",
			series(60, 0, func(i int) float64 { return 100 - float64(i) }), false, "falls 85.1 %/min (95 % CI 85.1 to 85.1)", -85.1, -56.7, 0.1},
		{"NaN and Inf samples are skipped, times kept", withGaps, false, "falls ", -13.6, -18.2, 1},
		{"an hour is judged in blocks: a slow fall drifts", series(3600, 30, func(i int) float64 { return 1000 - 0.1*float64(i) }), false, "drifts down 29.", -0.73, -29.3, 0.05},
		{"an hour is judged in blocks: noise", series(3600, 30, flat), true, "", 0, 0, 0.2},
		{"constant is steady", series(300, 0, flat), true, "", 0, 0, 0},
		{"all zeros is steady", make([]float64, 60), true, "", 0, 0, 0},
		{"empty is too short to judge", nil, true, "too short to judge: 0 samples, need 6", 0, 0, 0},
		{"five samples are too short to judge, however steep", falling(5), true, "too short to judge: 5 samples, need 6", 0, 0, 0},
		{"six samples falling every second are not steady", falling(6), false, "falls 800.0 %/min (95 % CI 800.0 to 800.0)", -800, -53.3, 0.1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := CheckSteady(c.series)
			if st.Steady != c.steady || !strings.HasPrefix(st.Reason, c.reason) || (c.reason == "" && st.Reason != "") {
				t.Errorf("CheckSteady = %+v, want steady %v, reason %q…", st, c.steady, c.reason)
			}
			if !near(st.SlopePctPerMin, c.slope, c.tol) || !near(st.DriftPct, c.drift, c.tol) {
				t.Errorf("slope %.2f %%/min, drift %.2f %%; want %.2f and %.2f (± %v)",
					st.SlopePctPerMin, st.DriftPct, c.slope, c.drift, c.tol)
			}
			if st.SlopeLowPctPerMin > st.SlopePctPerMin || st.SlopeHighPctPerMin < st.SlopePctPerMin {
				t.Errorf("the trend %.2f is outside its interval [%.2f, %.2f]", st.SlopePctPerMin, st.SlopeLowPctPerMin, st.SlopeHighPctPerMin)
			}
		})
	}
}

// TestQuickstartWasNotSteadyByLeastSquares: the series the steadiness
// check must call steady is one a least-squares trend called falling.
func TestQuickstartWasNotSteadyByLeastSquares(t *testing.T) {
	if ls := leastSquaresPctPerMin(quickstart()); ls > -SteadyMaxSlopePctPerMin {
		t.Errorf("least-squares trend %.1f %%/min: the case does not show the outlier's pull", ls)
	}
}

// TestSteadyMinSamplesIsTheFewestThatCanShowATrend: with
// SteadyMinSamples samples a series falling every second has an interval
// that excludes zero; with one fewer, no series can.
func TestSteadyMinSamplesIsTheFewestThatCanShowATrend(t *testing.T) {
	for n, want := range map[int]bool{SteadyMinSamples - 1: false, SteadyMinSamples: true} {
		xs, ys := make([]float64, n), make([]float64, n)
		for i := range xs {
			xs[i], ys[i] = float64(i), float64(-i)
		}
		_, lo, hi := senSlope(xs, ys, SteadyLevel)
		if got := lo > 0 || hi < 0; got != want {
			t.Errorf("%d samples falling every second: interval [%v, %v] excludes zero: %v, want %v", n, lo, hi, got, want)
		}
	}
}

// TestSenSlopeOfAKnownSample checks the interval against one worked by
// hand. The 21 pairwise slopes of (0,1) (1,3) (2,2) (3,5) (4,4) (5,7)
// (6,6), sorted: -1 -1 -1 1/3 1/3 1/2 3/5 3/4 5/6 1 1 1 1 1 1 6/5 4/3 5/3 2
// 3 3; the median is 1. No ties in y: var S = 7·6·19/18 = 44.33, C =
// 1.96·6.66 = 13.05, (21 − 13.05)/2 = 3.97: the 3rd smallest and the 3rd
// largest, -1 and 2.
func TestSenSlopeOfAKnownSample(t *testing.T) {
	xs := []float64{0, 1, 2, 3, 4, 5, 6}
	ys := []float64{1, 3, 2, 5, 4, 7, 6}
	slope, lo, hi := senSlope(xs, ys, 0.95)
	if slope != 1 || lo != -1 || hi != 2 {
		t.Errorf("slope %v in [%v, %v], want 1 in [-1, 2]", slope, lo, hi)
	}
}
