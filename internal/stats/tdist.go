package stats

import "math"

// Student's t and normal quantiles, from the regularized incomplete beta
// function; no tables, no dependencies.

// NormalQuantile returns z with P(Z ≤ z) = p for a standard normal Z.
// p ≤ 0 gives -Inf, p ≥ 1 gives +Inf, NaN gives NaN.
func NormalQuantile(p float64) float64 {
	switch {
	case math.IsNaN(p):
		return math.NaN()
	case p <= 0:
		return math.Inf(-1)
	case p >= 1:
		return math.Inf(1)
	}
	return -math.Sqrt2 * math.Erfcinv(2*p)
}

// TQuantile returns t with P(T ≤ t) = p for Student's t with df degrees of
// freedom: the one-sided quantile, so a two-sided 95 % interval uses
// TQuantile(0.975, n-1). df < 1 means infinitely many degrees of freedom
// (the normal quantile). p ≤ 0 gives -Inf, p ≥ 1 gives +Inf, NaN gives NaN;
// ±Inf too when the quantile lies beyond the float64 range. Accurate to
// about 1e-12 relative.
func TQuantile(p float64, df int) float64 {
	if df < 1 {
		return NormalQuantile(p)
	}
	return tQuantile(p, float64(df))
}

// tQuantile is TQuantile for real df (Welch's degrees of freedom are not
// whole); df ≤ 0 or +Inf gives the normal quantile.
func tQuantile(p, df float64) float64 {
	switch {
	case math.IsNaN(p) || math.IsNaN(df):
		return math.NaN()
	case p <= 0:
		return math.Inf(-1)
	case p >= 1:
		return math.Inf(1)
	case p == 0.5:
		return 0
	case df <= 0 || math.IsInf(df, 1):
		return NormalQuantile(p)
	}
	// Solve tTail(t) = q for t > 0, q the smaller tail, then restore the sign.
	q, sign := 1-p, 1.0
	if p < 0.5 {
		q, sign = p, -1
	}
	// Bracket: tTail falls from 1/2 at t = 0 towards 0.
	lo, hi := 0.0, 1.0
	for i := 0; i < 2100 && tTail(hi, df) > q; i++ {
		lo, hi = hi, hi*2
	}
	// Bisect to machine precision (about 60 halvings of a doubling bracket).
	for i := 0; i < 200; i++ {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if tTail(mid, df) > q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return sign * (lo + (hi-lo)/2)
}

// tTail returns P(T > t) for Student's t with df degrees of freedom
// (df ≤ 0 or +Inf: standard normal).
func tTail(t, df float64) float64 {
	if math.IsNaN(t) || math.IsNaN(df) {
		return math.NaN()
	}
	if df <= 0 || math.IsInf(df, 1) {
		return 0.5 * math.Erfc(t/math.Sqrt2)
	}
	if t < 0 {
		return 1 - tTail(-t, df)
	}
	if math.IsInf(t, 1) {
		return 0
	}
	a := df / 2
	if t > 1e150 {
		// t² would overflow: I_x(a, 1/2) → x^a / (a·B(a, 1/2)) as x → 0,
		// with x ≈ df/t².
		la, _ := math.Lgamma(a)
		lh, _ := math.Lgamma(0.5)
		lah, _ := math.Lgamma(a + 0.5)
		return 0.5 * math.Exp(lah-la-lh+a*(math.Log(df)-2*math.Log(t))) / a
	}
	// P(T > t) = I_x(df/2, 1/2) / 2 with x = df/(df+t²); 1-x is passed
	// separately so that it keeps its precision when t is small.
	t2 := t * t
	return 0.5 * incBeta(a, 0.5, df/(df+t2), t2/(df+t2))
}

// incBeta is the regularized incomplete beta function I_x(a, b) for
// a, b > 0, with y = 1-x given by the caller (Numerical Recipes §6.4:
// the continued fraction, on whichever side converges fast).
func incBeta(a, b, x, y float64) float64 {
	if x <= 0 {
		return 0
	}
	if y <= 0 {
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log(y))
	if x < (a+1)/(a+b+2) {
		return front * betaCF(a, b, x) / a
	}
	return 1 - front*betaCF(b, a, y)/b
}

// betaCF evaluates the continued fraction of the incomplete beta function
// by the modified Lentz method.
func betaCF(a, b, x float64) float64 {
	const (
		maxIter = 100000 // iterations grow like √max(a, b)
		eps     = 1e-16
		tiny    = 1e-300
	)
	clamp := func(v float64) float64 {
		if math.Abs(v) < tiny {
			return tiny
		}
		return v
	}
	qab, qap, qam := a+b, a+1, a-1
	c := 1.0
	d := 1 / clamp(1-qab*x/qap)
	h := d
	for m := 1; m <= maxIter; m++ {
		fm := float64(m)
		m2 := 2 * fm
		aa := fm * (b - fm) * x / ((qam + m2) * (a + m2))
		d = 1 / clamp(1+aa*d)
		c = clamp(1 + aa/c)
		h *= d * c
		aa = -(a + fm) * (qab + fm) * x / ((a + m2) * (qap + m2))
		d = 1 / clamp(1+aa*d)
		c = clamp(1 + aa/c)
		del := d * c
		h *= del
		if math.Abs(del-1) < eps {
			break
		}
	}
	return h
}
