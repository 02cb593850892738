package linkem

// Segments describes a super-packet: what the kernel hands over at once
// when it offloads TCP segmentation (GSO/TSO) and what the link carries as
// N MTU-sized packets. Every segment is Size bytes (headers included),
// except the last, which is Last bytes (Last <= 0 means Size).
type Segments struct {
	N    int
	Size int
	Last int
}

// size returns the bytes of segment i.
func (s Segments) size(i int) int {
	if i == s.N-1 && s.Last > 0 {
		return s.Last
	}
	return s.Size
}

// Bytes is the total of the segments' sizes.
func (s Segments) Bytes() int {
	if s.N <= 0 {
		return 0
	}
	return (s.N-1)*s.Size + s.size(s.N-1)
}

// Piece is a run of consecutive segments of one super-packet that share a
// fate: dropped for the same reason, or delivered together.
type Piece struct {
	First int     // index of the piece's first segment
	N     int     // number of segments
	Bytes int     // their bytes
	V     Verdict // Deliver, or why these segments were dropped
	// At is when the piece is handed to the receiver (Deliver only): the
	// latest deliverAt of its segments. Every segment of the piece has its
	// own deliverAt in [At-maxSpan, At] (see OfferSegments).
	At int64
}

// OfferSegments offers the N segments of a super-packet, all at time now,
// in order. Each segment's fate is exactly what N calls of Offer(now,
// size) would decide: the same MTU check, queue admission (in bytes, each
// segment in turn), serialization time, loss draw (one per segment, so the
// configured loss applies to the segments TCP sent) and jitter draw, and
// the same counters. A super-packet is therefore as exact as its segments
// offered one by one; only the grouping of deliveries below is its own.
//
// It appends the fates to out as pieces, in segment order, and returns
// it. Consecutive dropped segments with the same verdict form one piece.
// Consecutive delivered segments form one piece as long as their
// deliverAt times lie within maxSpan ns of each other; the piece is due at
// the latest of them. So a caller whose timer cannot tell times closer
// than maxSpan apart hands a piece over in one write, each segment at most
// maxSpan after its own time: with maxSpan at or above the whole
// super-packet's serialization time (an unlimited link, or one fast enough
// that an MTU takes less than the timer's resolution), a super-packet
// without losses is one piece; with maxSpan below one MTU's serialization
// time every segment is its own piece, as if offered alone. maxSpan < 0
// counts as 0. A lost segment ends the piece before it and is a piece of
// its own (or of its run of losses), so the segments around it are
// delivered and it is not.
func (d *Direction) OfferSegments(now int64, s Segments, maxSpan int64, out []Piece) []Piece {
	maxSpan = max(maxSpan, 0)
	open := false // out[len(out)-1] may still grow
	var lo int64  // earliest deliverAt of the open delivered piece
	for i := 0; i < s.N; i++ {
		size := s.size(i)
		at, v := d.Offer(now, size)
		if open {
			p := &out[len(out)-1]
			if p.V == v && (v != Deliver || (max(p.At, at)-min(lo, at) <= maxSpan)) {
				p.N++
				p.Bytes += max(size, 0)
				if v == Deliver {
					p.At = max(p.At, at)
					lo = min(lo, at)
				}
				continue
			}
		}
		out = append(out, Piece{First: i, N: 1, Bytes: max(size, 0), V: v, At: at})
		lo, open = at, true
	}
	return out
}

// DeliveredSegments is Delivered for n packets of bytes in all, of
// traffic class c: the plumbing wrote a piece out.
func (d *Direction) DeliveredSegments(n, bytes int, c Class) {
	d.c.DeliveredPackets += uint64(max(n, 0))
	d.c.DeliveredBytes += uint64(max(bytes, 0))
	if c >= NumClasses {
		c = ClassOther
	}
	d.c.ClassBytes[c] += uint64(max(bytes, 0))
}
