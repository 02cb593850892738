package script

import (
	"math"
	"math/rand/v2"
)

// The distributions are pgbench's (its documentation gives the formulas),
// drawn from the user's own source: the same shapes, not pgbench's
// numbers.

// uniform is an integer in [lo, hi], both included.
func uniform(r *rand.Rand, lo, hi int64) int64 {
	return lo + r.Int64N(hi-lo+1)
}

// open01 is a double in (0, 1]: logarithms of it are finite.
func open01(r *rand.Rand) float64 { return 1 - r.Float64() }

// gaussian draws a standard normal by Box-Muller, keeps it only inside
// [-p, p), and maps that interval onto [lo, hi].
func gaussian(r *rand.Rand, lo, hi int64, p float64) int64 {
	var s float64
	for {
		u1, u2 := open01(r), r.Float64()
		s = math.Sqrt(-2*math.Log(u1)) * math.Sin(2*math.Pi*u2)
		if s >= -p && s < p {
			break
		}
	}
	f := (s + p) / (2 * p)
	return lo + int64(float64(hi-lo+1)*f)
}

// exponential draws from an exponential distribution of rate p cut at 1
// (so that exp(-p) of it lies past hi), mapped onto [lo, hi].
func exponential(r *rand.Rand, lo, hi int64, p float64) int64 {
	cut := math.Exp(-p)
	f := -math.Log(cut+(1-cut)*open01(r)) / p
	return lo + int64(float64(hi-lo+1)*f)
}

// zipfian draws rank k of n = hi-lo+1 with probability proportional to
// 1/k^s by rejection (Devroye's method, as pgbench does).
func zipfian(r *rand.Rand, lo, hi int64, s float64) int64 {
	n := float64(hi - lo + 1)
	b := math.Pow(2, s-1)
	for {
		u, v := open01(r), r.Float64()
		x := math.Floor(math.Pow(u, -1/(s-1)))
		t := math.Pow(1+1/x, s-1)
		if v*x*(t-1)/(b-1) <= t/b && x <= n {
			return lo + int64(x) - 1
		}
	}
}

// hashMurmur2 is 64-bit MurmurHash2 of one 8-byte value, as pgbench's
// hash() and hash_murmur2().
func hashMurmur2(v int64, seed uint64) int64 {
	const m = 0xc6a4a7935bd1e995
	const r = 47
	h := seed ^ 0x35253c9ade8f4ca8 // m * 8, wrapped
	k := uint64(v)
	k *= m
	k ^= k >> r
	k *= m
	h ^= k
	h *= m
	h ^= h >> r
	h *= m
	h ^= h >> r
	return int64(h)
}

// hashFNV1a is 64-bit FNV-1a of v's 8 bytes, least significant first,
// starting from the offset basis xor seed, as pgbench's hash_fnv1a().
func hashFNV1a(v int64, seed uint64) int64 {
	const prime = 0x100000001b3
	h := uint64(0xcbf29ce484222325) ^ seed
	u := uint64(v)
	for range 8 {
		h ^= u & 0xff
		h *= prime
		u >>= 8
	}
	return int64(h)
}
