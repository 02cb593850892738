package stats

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestCompareMeansWelchKnownResults(t *testing.T) {
	// Wikipedia's Welch's t-test example 1 (t = 2.46, ν ≈ 25.0, p = 0.021).
	a1 := []float64{27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4}
	a2 := []float64{27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4}
	cases := []struct {
		name        string
		a, b        []float64
		level       float64
		p           float64 // from mpmath at 40 digits
		significant bool
		method      string
	}{
		// R: t.test(extra ~ group, data = sleep) → t = -1.8608,
		// df = 17.776, p-value = 0.07939.
		{"sleep at 95 %: not significant", sleep1, sleep2, 0.95, 0.0793941401873581, false, "Welch's t-test (t = 1.86, df = 17.8)"},
		{"sleep at 90 %: significant", sleep1, sleep2, 0.90, 0.0793941401873581, true, "Welch's t-test (t = 1.86, df = 17.8)"},
		{"sleep reversed: same p", sleep2, sleep1, 0.95, 0.0793941401873581, false, "Welch's t-test (t = -1.86, df = 17.8)"},
		{"Wikipedia example 1", a1, a2, 0.95, 0.021378001462867, true, "Welch's t-test (t = 2.46, df = 25.0)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := CompareMeans(c.a, c.b, c.level)
			if !near(d.PValue, c.p, 1e-10) || d.Significant != c.significant || d.Method != c.method {
				t.Errorf("CompareMeans = %+v, want p %v, significant %v, method %q", d, c.p, c.significant, c.method)
			}
			if want := MeanCI(c.b, 0.95).Mean / MeanCI(c.a, 0.95).Mean; !near(d.Ratio, want, 1e-12) {
				t.Errorf("Ratio = %v, want %v", d.Ratio, want)
			}
		})
	}
}

func TestCompareCIsMatchesCompareMeans(t *testing.T) {
	a, b := MeanCI(sleep1, 0.95), MeanCI(sleep2, 0.99)
	got, want := CompareCIs(a, b, 0.95), CompareMeans(sleep1, sleep2, 0.95)
	if !near(got.PValue, want.PValue, 1e-12) || got.Significant != want.Significant || got.Ratio != want.Ratio {
		t.Errorf("CompareCIs = %+v, CompareMeans = %+v", got, want)
	}
}

func TestCompareMeansEdges(t *testing.T) {
	cases := []struct {
		name      string
		a, b      []float64
		want      Diff
		methodHas string
	}{
		{"one repetition of B: not tested", []float64{10, 11, 12}, []float64{20},
			Diff{Ratio: 20.0 / 11, PValue: 1}, "B has 1 value"},
		{"one repetition each: not tested", []float64{10}, []float64{20},
			Diff{Ratio: 2, PValue: 1}, "A has 1 value and B has 1 value"},
		{"empty A: ratio 0, not tested", nil, []float64{1, 2},
			Diff{Ratio: 0, PValue: 1}, "A has 0 values"},
		{"both empty: ratio 1", nil, nil, Diff{Ratio: 1, PValue: 1}, "not tested"},
		{"constant and different: significant", []float64{5, 5, 5}, []float64{6, 6},
			Diff{Ratio: 1.2, Significant: true, PValue: 0}, "no spread"},
		{"constant and equal: not significant", []float64{5, 5}, []float64{5, 5, 5},
			Diff{Ratio: 1, PValue: 1}, "no spread"},
		{"NaN skipped", []float64{5, math.NaN(), 5}, []float64{6, 6, math.Inf(-1)},
			Diff{Ratio: 1.2, Significant: true, PValue: 0}, "no spread"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := CompareMeans(c.a, c.b, 0.95)
			method := d.Method
			d.Method = ""
			if !near(d.Ratio, c.want.Ratio, 1e-12) || d.Significant != c.want.Significant || d.PValue != c.want.PValue {
				t.Errorf("CompareMeans(%v, %v) = %+v, want %+v", c.a, c.b, d, c.want)
			}
			if !strings.Contains(method, c.methodHas) {
				t.Errorf("Method %q lacks %q", method, c.methodHas)
			}
			if _, err := json.Marshal(d); err != nil {
				t.Errorf("does not encode: %v", err)
			}
		})
	}
	t.Run("one side constant: Welch on the other's spread", func(t *testing.T) {
		d := CompareMeans([]float64{10, 10, 10}, []float64{11, 12, 13}, 0.95)
		// t = 2/(1/√3) = 3.464 with 2 df: p = 0.0742.
		if !near(d.PValue, 0.07417990022744858, 1e-9) || d.Significant {
			t.Errorf("CompareMeans = %+v", d)
		}
	})
}
