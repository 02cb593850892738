package linkem

import (
	"math"
	"math/bits"
	"math/rand/v2"
)

// jitterModel draws the jitter added to each admitted packet's delay, from
// its own PCG stream (separate from loss's). One value is drawn per admitted
// packet, lost or not, so the jitter sequence does not depend on the loss
// settings either.
//
// Distributions, with scale J = Params.Jitter:
//
//	uniform (and ""): an integer number of ns uniform in [-J, +J]
//	normal:           normal with mean 0 and sigma J, rounded to the ns
//	paretonormal:     netem's pareto-normal table, rescaled so sigma = J (see paretoNormal)
type jitterModel struct {
	src  rand.PCG
	rng  *rand.Rand // wraps src, for NormFloat64
	j    int64      // scale in ns; 0 = no jitter
	dist JitterDist
}

func (m *jitterModel) seed(seed int64) {
	m.src.Seed(uint64(seed), jitterStream)
}

func (m *jitterModel) set(p Params) {
	m.j = max(int64(p.Jitter), 0)
	m.dist = p.JitterDist
}

// draw returns one jitter value in ns (0 when there is no jitter).
func (m *jitterModel) draw() int64 {
	j := m.j
	if j == 0 {
		return 0
	}
	switch m.dist {
	case JitterNormal:
		return int64(math.Round(m.rng.NormFloat64() * float64(j)))
	case JitterParetoNormal:
		return int64(math.Round(paretoNormal[m.src.Uint64()>>(64-paretoNormalBits)] * float64(j)))
	default: // JitterUniform, JitterNone and unknown names
		if j > maxInt64/2-1 {
			j = maxInt64/2 - 1
		}
		hi, _ := bits.Mul64(m.src.Uint64(), uint64(2*j+1))
		return int64(hi) - j
	}
}

const paretoNormalBits = 12 // netem's table has 4096 entries

// paretoNormal is netem's "paretonormal" distribution table, rebuilt the way
// iproute2's netem/paretonormal.c builds it rather than shipped: entry i
// (u = 4i/16384) is
//
//	(normal(u) + 3*pareto(u)) / 4
//
// where normal(u) is the standard normal quantile at the upper end of the
// table's rounding bin, (4i+0.5)/16384, and pareto(u) = ((1-u)^(-1/3) - 1.5)
// * 4/3, capped at 32767/8192 like the int16 table: the quantiles of a normal
// and of a centred Pareto of shape 3, combined at the same u (so it is 25%
// normal and 75% pareto, as the source says, skewed to the right). netem then
// returns sigma*table[rnd]/8192, whose standard deviation is about 0.834*sigma;
// this table is divided by its own standard deviation instead, so that the
// jitter's sigma is Params.Jitter, as for the normal distribution. Its mean is
// slightly negative (about -0.03*sigma), as netem's is, and it ranges from
// about -1.8 to +4.7 sigma.
var paretoNormal = buildParetoNormal()

func buildParetoNormal() *[1 << paretoNormalBits]float64 {
	const (
		tableSize = 16384 // netem's TABLESIZE; every 4th entry is kept
		capValue  = 32767.0 / 8192
	)
	var t [1 << paretoNormalBits]float64
	var sum, sumSq float64
	for k := range t {
		i := 4 * k
		u := (float64(i) + 0.5) / tableSize
		norm := math.Sqrt2 * math.Erfinv(2*u-1)
		par := (1/math.Pow(1-float64(i)/tableSize, 1.0/3) - 1.5) * 4 / 3
		par = min(par, capValue)
		v := (norm + 3*par) / 4
		t[k] = v
		sum += v
		sumSq += v * v
	}
	n := float64(len(t))
	mean := sum / n
	sigma := math.Sqrt(sumSq/n - mean*mean)
	for k := range t {
		t[k] /= sigma
	}
	return &t
}
