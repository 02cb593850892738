package linkem

import "math/bits"

// serializer is the link's virtual clock: it decides when each accepted
// packet has finished leaving the sender (departEnd), either at a fixed rate
// or at the delivery opportunities of a trace. Packets are serialized one
// after the other in the order they were accepted.
type serializer struct {
	// free is when the link finishes serializing the packets accepted so
	// far; with a rate the exact time is free + frac/rate, 0 <= frac < rate.
	// Carrying the fraction keeps long runs exact (no accumulated rounding)
	// while each returned departEnd is rounded up, so throughput never
	// exceeds the rate.
	free int64
	frac uint64
	rate uint64 // bit/s; 0 = unlimited (when there is no trace)

	tr traceClock
}

// settle rounds the exact end of the link's work up to a whole ns. Called
// before a change of rate or trace, since frac is in units of the old rate;
// the next packet never starts before the last one ended.
func (s *serializer) settle() {
	if s.frac != 0 {
		s.free++
		s.frac = 0
	}
}

// unlimited reports whether packets leave as soon as they are offered (no
// rate, no trace): then there is no queue.
func (s *serializer) unlimited() bool {
	return s.rate == 0 && !s.tr.on
}

// depart schedules a packet of size bytes offered at now and returns when its
// serialization ends. Only call it for packets that are accepted (queued):
// the link is busy with them until the returned time.
func (s *serializer) depart(now int64, size int) int64 {
	if s.tr.on {
		end := s.tr.depart(max(now, s.free), size)
		s.free, s.frac = end, 0
		return end
	}
	if s.rate == 0 {
		return now
	}
	base, frac := s.free, s.frac
	if now > base || (now == base && frac == 0) {
		base, frac = now, 0 // the link is idle
	}
	// size*8 bits take size*8*1e9/rate ns; keep the remainder as frac.
	hi, lo := bits.Mul64(uint64(size)*8, 1_000_000_000)
	lo, carry := bits.Add64(lo, frac, 0)
	hi += carry
	if hi >= s.rate { // quotient would not fit in 64 bits: saturate
		s.free, s.frac = maxInt64, 0
		return maxInt64
	}
	q, r := bits.Div64(hi, lo, s.rate)
	if q >= uint64(maxInt64) || base > maxInt64-int64(q)-1 {
		s.free, s.frac = maxInt64, 0
		return maxInt64
	}
	s.free, s.frac = base+int64(q), r
	if r != 0 {
		return s.free + 1
	}
	return s.free
}
