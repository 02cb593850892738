// Package emu moves IP packets between the TUN devices of a lab's sites
// through per-direction link models (package linkem). Packets are
// timestamped when read, scheduled on the model's virtual clock, and written
// to the destination when due by one precise-sleeping goroutine per
// direction. Sites not joined by a link are reached over several links.
package emu

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/HdrHistogram/hdrhistogram-go"

	"replab/internal/clock"
	"replab/internal/linkem"
)

// Device is a TUN device with batched, offset-aware I/O (the shape of
// golang.zx2c4.com/wireguard/tun.Device).
type Device interface {
	Read(bufs [][]byte, sizes []int, offset int) (int, error)
	Write(bufs [][]byte, offset int) (int, error)
	BatchSize() int
	Close() error
}

// Port attaches one site to the emulator.
type Port struct {
	Name string
	Addr netip.Addr
	Dev  Device
	MTU  int // largest packet the device hands us; 0 = linkem.DefaultMTU
}

// Link joins ports A and B (indices into Config.Ports).
type Link struct {
	A, B             int
	Forward, Reverse linkem.Params // A->B, B->A
}

// Config is what New needs.
type Config struct {
	Ports []Port
	Links []Link
}

// maxWriteBatch bounds how many packets one write call carries.
const maxWriteBatch = 64

// writeBufSize lets the TUN writer coalesce TCP segments (GRO) in place.
const writeBufSize = headroom + 65535

// Emulator is a running set of links. Its methods are safe for concurrent use.
type Emulator struct {
	ports   []*port
	dirs    []*direction
	byPair  map[[2]int]*direction
	nextHop [][]int // nextHop[at][dst] = neighbour to send to, -1 if unreachable
	addrs   map[netip.Addr]int
	pool    *packetPool
	tap     atomic.Pointer[TapFunc]

	done    chan struct{}
	wg      sync.WaitGroup
	closeMu sync.Once
}

type port struct {
	Port
	unroutable atomic.Uint64 // packets read that no link can carry (IPv6, unknown or own address)
	writeErrs  atomic.Uint64
}

type direction struct {
	from, to int
	mu       sync.Mutex
	model    *linkem.Direction
	q        pktQueue
	wake     chan struct{}
	late     *hdrhistogram.Histogram // delivery lateness, ns, since start
	overflow uint64                  // packets dropped because maxInFlight was reached
	lateWin  *hdrhistogram.Histogram // since the last Window call
	capture  atomic.Pointer[Capture] // nil unless the direction is being captured
}

// New builds an emulator; Start runs it.
func New(cfg Config) (*Emulator, error) {
	if len(cfg.Ports) < 2 {
		return nil, errors.New("emulator needs at least two ports")
	}
	e := &Emulator{
		byPair: map[[2]int]*direction{},
		addrs:  map[netip.Addr]int{},
		done:   make(chan struct{}),
	}
	mtu := linkem.DefaultMTU
	for i, p := range cfg.Ports {
		if p.Dev == nil {
			return nil, fmt.Errorf("port %s has no device", p.Name)
		}
		if _, dup := e.addrs[p.Addr]; dup {
			return nil, fmt.Errorf("port %s: address %s used twice", p.Name, p.Addr)
		}
		e.addrs[p.Addr] = i
		if p.MTU == 0 {
			p.MTU = linkem.DefaultMTU
		}
		mtu = max(mtu, p.MTU)
		e.ports = append(e.ports, &port{Port: p})
	}
	e.pool = newPacketPool(mtu)
	for _, l := range cfg.Links {
		if l.A < 0 || l.B < 0 || l.A >= len(e.ports) || l.B >= len(e.ports) || l.A == l.B {
			return nil, fmt.Errorf("link %d<->%d: bad port index", l.A, l.B)
		}
		for _, d := range []struct {
			from, to int
			p        linkem.Params
		}{{l.A, l.B, l.Forward}, {l.B, l.A, l.Reverse}} {
			if e.byPair[[2]int{d.from, d.to}] != nil {
				return nil, fmt.Errorf("link %s<->%s defined twice", e.ports[l.A].Name, e.ports[l.B].Name)
			}
			dir := &direction{
				from: d.from, to: d.to,
				model:   linkem.NewDirection(d.p),
				wake:    make(chan struct{}, 1),
				late:    newLatenessHist(),
				lateWin: newLatenessHist(),
			}
			e.dirs = append(e.dirs, dir)
			e.byPair[[2]int{d.from, d.to}] = dir
		}
	}
	e.nextHop = routes(len(e.ports), e.dirs)
	return e, nil
}

func newLatenessHist() *hdrhistogram.Histogram {
	// 1 ns .. 100 s at 2 significant digits: ~1 % resolution, small.
	return hdrhistogram.New(1, 100e9, 2)
}

// routes computes, for every (at, dst), the neighbour on a path with the
// least total configured delay (fewest hops on ties), so traffic between
// sites without a direct link crosses the links a real WAN path would.
func routes(n int, dirs []*direction) [][]int {
	const inf = int64(1) << 62
	type cost struct{ delay, hops int64 }
	less := func(a, b cost) bool { return a.delay < b.delay || (a.delay == b.delay && a.hops < b.hops) }
	next := make([][]int, n)
	for src := range n {
		dist := make([]cost, n)
		first := make([]int, n)
		seen := make([]bool, n)
		for i := range dist {
			dist[i] = cost{inf, inf}
			first[i] = -1
		}
		dist[src] = cost{}
		for {
			u := -1
			for i := range n {
				if !seen[i] && dist[i].delay < inf && (u < 0 || less(dist[i], dist[u])) {
					u = i
				}
			}
			if u < 0 {
				break
			}
			seen[u] = true
			for _, d := range dirs {
				if d.from != u {
					continue
				}
				c := cost{dist[u].delay + int64(d.model.Params().Delay), dist[u].hops + 1}
				if less(c, dist[d.to]) {
					dist[d.to] = c
					if u == src {
						first[d.to] = d.to
					} else {
						first[d.to] = first[u]
					}
				}
			}
		}
		next[src] = first
	}
	return next
}

// minProcs is the GOMAXPROCS the emulator needs. A scheduler returning
// from clock_nanosleep must find an idle P at once; with GOMAXPROCS equal
// to the core count, a busy goroutine elsewhere in the process (a probe's
// bulk sender, a workload driver) holds it for up to a scheduler slice and
// delivery runs milliseconds late. Extra Ps leave the arbitration to the
// kernel, which wakes a sleeping thread within microseconds.
const minProcs = 8

// Start launches one reader per port and one scheduler per direction.
// It raises the process's GOMAXPROCS to at least minProcs (see there).
func (e *Emulator) Start() {
	if runtime.GOMAXPROCS(0) < minProcs {
		runtime.GOMAXPROCS(minProcs)
	}
	for i := range e.ports {
		e.wg.Add(1)
		go e.readLoop(i)
	}
	for _, d := range e.dirs {
		e.wg.Add(1)
		go e.deliverLoop(d)
	}
}

// Close stops every goroutine and closes the devices. Packets in flight
// are discarded. Running captures are stopped and flushed (their writers
// stay open: they belong to whoever started the capture).
func (e *Emulator) Close() error {
	var errs []error
	e.closeMu.Do(func() {
		close(e.done)
		for _, p := range e.ports {
			if err := p.Dev.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
				errs = append(errs, fmt.Errorf("close %s: %w", p.Name, err))
			}
		}
		e.wg.Wait()
		for _, d := range e.dirs {
			if c := d.capture.Load(); c != nil {
				if _, err := c.Stop(); err != nil {
					errs = append(errs, err)
				}
			}
		}
	})
	return errors.Join(errs...)
}

func (e *Emulator) closed() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

func (e *Emulator) readLoop(i int) {
	defer e.wg.Done()
	pt := e.ports[i]
	batch := max(pt.Dev.BatchSize(), 1)
	pkts := make([]*packet, batch)
	bufs := make([][]byte, batch)
	sizes := make([]int, batch)
	for j := range pkts {
		pkts[j] = e.pool.get()
		bufs[j] = pkts[j].buf
	}
	for {
		n, err := pt.Dev.Read(bufs, sizes, headroom)
		if err != nil {
			if e.closed() || errors.Is(err, os.ErrClosed) {
				return
			}
			// A malformed offload header drops one read, not the link.
			pt.unroutable.Add(1)
			continue
		}
		now := clock.Now()
		var woke [8]*direction // directions to wake after this batch (small, deduplicated)
		nw := 0
		for j := 0; j < n; j++ {
			p := pkts[j]
			p.n = sizes[j]
			d := e.route(i, p.data())
			if d < 0 {
				pt.unroutable.Add(1)
				continue
			}
			p.dst = d
			p.readAt = now
			dir := e.byPair[[2]int{i, e.nextHop[i][d]}]
			if e.offer(dir, p, now) {
				pkts[j] = e.pool.get()
				bufs[j] = pkts[j].buf
				if nw < len(woke) && (nw == 0 || woke[nw-1] != dir) {
					woke[nw] = dir
					nw++
				}
			}
		}
		for _, d := range woke[:nw] {
			d.signal()
		}
	}
}

// route returns the destination port of an IPv4 packet read from port
// from, or -1.
func (e *Emulator) route(from int, pkt []byte) int {
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return -1
	}
	dst, ok := e.addrs[netip.AddrFrom4([4]byte(pkt[16:20]))]
	if !ok || dst == from || e.nextHop[from][dst] < 0 {
		return -1
	}
	return dst
}

// maxInFlight bounds the packets one direction holds. A shaped link's
// queue is bounded by the model; an unlimited link is not, and when the
// emulator itself is the bottleneck TCP would otherwise park its whole
// window here. Enough for 1 Gbit/s over a 600 ms round trip.
const maxInFlight = 65536

// offer runs the model for p entering dir at now; it reports whether the
// emulator kept the packet (false: dropped, caller still owns it).
func (e *Emulator) offer(dir *direction, p *packet, now int64) bool {
	dir.mu.Lock()
	if dir.q.len() >= maxInFlight {
		dir.overflow++
		dir.mu.Unlock()
		return false
	}
	at, v := dir.model.Offer(now, p.n)
	if v != linkem.Deliver {
		dir.mu.Unlock()
		return false
	}
	p.deliverAt = at
	dir.q.push(p)
	dir.mu.Unlock()
	return true
}

func (d *direction) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (e *Emulator) deliverLoop(d *direction) {
	defer e.wg.Done()
	clock.LockThread(0) // for its life: this goroutine only delivers
	sl := clock.NewSleeper()
	batch := make([]*packet, 0, maxWriteBatch)
	w := newWriter()
	for {
		d.mu.Lock()
		head := d.q.peek()
		if head == nil {
			d.mu.Unlock()
			select {
			case <-d.wake:
				continue
			case <-e.done:
				return
			}
		}
		now := clock.Now()
		if head.deliverAt > now {
			d.mu.Unlock()
			if !sl.Until(head.deliverAt, d.wake, e.done) {
				return
			}
			continue
		}
		batch = batch[:0]
		for len(batch) < maxWriteBatch {
			p := d.q.peek()
			if p == nil || p.deliverAt > now {
				break
			}
			d.q.pop()
			late := now - p.deliverAt
			_ = d.late.RecordValue(max(late, 1))
			_ = d.lateWin.RecordValue(max(late, 1))
			d.model.Delivered(p.n)
			batch = append(batch, p)
		}
		d.mu.Unlock()
		if e.closed() {
			return
		}
		if c := d.capture.Load(); c != nil {
			c.record(now, batch)
		}
		e.deliver(d, batch, now, w)
	}
}

// deliver hands due packets to their destination device, or to the next
// link when the destination is further away.
func (e *Emulator) deliver(d *direction, batch []*packet, now int64, w *writer) {
	var woke [8]*direction
	nw := 0
	for _, p := range batch {
		if p.dst == d.to {
			w.add(p)
			continue
		}
		next := e.byPair[[2]int{d.to, e.nextHop[d.to][p.dst]}]
		if e.offer(next, p, now) {
			if nw < len(woke) && (nw == 0 || woke[nw-1] != next) {
				woke[nw] = next
				nw++
			}
		} else {
			e.pool.put(p)
		}
	}
	if w.n > 0 {
		tap := e.tap.Load()
		var writeAt int64
		if tap != nil {
			writeAt = clock.Now()
		}
		if err := w.flush(e.ports[d.to].Dev); err != nil {
			e.ports[d.to].writeErrs.Add(1)
		}
		if tap != nil {
			for _, p := range w.pkts[:w.n] {
				(*tap)(p.data(), p.readAt, p.deliverAt, writeAt)
			}
		}
		for _, p := range w.pkts[:w.n] {
			e.pool.put(p)
		}
		w.reset()
	}
	for _, n := range woke[:nw] {
		n.signal()
	}
}

// TapFunc sees a packet the emulator has written to its destination
// site's device: its bytes (valid only during the call), when the emulator
// read it from the first site's device, when its last link made it due,
// and when the write of its batch began (clock.Now ns). It runs on a
// delivering thread, so it must be quick and must not block.
type TapFunc func(pkt []byte, readAt, dueAt, writeAt int64)

// SetTap installs f (nil removes it). It is for measurements that follow
// single packets through the emulator: where their time goes between the
// sender and the receiver.
func (e *Emulator) SetTap(f TapFunc) {
	if f == nil {
		e.tap.Store(nil)
		return
	}
	e.tap.Store(&f)
}

// writer copies due packets into buffers large enough for the TUN's TCP
// coalescing (GRO), so one write syscall carries many segments.
type writer struct {
	bufs [][]byte
	view [][]byte
	pkts []*packet
	n    int
}

func newWriter() *writer {
	return &writer{
		bufs: make([][]byte, maxWriteBatch),
		view: make([][]byte, 0, maxWriteBatch),
		pkts: make([]*packet, maxWriteBatch),
	}
}

func (w *writer) add(p *packet) {
	if w.bufs[w.n] == nil {
		w.bufs[w.n] = make([]byte, writeBufSize)
	}
	b := w.bufs[w.n][:headroom+p.n]
	copy(b[headroom:], p.data())
	w.view = append(w.view, b)
	w.pkts[w.n] = p
	w.n++
}

func (w *writer) flush(dev Device) error {
	_, err := dev.Write(w.view, headroom)
	return err
}

func (w *writer) reset() {
	w.view = w.view[:0]
	w.n = 0
}
