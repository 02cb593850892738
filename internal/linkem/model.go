package linkem

import (
	"math"
	"math/rand/v2"
)

// Direction models one direction of a link (a->b). It is pure: time is the
// int64 nanoseconds of a monotonic clock passed in by the caller, and it
// neither sleeps nor moves packets; it only decides, for each packet offered,
// whether it is delivered and when. Not safe for concurrent use (callers hold
// a lock).
//
// For each packet, Offer applies, in this order:
//
//  1. Count it as offered.
//  2. Down: if the link is down the packet is dropped (DropDown).
//  3. MTU: a packet larger than MTU bytes (0 means DefaultMTU) is dropped
//     (DropMTU). Down and MTU drops count as DroppedOther.
//  4. Queue admission: the queue is byte-limited and drop-tail. Its backlog
//     at time now is the bytes of the accepted packets whose serialization
//     has not finished by now (a packet counts fully until its departEnd).
//     If backlog + size > limit the packet is dropped (DropQueue) and
//     consumes nothing. The limit is QueueBytes, or DefaultQueueBytes when
//     QueueBytes is 0. An unlimited link (no rate, no trace) has no queue.
//  5. Serialization: the link is a virtual-clock serializer. With a rate,
//     departEnd = max(now, linkFree) + size*8*1e9/RateBps ns and linkFree =
//     departEnd. The division's remainder is carried to the next packet, and
//     each departEnd is rounded up to a whole ns, so throughput never exceeds
//     the rate and long runs do not drift. With a trace, departEnd is the
//     trace opportunity that covers the packet's last byte (see Trace
//     below). Without rate or trace, departEnd = now.
//  6. Loss: the packet is on the wire and has used its serialization time
//     whether it is lost or not. It is lost with probability Loss
//     (independent), or by the Gilbert-Elliott model GE (exactly netem's
//     "loss gemodel p r 1-h 1-k"); when both are set, a packet is lost if
//     either says so. A lost packet is dropped (DropLoss).
//  7. Delay and jitter: deliverAt = departEnd + Delay + j, where j is drawn
//     from JitterDist with scale Jitter: uniform in [-Jitter, +Jitter] (also
//     for "" and unknown names), normal with sigma Jitter, or netem's
//     pareto-normal table rescaled to sigma Jitter. deliverAt is never earlier than departEnd. Without
//     Reorder, deliverAt is also never earlier than the last deliverAt of
//     this direction, so packets never overtake each other (netem's
//     behaviour with rate or jitter and no reorder); with Reorder they may.
//
// Trace (Mahimahi semantics): a Trace replaces RateBps. Its opportunities
// happen at epoch + k*PeriodMs ms + each entry's ms offset, k = 0, 1, 2...
// The epoch is the now of the first Offer when the trace was given to
// NewDirection, and the now of SetParams when a trace is set at runtime (a
// different *Trace; passing the same *Trace again keeps it running).
// Each opportunity carries TraceOpportunityBytes (1500) bytes for the
// packets waiting at it (offered at or before it, after the packets ahead of
// them). A packet departs at the opportunity that covers its last byte, so a
// 3000-byte packet takes two; the bytes left in that opportunity go to the
// next packet if it is waiting by then, and the bytes of an opportunity that
// finds no packet waiting are wasted. A trace with no opportunities is
// ignored.
//
// Randomness comes from math/rand/v2 PCG generators seeded from Seed, one
// stream for loss and one for jitter, so the same Params and the same
// sequence of offers give the same verdicts and times, and changing the
// jitter does not change which packets are lost (or the other way round).
//
// Runtime changes (SetParams) apply to packets offered afterwards: packets
// already scheduled keep their times, and the counters, the queue backlog,
// the serializer's position, the Gilbert-Elliott state and the random
// streams continue (the streams are reseeded only when Seed changes).
//
// A super-packet (the kernel's offloaded TCP segmentation, GSO/TSO) is
// offered with OfferSegments: each of its MTU-sized segments gets exactly
// the fate Offer would give it, and the segments are grouped into pieces
// that a caller hands over in one write each.
//
// Offer does not allocate in steady state: the backlog is a ring buffer
// that grows only when it is full.
type Direction struct {
	p Params

	// Derived from p.
	down    bool
	mtu     int
	limit   int64 // queue limit in bytes; 0 = none
	delay   int64 // ns, >= 0
	reorder bool

	now         int64 // latest now seen; earlier values are raised to it
	lastDeliver int64 // latest deliverAt returned

	ser  serializer
	q    backlog
	loss lossModel
	jit  jitterModel
	c    Counters
}

// NewDirection returns a direction with parameters p whose link is idle and
// whose counters are zero. If p has a trace, its epoch is the now of the first
// Offer.
func NewDirection(p Params) *Direction {
	d := &Direction{now: math.MinInt64, lastDeliver: math.MinInt64}
	d.ser.free = math.MinInt64
	d.jit.rng = rand.New(&d.jit.src)
	d.loss.seed(p.Seed)
	d.jit.seed(p.Seed)
	d.apply(p)
	d.ser.tr.set(p.Trace, 0, true)
	return d
}

// Params returns the parameters in force.
func (d *Direction) Params() Params { return d.p }

// SetParams changes the parameters at time now (runtime change of a running
// link). They apply to packets offered from now on: a new rate or trace
// serializes them after the packets already accepted, which keep their
// times; Down drops new offers and going up again resumes. Counters, the
// queue backlog and packets already scheduled are kept; randomness continues
// (the streams are reseeded only if Seed changed). A different *Trace starts
// its opportunities at now; the same *Trace keeps running.
func (d *Direction) SetParams(now int64, p Params) {
	now = max(now, d.now)
	d.now = now
	if p.Seed != d.p.Seed {
		d.loss.seed(p.Seed)
		d.jit.seed(p.Seed)
	}
	if uint64(max(p.RateBps, 0)) != d.ser.rate || validTrace(p.Trace) != d.ser.tr.trace {
		d.ser.settle()
	}
	d.apply(p)
	d.ser.tr.set(p.Trace, now, false)
}

// apply derives the per-offer fields from p (all but the trace).
func (d *Direction) apply(p Params) {
	d.p = p
	d.down = p.Down
	d.mtu = effectiveMTU(p)
	d.limit = queueLimit(p)
	d.delay = max(int64(p.Delay), 0)
	d.reorder = p.Reorder
	d.ser.rate = uint64(max(p.RateBps, 0))
	d.loss.set(p)
	d.jit.set(p)
}

// Offer decides the fate of one packet of size bytes offered at time now (ns,
// monotonic clock supplied by the caller; never decreasing between calls: an
// earlier now is treated as the latest one seen). On Deliver it returns the
// absolute time (ns) at which the packet must be handed to the receiver;
// otherwise deliverAt is 0 and the verdict says why the packet was dropped.
// The order of the checks is described on Direction.
func (d *Direction) Offer(now int64, size int) (deliverAt int64, v Verdict) {
	if now < d.now {
		now = d.now
	}
	d.now = now
	if d.ser.tr.pending {
		d.ser.tr.epoch, d.ser.tr.pending = now, false
	}
	size = max(size, 0)
	d.c.OfferedPackets++
	d.c.OfferedBytes += uint64(size)
	d.q.drain(now)

	if d.down {
		return d.drop(&d.c.DroppedOtherPackets, &d.c.DroppedOtherBytes, size, DropDown)
	}
	if size > d.mtu {
		return d.drop(&d.c.DroppedOtherPackets, &d.c.DroppedOtherBytes, size, DropMTU)
	}
	if d.limit > 0 && !d.ser.unlimited() && d.q.bytes+int64(size) > d.limit {
		return d.drop(&d.c.DroppedQueuePackets, &d.c.DroppedQueueBytes, size, DropQueue)
	}

	departEnd := d.ser.depart(now, size)
	if departEnd > now {
		d.q.push(departEnd, int64(size))
	}
	d.noteQueue()

	lost := d.loss.lost()
	j := d.jit.draw() // drawn for lost packets too: see jitterModel
	if lost {
		d.c.DroppedLossPackets++
		d.c.DroppedLossBytes += uint64(size)
		return 0, DropLoss
	}

	at := departEnd + d.delay
	if at < departEnd { // overflow
		at = maxInt64
	}
	if sum := at + j; j > 0 && sum < at {
		at = maxInt64
	} else {
		at = sum
	}
	at = max(at, departEnd)
	if !d.reorder {
		at = max(at, d.lastDeliver)
	}
	d.lastDeliver = max(d.lastDeliver, at)
	return at, Deliver
}

func (d *Direction) drop(packets, bytes *uint64, size int, v Verdict) (int64, Verdict) {
	*packets++
	*bytes += uint64(size)
	d.noteQueue()
	return 0, v
}

// noteQueue records the backlog after an offer's decision.
func (d *Direction) noteQueue() {
	d.c.QueueBytes = d.q.bytes
	d.c.QueueHighWaterBytes = max(d.c.QueueHighWaterBytes, d.q.bytes)
}

// Delivered is called by the plumbing when a packet accepted by Offer was
// actually written out; it counts the packet as delivered.
func (d *Direction) Delivered(size int) {
	d.DeliveredSegments(1, size, ClassOther)
}

// Counters returns the cumulative counters. QueueBytes is the backlog after
// the last offer's decision.
func (d *Direction) Counters() Counters { return d.c }
