package emu

// piece is what a direction holds and delivers: segments [first,
// first+n) of a frame, due at deliverAt (see linkem.OfferSegments). It
// holds a reference to its frame.
type piece struct {
	f         *frame
	first, n  int
	bytes     int   // on-wire bytes of its segments
	deliverAt int64 // CLOCK_MONOTONIC ns
}

// pieceQueue is a ring buffer of pieces ordered by deliverAt. Without
// reordering, arrivals come in deliverAt order and push is O(1); with
// reordering, push walks back from the tail, which is short because jitter
// only displaces pieces by a few positions. It also counts the segments
// and bytes it holds.
type pieceQueue struct {
	ring       []piece
	head, size int
	segs       int
	bytes      int64
}

func (q *pieceQueue) len() int { return q.size }

func (q *pieceQueue) at(i int) *piece { return &q.ring[(q.head+i)&(len(q.ring)-1)] }

func (q *pieceQueue) grow() {
	n := len(q.ring) * 2
	if n == 0 {
		n = 256
	}
	ring := make([]piece, n)
	for i := 0; i < q.size; i++ {
		ring[i] = *q.at(i)
	}
	q.ring, q.head = ring, 0
}

// push inserts p keeping the queue sorted by deliverAt (stable: equal times
// keep arrival order).
func (q *pieceQueue) push(p piece) {
	if q.size == len(q.ring) {
		q.grow()
	}
	i := q.size
	for i > 0 && q.at(i-1).deliverAt > p.deliverAt {
		*q.at(i) = *q.at(i - 1)
		i--
	}
	*q.at(i) = p
	q.size++
	q.segs += p.n
	q.bytes += int64(p.bytes)
}

// peek returns the head, or nil. The pointer is valid until the next push
// or pop.
func (q *pieceQueue) peek() *piece {
	if q.size == 0 {
		return nil
	}
	return &q.ring[q.head]
}

func (q *pieceQueue) pop() piece {
	p := q.ring[q.head]
	q.ring[q.head] = piece{}
	q.head = (q.head + 1) & (len(q.ring) - 1)
	q.size--
	q.segs -= p.n
	q.bytes -= int64(p.bytes)
	return p
}
