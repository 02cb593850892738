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

func TestCheckSteady(t *testing.T) {
	flat := func(int) float64 { return 1000 }
	alternating := make([]float64, 12)
	for i := range alternating {
		alternating[i] = 50 + 100*float64(i%2)
	}
	withGaps := series(120, 3, func(i int) float64 { return 100 - 0.2*float64(i) })
	withGaps[5], withGaps[60], withGaps[119] = math.NaN(), math.Inf(1), math.NaN()

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
			}), false, "drifts down 22.", -3.3, -22.2, 0.5},
		{"a significant trend of 3 %/min over two minutes is steady",
			series(120, 1, func(i int) float64 { return 100 + 0.05*float64(i) }), true, "", 2.9, 3.9, 0.3},
		{"a steep but insignificant wiggle is steady", alternating, true, "", 126, 0, 1},
		{"a perfect line is not steady",
			series(60, 0, func(i int) float64 { return 100 - float64(i) }), false, "falls 85.1 %/min", -85.1, -56.7, 0.1},
		{"NaN and Inf samples are skipped, times kept", withGaps, false, "falls ", -13.6, -18.2, 1},
		{"constant is steady", series(300, 0, flat), true, "", 0, 0, 0},
		{"all zeros is steady", make([]float64, 60), true, "", 0, 0, 0},
		{"empty is too short to judge", nil, true, "too short to judge: 0 samples, need 10", 0, 0, 0},
		{"nine samples are too short to judge, however steep",
			series(9, 0, func(i int) float64 { return 100 - 10*float64(i) }), true, "too short to judge: 9 samples", -1000, -100, 1e-9},
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
		})
	}
}
