package stats

import (
	"math"
	"testing"
)

func TestWilson(t *testing.T) {
	tests := []struct {
		name          string
		k, n, level   float64
		wantLo, wantH float64
	}{
		// Reference values: Brown, Cai and DasGupta (2001) and R's
		// prop.test(correct = FALSE).
		{"10 of 100 at 95 %", 10, 100, 0.95, 0.05522914, 0.17436566},
		{"half of 10", 5, 10, 0.95, 0.23659309, 0.76340691},
		{"none of 10 keeps a width", 0, 10, 0.95, 0, 0.27753279},
		{"all of 10 keeps a width", 10, 10, 0.95, 0.72246721, 1},
		{"1 % of 100000 at 99.9 %", 1000, 100000, 0.999, 0.0090164, 0.0110897},
		{"no trials say nothing", 0, 0, 0.95, 0, 1},
		{"a bad level is 95 %", 10, 100, 7, 0.05522914, 0.17436566},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := Wilson(tt.k, tt.n, tt.level)
			tol := 1e-7
			if tt.n == 100000 {
				tol = 1e-5
			}
			if math.Abs(lo-tt.wantLo) > tol || math.Abs(hi-tt.wantH) > tol {
				t.Errorf("Wilson(%v, %v, %v) = [%.8f, %.8f]; want [%.8f, %.8f]", tt.k, tt.n, tt.level, lo, hi, tt.wantLo, tt.wantH)
			}
		})
	}
}
