package main

import (
	"math"
	"slices"

	"replab/bench/internal/benchkit"
)

// errStats summarises measured − configured over samples (ms).
type errStats struct {
	N      int     `json:"samples"`
	MinMs  float64 `json:"min_ms"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func errorStats(samplesMs []float64, configuredMs float64) errStats {
	if len(samplesMs) == 0 {
		return errStats{}
	}
	s := make([]float64, len(samplesMs))
	var sum float64
	for i, x := range samplesMs {
		s[i] = x - configuredMs
		sum += s[i]
	}
	slices.Sort(s)
	return errStats{
		N:      len(s),
		MinMs:  benchkit.Round(s[0], 4),
		MeanMs: benchkit.Round(sum/float64(len(s)), 4),
		P50Ms:  benchkit.Round(percentile(s, 0.50), 4),
		P99Ms:  benchkit.Round(percentile(s, 0.99), 4),
		MaxMs:  benchkit.Round(s[len(s)-1], 4),
	}
}

// scaled multiplies every figure (e.g. by 2 for a round-trip equivalent).
func (e errStats) scaled(k float64) errStats {
	return errStats{N: e.N, MinMs: benchkit.Round(k*e.MinMs, 4), MeanMs: benchkit.Round(k*e.MeanMs, 4), P50Ms: benchkit.Round(k*e.P50Ms, 4),
		P99Ms: benchkit.Round(k*e.P99Ms, 4), MaxMs: benchkit.Round(k*e.MaxMs, 4)}
}

// percentile of sorted s, q in [0,1], linear between closest ranks (as
// netcheck does).
func percentile(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// wilson is the Wilson score interval of proportion p observed over n
// (possibly effective, non-integer) trials at a two-sided level.
func wilson(p, n, level float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	z := math.Sqrt2 * math.Erfinv(level)
	z2 := z * z
	denom := 1 + z2/n
	center := (p + z2/(2*n)) / denom
	half := z / denom * math.Sqrt(p*(1-p)/n+z2/(4*n*n))
	return max(0, center-half), min(1, center+half)
}

// geEffectiveN is the number of independent trials that carry as much
// information about the loss rate as n packets of a Gilbert-Elliott chain
// with transition probabilities p (good->bad) and r (bad->good), when
// loss is exactly the bad state (1-h = 100 %, 1-k = 0 %). The loss
// indicators are then a two-state Markov chain with autocorrelation
// λ^k, λ = 1-p-r, and the variance of the loss fraction is
// π(1-π)/n · (1+λ)/(1-λ): bursts make a sample worth fewer packets.
func geEffectiveN(n int, p, r float64) float64 {
	lambda := 1 - p - r
	if lambda <= -1 || lambda >= 1 {
		return float64(n)
	}
	return float64(n) * (1 - lambda) / (1 + lambda)
}
