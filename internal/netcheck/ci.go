package netcheck

import "math"

// BinomialCI returns the Wilson score interval for a proportion with
// successes out of n trials at the given two-sided confidence level (e.g.
// 0.999). With n <= 0 it returns [0, 1]; successes is clamped to [0, n].
func BinomialCI(successes, n int, level float64) (lo, hi float64) {
	if n <= 0 || !(level > 0) {
		if n <= 0 {
			return 0, 1
		}
		p := float64(min(max(successes, 0), n)) / float64(n)
		return p, p
	}
	if level >= 1 {
		return 0, 1
	}
	x := min(max(successes, 0), n)
	z := math.Sqrt2 * math.Erfinv(level)
	nn := float64(n)
	p := float64(x) / nn
	z2 := z * z
	denom := 1 + z2/nn
	center := (p + z2/(2*nn)) / denom
	half := z / denom * math.Sqrt(p*(1-p)/nn+z2/(4*nn*nn))
	lo, hi = max(0, center-half), min(1, center+half)
	if x == 0 {
		lo = 0
	}
	if x == n {
		hi = 1
	}
	return lo, hi
}
