package runner

import "math"

// bisection is the search of a link search, apart from what a probe
// measures: over [lo, hi], for the best value that passes, assuming that
// passing is monotone in the value — every value better than a passing one
// passes. higherBetter says which way is better (a rate: higher; a delay
// or a loss: lower). round puts a value on the grid the link takes.
type bisection struct {
	lo, hi       float64
	resolution   float64
	higherBetter bool
	round        func(float64) float64
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
	round := b.round
	if round == nil {
		round = func(v float64) float64 { return v }
	}
	try := func(v float64) (bool, error) {
		pass, err := probe(v)
		if err != nil {
			return false, err
		}
		out.probes = append(out.probes, bisectProbe{v, pass})
		return pass, nil
	}
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
	for math.Abs(out.answer-out.fail) > b.resolution {
		mid := round((out.answer + out.fail) / 2)
		if mid == out.answer || mid == out.fail {
			break // adjacent on the link's grid
		}
		pass, err := try(mid)
		if err != nil {
			return out, err
		}
		if pass {
			out.answer = mid
		} else {
			out.fail = mid
		}
	}
	return out, nil
}
