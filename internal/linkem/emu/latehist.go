package emu

import "math/bits"

// LateHist counts deliveries by lateness (how late the emulator handed a
// piece out after its due time) in fixed buckets: 1 µs wide below 16 µs,
// then eight per power of two (12.5 % wide) up to 2^27 µs (134 s), the
// last bucket holding everything later. It is cumulative and a plain
// array, so two readings subtract to the deliveries between them (a
// phase's own histogram) and recording costs an index computation and an
// increment under the direction's lock, without allocation.
type LateHist [LateBuckets]uint64

// LateBuckets is the number of buckets of a LateHist.
const LateBuckets = 16 + (27-4)*8

// lateBucket returns the bucket of a lateness of ns nanoseconds.
func lateBucket(ns int64) int {
	us := uint64(max(ns, 0)) / 1000
	if us < 16 {
		return int(us)
	}
	e := bits.Len64(us) - 1 // us in [2^e, 2^(e+1)), e >= 4
	i := 16 + (e-4)*8 + int(us>>(e-3)&7)
	return min(i, LateBuckets-1)
}

// LateBucketUpperUs is the largest lateness (µs, exclusive) bucket i
// holds.
func LateBucketUpperUs(i int) float64 {
	if i < 16 {
		return float64(i + 1)
	}
	e := (i-16)/8 + 4
	sub := (i - 16) % 8
	return float64(uint64(8+sub+1) << (e - 3))
}

func (h *LateHist) record(ns int64) { h[lateBucket(ns)]++ }

// Count is the number of deliveries counted.
func (h *LateHist) Count() uint64 {
	var n uint64
	for _, c := range h {
		n += c
	}
	return n
}

// QuantileUs returns the upper bound (µs) of the bucket holding the q-th
// quantile (0 < q ≤ 1): the lateness at least a share q of the
// deliveries did not exceed, to the bucket's resolution. 0 when empty.
func (h *LateHist) QuantileUs(q float64) float64 {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n) + 0.5)
	rank = min(max(rank, 1), n)
	var seen uint64
	for i, c := range h {
		seen += c
		if seen >= rank {
			return LateBucketUpperUs(i)
		}
	}
	return LateBucketUpperUs(LateBuckets - 1)
}
