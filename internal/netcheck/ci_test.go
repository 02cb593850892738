package netcheck

import (
	"math"
	"testing"
)

func TestBinomialCI(t *testing.T) {
	// Wilson score intervals; the first four are Newcombe (1998), Table I,
	// method 3, to the 4 decimals published there.
	tests := []struct {
		name          string
		x, n          int
		level         float64
		wantLo, wantH float64
		tol           float64
	}{
		{"81 of 263 at 95%", 81, 263, 0.95, 0.2553, 0.3662, 1e-4},
		{"15 of 148 at 95%", 15, 148, 0.95, 0.0624, 0.1605, 1e-4},
		{"0 of 20 at 95% starts at 0", 0, 20, 0.95, 0, 0.1611, 1e-4},
		{"1 of 29 at 95%", 1, 29, 0.95, 0.0061, 0.1718, 1e-4},
		{"5 of 10 at 95% is symmetric", 5, 10, 0.95, 0.236593, 0.763407, 1e-6},
		{"10 of 10 at 95% ends at 1", 10, 10, 0.95, 0.722467, 1, 1e-6},
		{"50 of 1000 at 99.9%", 50, 1000, 0.999, 0.031754, 0.077886, 1e-6},
		{"0 of 100000 at 99.9%", 0, 100000, 0.999, 0, 0.000108, 1e-6},
		{"1 of 2 at 50%", 1, 2, 0.5, 0.284759, 0.715241, 1e-6},
		{"no trials gives everything", 0, 0, 0.95, 0, 1, 0},
		{"successes above n are clamped", 12, 10, 0.95, 0.722467, 1, 1e-6},
		{"level 1 gives everything", 3, 10, 1, 0, 1, 0},
		{"level 0 gives the point estimate", 3, 10, 0, 0.3, 0.3, 1e-12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := BinomialCI(tt.x, tt.n, tt.level)
			if math.Abs(lo-tt.wantLo) > tt.tol || math.Abs(hi-tt.wantH) > tt.tol {
				t.Errorf("BinomialCI(%d, %d, %v) = [%.6f, %.6f], want [%.6f, %.6f] ± %g",
					tt.x, tt.n, tt.level, lo, hi, tt.wantLo, tt.wantH, tt.tol)
			}
		})
	}
}

func TestBinomialCIWidensWithLevel(t *testing.T) {
	lo95, hi95 := BinomialCI(30, 100, 0.95)
	lo999, hi999 := BinomialCI(30, 100, 0.999)
	if !(lo999 < lo95 && hi999 > hi95) {
		t.Errorf("99.9%% [%v, %v] does not contain 95%% [%v, %v]", lo999, hi999, lo95, hi95)
	}
}
