package emu

import "sync"

// packet is one IP packet in flight inside the emulator. buf holds
// headroom bytes before the packet so TUN writes can prepend the virtio
// header without copying.
type packet struct {
	buf       []byte // headroom + packet
	n         int    // packet length
	readAt    int64  // CLOCK_MONOTONIC ns, read from the first site's device
	deliverAt int64  // CLOCK_MONOTONIC ns
	dst       int    // final destination port
}

func (p *packet) data() []byte { return p.buf[headroom : headroom+p.n] }

// headroom leaves room for the virtio-net header (10 bytes) in front of
// every packet.
const headroom = 16

// packetPool recycles packet buffers of one size (headroom + MTU).
type packetPool struct {
	size int
	pool sync.Pool
}

func newPacketPool(mtu int) *packetPool {
	pp := &packetPool{size: headroom + mtu}
	pp.pool.New = func() any { return &packet{buf: make([]byte, pp.size)} }
	return pp
}

func (pp *packetPool) get() *packet  { return pp.pool.Get().(*packet) }
func (pp *packetPool) put(p *packet) { pp.pool.Put(p) }

// pktQueue is a ring buffer of packets ordered by deliverAt. Without
// reordering, arrivals come in deliverAt order and push is O(1); with
// reordering, push walks back from the tail, which is short because jitter
// only displaces packets by a few positions.
type pktQueue struct {
	ring       []*packet
	head, size int
}

func (q *pktQueue) len() int { return q.size }

func (q *pktQueue) at(i int) *packet { return q.ring[(q.head+i)&(len(q.ring)-1)] }

func (q *pktQueue) set(i int, p *packet) { q.ring[(q.head+i)&(len(q.ring)-1)] = p }

func (q *pktQueue) grow() {
	n := len(q.ring) * 2
	if n == 0 {
		n = 256
	}
	ring := make([]*packet, n)
	for i := 0; i < q.size; i++ {
		ring[i] = q.at(i)
	}
	q.ring, q.head = ring, 0
}

// push inserts p keeping the queue sorted by deliverAt (stable: equal times
// keep arrival order). It reports whether p became the head.
func (q *pktQueue) push(p *packet) bool {
	if q.size == len(q.ring) {
		q.grow()
	}
	i := q.size
	for i > 0 && q.at(i-1).deliverAt > p.deliverAt {
		q.set(i, q.at(i-1))
		i--
	}
	q.set(i, p)
	q.size++
	return i == 0
}

func (q *pktQueue) peek() *packet {
	if q.size == 0 {
		return nil
	}
	return q.ring[q.head]
}

func (q *pktQueue) pop() *packet {
	p := q.ring[q.head]
	q.ring[q.head] = nil
	q.head = (q.head + 1) & (len(q.ring) - 1)
	q.size--
	return p
}
