package runner

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func TestBisection(t *testing.T) {
	atLeast := func(x float64) func(float64) bool { return func(v float64) bool { return v >= x } }
	atMost := func(x float64) func(float64) bool { return func(v float64) bool { return v <= x } }
	whole := math.Round
	for _, tc := range []struct {
		name         string
		b            bisection
		passes       func(float64) bool
		probes       []bisectProbe
		found        bool
		answer, fail float64
	}{
		{"the least rate: 19,200 bit/s within 1,200", bisection{lo: 9600, hi: 115200, resolution: 1200, higherBetter: true, round: whole}, atLeast(19200),
			[]bisectProbe{{115200, true}, {9600, false}, {62400, true}, {36000, true}, {22800, true}, {16200, false}, {19500, true}, {17850, false}, {18675, false}},
			true, 19500, 18675},
		{"the largest delay: 100 ms within 50", bisection{lo: 0, hi: 400, resolution: 50}, atMost(100),
			[]bisectProbe{{0, true}, {400, false}, {200, false}, {100, true}, {150, false}},
			true, 100, 150},
		{"the good end misses: nothing in the range keeps the bound", bisection{lo: 9600, hi: 115200, resolution: 1200, higherBetter: true}, atLeast(200000),
			[]bisectProbe{{115200, false}},
			false, 0, 115200},
		{"the bad end keeps it: the whole range does", bisection{lo: 0, hi: 10, resolution: 1}, atMost(20),
			[]bisectProbe{{0, true}, {10, true}},
			true, 10, 0},
		{"at most four probes, the ends included", bisection{lo: 0, hi: 400, resolution: 1, maxProbes: 4}, atMost(100),
			[]bisectProbe{{0, true}, {400, false}, {200, false}, {100, true}},
			true, 100, 200},
		{"adjacent on the grid before the resolution", bisection{lo: 9600, hi: 9602, resolution: 0.1, higherBetter: true, round: whole}, atLeast(9602),
			[]bisectProbe{{9602, true}, {9600, false}, {9601, false}},
			true, 9602, 9601},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.b.run(func(v float64) (bool, error) { return tc.passes(v), nil })
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(out.probes, tc.probes) {
				t.Errorf("probes %v\nwant   %v", out.probes, tc.probes)
			}
			if out.found != tc.found || (tc.found && out.answer != tc.answer) || (out.bracketed && out.fail != tc.fail) {
				t.Errorf("found %v answer %v fail %v (bracketed %v); want %v %v %v", out.found, out.answer, out.fail, out.bracketed, tc.found, tc.answer, tc.fail)
			}
			if out.found && out.bracketed && tc.b.maxProbes == 0 && math.Abs(out.answer-out.fail) > tc.b.resolution && math.Abs(out.answer-out.fail) > 1 {
				t.Errorf("bracket [%v, %v] wider than the resolution %v", out.fail, out.answer, tc.b.resolution)
			}
		})
	}
	stop := errors.New("interrupted")
	n := 0
	out, err := bisection{lo: 0, hi: 400, resolution: 1}.run(func(v float64) (bool, error) {
		if n++; n == 3 {
			return false, stop
		}
		return v <= 100, nil
	})
	if !errors.Is(err, stop) || len(out.probes) != 2 || !out.found || out.answer != 0 || out.fail != 400 {
		t.Errorf("an error stops the search where it is: %v %+v", err, out)
	}
}
