package runner

import "math"

// bisection is the search of a link search, apart from what a probe
// measures: over [lo, hi], for the best value that passes, assuming that
// passing is monotone in the value — every value better than a passing one
// passes. higherBetter says which way is better (a rate: higher; a delay
// or a loss: lower). round puts a value on the grid the link takes.
//
// A saturation search's refinement uses the second half alone (between):
// the load that still scaled passes, the exhaust point fails.
type bisection struct {
	lo, hi       float64
	resolution   float64
	higherBetter bool
	round        func(float64) float64
	// maxProbes caps the probes measured, the range's ends included
	// (always measured); 0: no cap.
	maxProbes int
}

// bisectOutcome is where a bisection ended: found says some value passed,
// answer is the best-placed passing value (the least rate, the largest
// delay); bracketed says a failing value is known next to it, at most the
// resolution away (or the two are adjacent on the grid).
type bisectOutcome struct {
	found, bracketed bool
	answer, fail     float64
	// Probes in the order measured.
	probes []bisectProbe
}

type bisectProbe struct {
	value float64
	pass  bool
}

// run measures the range's good end first (if it fails, nothing in the
// range passes), then its bad end (if it passes, everything does), then
// halves the interval between the best passing and the worst failing
// value until it is no wider than the resolution. probe's error stops the
// search where it is.
func (b bisection) run(probe func(v float64) (bool, error)) (bisectOutcome, error) {
	var out bisectOutcome
	try := out.recorder(probe)
	good, bad := b.lo, b.hi
	if b.higherBetter {
		good, bad = b.hi, b.lo
	}
	pass, err := try(good)
	if err != nil {
		return out, err
	}
	if !pass {
		out.fail, out.bracketed = good, true
		return out, nil
	}
	out.found, out.answer = true, good
	if pass, err = try(bad); err != nil {
		return out, err
	}
	if pass {
		out.answer = bad
		return out, nil
	}
	out.fail, out.bracketed = bad, true
	err = b.narrow(&out, try) // before out is read
	return out, err
}

// between narrows a bracket measured already — pass passed, fail failed —
// by halving it, as run does after the range's ends.
func (b bisection) between(pass, fail float64, probe func(v float64) (bool, error)) (bisectOutcome, error) {
	out := bisectOutcome{found: true, bracketed: true, answer: pass, fail: fail}
	err := b.narrow(&out, out.recorder(probe)) // before out is read
	return out, err
}

// recorder wraps probe to note each answered probe in out.
func (out *bisectOutcome) recorder(probe func(v float64) (bool, error)) func(v float64) (bool, error) {
	return func(v float64) (bool, error) {
		pass, err := probe(v)
		if err != nil {
			return false, err
		}
		out.probes = append(out.probes, bisectProbe{v, pass})
		return pass, nil
	}
}

// narrow probes the middle of the bracket, again and again, until it is no
// wider than the resolution, its ends are adjacent on the grid, or
// maxProbes were measured.
func (b bisection) narrow(out *bisectOutcome, try func(v float64) (bool, error)) error {
	round := b.round
	if round == nil {
		round = func(v float64) float64 { return v }
	}
	for math.Abs(out.answer-out.fail) > b.resolution {
		if b.maxProbes > 0 && len(out.probes) >= b.maxProbes {
			break
		}
		mid := round((out.answer + out.fail) / 2)
		if mid == out.answer || mid == out.fail {
			break // adjacent on the grid
		}
		pass, err := try(mid)
		if err != nil {
			return err
		}
		if pass {
			out.answer = mid
		} else {
			out.fail = mid
		}
	}
	return nil
}
