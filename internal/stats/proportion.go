package stats

import "math"

// Wilson returns the Wilson score interval for a proportion: k successes
// in n trials, at two-sided confidence level (DefaultLevel outside
// (0, 1)). Unlike the normal approximation it stays inside [0, 1] and
// keeps a width when k is 0 or n (Wilson 1927; Brown, Cai and DasGupta
// 2001 recommend it). n may be an effective sample size (a real: n
// divided by a design effect), k scaled with it. With n ≤ 0 it returns
// [0, 1].
func Wilson(k, n, level float64) (lo, hi float64) {
	if n <= 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, 1
	}
	k = min(max(k, 0), n)
	z := NormalQuantile(twoSided(validLevel(level)))
	p := k / n
	z2n := z * z / n
	centre := (p + z2n/2) / (1 + z2n)
	half := z / (1 + z2n) * math.Sqrt(p*(1-p)/n+z2n/(4*n))
	lo, hi = max(centre-half, 0), min(centre+half, 1)
	// At k = 0 (k = n) the bound is 0 (1) exactly; rounding must not move it.
	if k == 0 {
		lo = 0
	}
	if k == n {
		hi = 1
	}
	return lo, hi
}
