package linkem

import "math/bits"

// DefaultQueueBytes is the queue limit used when p.QueueBytes == 0: one
// bandwidth-delay product of the round trip, rate * (2*Delay) / 8 bytes
// (assuming a symmetric link), but at least 4*MTU bytes (MTU 0 means
// DefaultMTU). For a trace the rate is the trace's MeanRateBps. An unlimited
// rate (RateBps <= 0 and no trace) has no queue: DefaultQueueBytes returns 0.
func DefaultQueueBytes(p Params) int64 {
	rate := p.RateBps
	if t := validTrace(p.Trace); t != nil {
		rate = traceMeanRateBps(t) // t.MeanRateBps(), robust to a hand-made Trace
	}
	if rate <= 0 {
		return 0
	}
	floor := 4 * int64(effectiveMTU(p))
	rtt := int64(p.Delay)
	if rtt <= 0 {
		return floor
	}
	// bits = rate * 2*Delay(ns) / 1e9; bytes = bits / 8. 128-bit product so
	// that 10 Gbit/s over a delay of hours does not overflow.
	hi, lo := bits.Mul64(uint64(rate), 2*uint64(rtt))
	const div = 8 * 1_000_000_000
	if hi >= div {
		return maxInt64
	}
	bdp, _ := bits.Div64(hi, lo, div)
	if bdp > uint64(maxInt64) {
		return maxInt64
	}
	return max(int64(bdp), floor)
}

const maxInt64 = int64(^uint64(0) >> 1)

// effectiveMTU is p.MTU, or DefaultMTU when it is not positive.
func effectiveMTU(p Params) int {
	if p.MTU <= 0 {
		return DefaultMTU
	}
	return p.MTU
}

// queueLimit is the byte limit of the drop-tail queue: p.QueueBytes, or
// DefaultQueueBytes when it is not positive. 0 means no limit.
func queueLimit(p Params) int64 {
	if p.QueueBytes > 0 {
		return p.QueueBytes
	}
	return DefaultQueueBytes(p)
}

// inflight is one accepted packet still being serialized: it occupies size
// bytes of the queue until end (ns).
type inflight struct {
	end  int64
	size int64
}

// backlog is the byte-limited drop-tail queue's contents: a FIFO of the
// accepted packets whose serialization has not finished, as a ring buffer
// that grows (doubling) only when full, so steady state does not allocate.
// Packets leave in the order they entered, and their end times never
// decrease, so popping from the head is enough.
type backlog struct {
	buf   []inflight // len(buf) is a power of two, or 0
	head  int        // index of the oldest entry
	n     int        // number of entries
	bytes int64      // sum of the entries' sizes
}

// drain removes the packets whose serialization has finished by now: a
// packet counts fully until its end time and not at all from then on.
func (q *backlog) drain(now int64) {
	mask := len(q.buf) - 1
	for q.n > 0 && q.buf[q.head].end <= now {
		q.bytes -= q.buf[q.head].size
		q.head = (q.head + 1) & mask
		q.n--
	}
}

// push appends a packet that occupies size bytes until end.
func (q *backlog) push(end, size int64) {
	if q.n == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = inflight{end: end, size: size}
	q.n++
	q.bytes += size
}

func (q *backlog) grow() {
	n := 2 * len(q.buf)
	if n == 0 {
		n = 64
	}
	buf := make([]inflight, n)
	for i := 0; i < q.n; i++ {
		buf[i] = q.buf[(q.head+i)&(len(q.buf)-1)]
	}
	q.buf, q.head = buf, 0
}
