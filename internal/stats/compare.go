package stats

import (
	"fmt"
	"math"
)

// Comparing two configurations' repetitions: the ratio of their means and
// whether the difference is more than chance (Welch's t-test, which does not
// assume equal variances).

// Diff compares B against A (the baseline).
type Diff struct {
	// Ratio is mean(B)/mean(A): 1.25 means B is 25 % higher. 1 when both
	// means are 0; 0 when only A's is (the ratio is undefined), so that it
	// always encodes as JSON.
	Ratio float64 `json:"ratio"`
	// Significant reports whether the means differ at the confidence level
	// asked for (PValue < 1-level).
	Significant bool `json:"significant"`
	// Method says how the verdict was reached, in words, e.g.
	// "Welch's t-test (t = 1.86, df = 17.8)", or why there was no test.
	Method string `json:"method"`
	// PValue is the two-sided p-value: the probability of a difference at
	// least this large if the true means were equal. 1 when untested.
	PValue float64 `json:"p_value"`
}

// CompareMeans compares the repetitions b against a at a confidence level
// (e.g. 0.95; outside (0, 1): DefaultLevel) with Welch's t-test. NaN and
// ±Inf values are skipped. With fewer than two values on either side there
// is no spread to test against: the difference is not significant, PValue
// is 1, and Method says so. With no spread on either side (constant values)
// any difference is significant (PValue 0) and equal means are not (1).
func CompareMeans(a, b []float64, level float64) Diff {
	return compare(describe(a), describe(b), validLevel(level))
}

// CompareCIs is CompareMeans from two summaries (Mean, StdDev and N, as in
// summary.json) instead of the raw repetitions. Each CI's own Level does not
// matter; level is the comparison's.
func CompareCIs(a, b CI, level float64) Diff {
	return compare(fromCI(a), fromCI(b), validLevel(level))
}

func fromCI(c CI) sample {
	s := sample{n: max(c.N, 0), mean: c.Mean}
	if s.n >= 2 && finite(c.StdDev) {
		s.sd = math.Abs(c.StdDev)
	}
	if !finite(s.mean) {
		s.mean = 0
	}
	return s
}

func compare(a, b sample, level float64) Diff {
	d := Diff{Ratio: ratio(b.mean, a.mean), PValue: 1}
	switch {
	case a.n < 2 || b.n < 2:
		d.Method = fmt.Sprintf("not tested: A has %s and B has %s; a test needs at least 2 on each side",
			plural(a.n, "value"), plural(b.n, "value"))
		return d
	}
	va := a.sd * a.sd / float64(a.n) // squared standard errors
	vb := b.sd * b.sd / float64(b.n)
	if va+vb == 0 {
		if a.mean != b.mean {
			d.Significant, d.PValue = true, 0
		}
		d.Method = "exact: no spread on either side"
		return d
	}
	t := (b.mean - a.mean) / math.Sqrt(va+vb)
	// Welch–Satterthwaite degrees of freedom; at least min(nA, nB)-1.
	df := (va + vb) * (va + vb) / (va*va/float64(a.n-1) + vb*vb/float64(b.n-1))
	d.PValue = min(1, 2*tTail(math.Abs(t), df))
	d.Significant = d.PValue < 1-level
	d.Method = fmt.Sprintf("Welch's t-test (t = %.3g, df = %.1f)", t, df)
	return d
}

// ratio is num/den, 1 for 0/0 and 0 for x/0 (or an overflow).
func ratio(num, den float64) float64 {
	switch {
	case den != 0:
		if r := num / den; finite(r) {
			return r
		}
		return 0
	case num == 0:
		return 1
	}
	return 0
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
