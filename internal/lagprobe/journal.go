package lagprobe

import (
	"fmt"
	"sync/atomic"
)

// A writer's journal is a directory of fixed-size chunks indexed by seq.
// Each entry is one 64-bit word, written only by the writer's goroutine and
// read by the watchers:
//
//	bits 63..3  COMMIT-sent time, ns on the probe's clock (≥ 0)
//	bit  2      measured
//	bits 1..0   state: empty (never sent), sent, ok, failed
//
// so a transaction costs 8 bytes while some replica may still need it.
// Chunks every replica has passed are released when the writer starts a
// new chunk.
const (
	chunkBits = 12
	chunkLen  = 1 << chunkBits
	chunkMask = chunkLen - 1

	stEmpty     = 0
	stSent      = 1
	stOK        = 2
	stFailed    = 3
	stMask      = 3
	measuredBit = 4
	timeShift   = 3
)

type chunk [chunkLen]atomic.Uint64

// directory maps chunk index ((seq-1)>>chunkBits) to chunk. The writer
// replaces it when it grows; released slots hold nil.
type directory struct {
	chunks []atomic.Pointer[chunk]
}

// Writer is one writer's journal. Next, Sending and Done must be called
// from one goroutine (the user's), in that order for each transaction.
type Writer struct {
	p  *Probe
	id int

	// Owned by the writer's goroutine.
	next   int64  // last seq issued
	cur    *chunk // chunk holding next
	curIdx int64
	freed  int64 // chunks below this index are released

	// Read by the watchers.
	dir     atomic.Pointer[directory]
	issued  atomic.Int64 // = next
	tracked atomic.Int64 // measured transactions that committed
	lastOK  atomic.Int64 // highest measured seq that committed

	_ [64]byte // keep writers' hot fields off each other's cache lines
}

// ID is the writer's number, the row it updates in replab_lag.
func (w *Writer) ID() int { return w.id }

// Next returns the seq of the writer's next transaction attempt: one more
// than the last. Attempts that never reach COMMIT simply leave a gap.
func (w *Writer) Next() int64 {
	w.next++
	s := w.next
	if (s-1)&chunkMask == 0 {
		w.addChunk((s - 1) >> chunkBits)
	}
	w.issued.Store(s)
	return s
}

// Sending records that seq's COMMIT is about to be sent, at time at
// (Probe.Now, ≥ 0). measured is false in warmup and cooldown: such
// transactions are followed but not counted.
func (w *Writer) Sending(seq, at int64, measured bool) {
	e := w.slot(seq)
	if e == nil {
		return
	}
	v := uint64(max(at, 0))<<timeShift | stSent
	if measured {
		v |= measuredBit
	}
	e.Store(v)
	// Wake watchers waiting for something to look for. The store above
	// and the load of idle pair with the watcher's store of idle and its
	// scan (both sequentially consistent), so one of the two sees the other.
	for _, r := range *w.p.replicas.Load() {
		if r.idle.Load() {
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}
}

// Done records how seq's COMMIT returned: ok, or failed (rolled back or
// unknown). Only ok transactions are counted, even if a failed one turns
// up at a replica.
func (w *Writer) Done(seq int64, ok bool) {
	e := w.slot(seq)
	if e == nil {
		return
	}
	v := e.Load()
	if v&stMask != stSent {
		return // never sent, or already done
	}
	if !ok {
		e.Store(v&^stMask | stFailed)
		return
	}
	e.Store(v&^stMask | stOK)
	if v&measuredBit != 0 {
		w.tracked.Add(1)
		w.lastOK.Store(seq)
	}
}

// slot is the entry of an issued seq, nil when it was released.
func (w *Writer) slot(seq int64) *atomic.Uint64 {
	if seq <= 0 || seq > w.next {
		panic(fmt.Sprintf("lagprobe: writer %d: seq %d was not issued by Next (last %d)", w.id, seq, w.next))
	}
	i := (seq - 1) >> chunkBits
	if i == w.curIdx {
		return &w.cur[(seq-1)&chunkMask]
	}
	c := w.dir.Load().chunks[i].Load()
	if c == nil {
		return nil
	}
	return &c[(seq-1)&chunkMask]
}

// addChunk starts chunk i, first releasing chunks every replica is done
// with.
func (w *Writer) addChunk(i int64) {
	d := w.dir.Load()
	if low := w.p.lowWater(w.id); low > 0 && d != nil {
		for w.freed < i && (w.freed+1)<<chunkBits <= low {
			d.chunks[w.freed].Store(nil)
			w.freed++
		}
	}
	if d == nil || int(i) >= len(d.chunks) {
		n := 16
		if d != nil {
			n = 2 * len(d.chunks)
		}
		nd := &directory{chunks: make([]atomic.Pointer[chunk], n)}
		if d != nil {
			for j := range d.chunks {
				nd.chunks[j].Store(d.chunks[j].Load())
			}
		}
		w.dir.Store(nd)
		d = nd
	}
	c := new(chunk)
	d.chunks[i].Store(c)
	w.cur, w.curIdx = c, i
}

// load reads seq's entry for a watcher; false when the entry was released
// or never allocated.
func (w *Writer) load(seq int64) (uint64, bool) {
	d := w.dir.Load()
	if d == nil || seq <= 0 {
		return 0, false
	}
	i := (seq - 1) >> chunkBits
	if i >= int64(len(d.chunks)) {
		return 0, false
	}
	c := d.chunks[i].Load()
	if c == nil {
		return 0, false
	}
	return c[(seq-1)&chunkMask].Load(), true
}

// lowWater is the highest seq of writer w that no watcher will read again;
// 0 while no replica is watched or one has not polled yet.
func (p *Probe) lowWater(w int) int64 {
	rs := *p.replicas.Load()
	if len(rs) == 0 {
		return 0
	}
	low := int64(1<<63 - 1)
	for _, r := range rs {
		if !r.skip[w] {
			low = min(low, r.low[w].Load())
		}
	}
	if low == 1<<63-1 {
		return 0 // nobody watches w: keep its journal (it is small: nothing tracks it)
	}
	return low
}
