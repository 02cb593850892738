package stats

import (
	"fmt"
	"math"
	"testing"
)

// A printed table of Student's t (one-sided upper quantiles, 3 decimals);
// df 0 stands for ∞.
var tTable = []struct {
	df              int
	p95, p975, p995 float64
}{
	{1, 6.314, 12.706, 63.657}, {2, 2.920, 4.303, 9.925}, {3, 2.353, 3.182, 5.841},
	{4, 2.132, 2.776, 4.604}, {5, 2.015, 2.571, 4.032}, {6, 1.943, 2.447, 3.707},
	{7, 1.895, 2.365, 3.499}, {8, 1.860, 2.306, 3.355}, {9, 1.833, 2.262, 3.250},
	{10, 1.812, 2.228, 3.169}, {11, 1.796, 2.201, 3.106}, {12, 1.782, 2.179, 3.055},
	{13, 1.771, 2.160, 3.012}, {14, 1.761, 2.145, 2.977}, {15, 1.753, 2.131, 2.947},
	{16, 1.746, 2.120, 2.921}, {17, 1.740, 2.110, 2.898}, {18, 1.734, 2.101, 2.878},
	{19, 1.729, 2.093, 2.861}, {20, 1.725, 2.086, 2.845}, {21, 1.721, 2.080, 2.831},
	{22, 1.717, 2.074, 2.819}, {23, 1.714, 2.069, 2.807}, {24, 1.711, 2.064, 2.797},
	{25, 1.708, 2.060, 2.787}, {26, 1.706, 2.056, 2.779}, {27, 1.703, 2.052, 2.771},
	{28, 1.701, 2.048, 2.763}, {29, 1.699, 2.045, 2.756}, {30, 1.697, 2.042, 2.750},
	{60, 1.671, 2.000, 2.660}, {120, 1.658, 1.980, 2.617}, {0, 1.645, 1.960, 2.576},
}

func TestTQuantileMatchesThePrintedTable(t *testing.T) {
	for _, row := range tTable {
		name := fmt.Sprintf("df=%d", row.df)
		if row.df == 0 {
			name = "df=∞"
		}
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct{ p, want float64 }{{0.95, row.p95}, {0.975, row.p975}, {0.995, row.p995}} {
				if got := TQuantile(c.p, row.df); math.Abs(got-c.want) > 0.0005+1e-9 {
					t.Errorf("TQuantile(%v, %d) = %.6f, table says %.3f", c.p, row.df, got, c.want)
				}
			}
		})
	}
}

func TestTQuantileToTwelveDigits(t *testing.T) {
	// Reference values from mpmath at 40 digits (betainc inverted by findroot).
	for _, c := range []struct {
		p    float64
		df   int
		want float64
	}{
		{0.975, 1, 12.706204736174705},
		{0.995, 1, 63.656741162871581},
		{0.9, 2, 1.8856180831641267},
		{0.975, 4, 2.7764451051977944},
		{0.995, 5, 4.0321429835552281},
		{0.975, 10, 2.2281388519862747},
		{0.995, 30, 2.7499956535672253},
		{0.975, 60, 2.0002978220142605},
		{0.95, 120, 1.6576508993552356},
		{0.975, 1000, 1.9623390808264085},
		{0.975, 0, 1.9599639845400542},
		{1e-300, 1, -1 / (math.Pi * 1e-300)}, // far beyond t² = MaxFloat64
	} {
		if got := TQuantile(c.p, c.df); math.Abs(got-c.want) > 1e-12*math.Abs(c.want) {
			t.Errorf("TQuantile(%v, %d) = %.17g, want %.17g", c.p, c.df, got, c.want)
		}
	}
}

func TestTQuantileMatchesClosedForms(t *testing.T) {
	// df 1 is the Cauchy distribution, t = -cot(πp) (written so that it
	// keeps its precision in the tails); df 2 has t = (2p-1)/√(2p(1-p)).
	for _, p := range []float64{1e-10, 0.001, 0.2, 0.6, 0.9, 0.999, 1 - 1e-9} {
		cauchy := -1 / math.Tan(math.Pi*p)
		if p > 0.5 {
			cauchy = 1 / math.Tan(math.Pi*(1-p))
		}
		if got := TQuantile(p, 1); math.Abs(got-cauchy) > 1e-10*math.Abs(cauchy) {
			t.Errorf("TQuantile(%v, 1) = %.15g, want %.15g", p, got, cauchy)
		}
		two := (2*p - 1) / math.Sqrt(2*p*(1-p))
		if got := TQuantile(p, 2); math.Abs(got-two) > 1e-10*math.Abs(two) {
			t.Errorf("TQuantile(%v, 2) = %.15g, want %.15g", p, got, two)
		}
	}
}

func TestTQuantileEdges(t *testing.T) {
	cases := []struct {
		name string
		p    float64
		df   int
		want float64
	}{
		{"median is zero", 0.5, 7, 0},
		{"p 0 is -Inf", 0, 7, math.Inf(-1)},
		{"p 1 is +Inf", 1, 7, math.Inf(1)},
		{"p below 0 is -Inf", -3, 7, math.Inf(-1)},
		{"negative df is normal", 0.975, -1, NormalQuantile(0.975)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := TQuantile(c.p, c.df); got != c.want {
				t.Errorf("TQuantile(%v, %d) = %v, want %v", c.p, c.df, got, c.want)
			}
		})
	}
	t.Run("NaN in, NaN out", func(t *testing.T) {
		if got := TQuantile(math.NaN(), 3); !math.IsNaN(got) {
			t.Errorf("TQuantile(NaN, 3) = %v", got)
		}
	})
	t.Run("lower quantiles mirror upper ones", func(t *testing.T) {
		for _, df := range []int{1, 3, 29} {
			for _, p := range []float64{0.25, 0.0078125} { // 1-p is exact
				if lo, hi := TQuantile(p, df), TQuantile(1-p, df); lo != -hi {
					t.Errorf("df %d, p %v: %v vs %v", df, p, lo, hi)
				}
			}
		}
	})
}

func TestTTailInvertsTQuantileForRealDF(t *testing.T) {
	for _, df := range []float64{1.5, 3.2, 17.776, 250.5, 1e6} {
		for _, p := range []float64{0.6, 0.95, 0.995, 0.99999} {
			q := tQuantile(p, df)
			if got := tTail(q, df); math.Abs(got-(1-p)) > 1e-12 {
				t.Errorf("df %v: tTail(tQuantile(%v)) = %.15g, want %.15g", df, p, got, 1-p)
			}
			if got := 1 - tTail(-q, df); math.Abs(got-(1-p)) > 1e-12 {
				t.Errorf("df %v: lower tail at -%v = %.15g, want %.15g", df, q, got, 1-p)
			}
		}
	}
}

func TestNormalQuantile(t *testing.T) {
	for _, c := range []struct{ p, want float64 }{
		{0.5, 0},
		{0.95, 1.6448536269514727},
		{0.975, 1.9599639845400542},
		{0.995, 2.5758293035489008},
		{0.025, -1.9599639845400542},
	} {
		if got := NormalQuantile(c.p); math.Abs(got-c.want) > 1e-13 {
			t.Errorf("NormalQuantile(%v) = %.17g, want %.17g", c.p, got, c.want)
		}
	}
}
