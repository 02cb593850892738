// Package emu moves IP packets between the TUN devices of a lab's sites
// through per-direction link models (package linkem). The devices hand
// over the kernel's offloaded TCP super-packets (GSO/TSO, up to 64 KiB
// behind a virtio-net header) whole: each is timestamped when read, its
// MTU-sized segments run through the model one by one (linkem's
// OfferSegments: every segment its own queue admission, loss draw and
// departure), and the runs of segments the model delivers together are
// written to the destination when due, by one precise-sleeping goroutine
// per direction, as one super-packet each (a run that is not the whole
// super-packet gets its own headers; its payload is written from where it
// was read). Sites not joined by a link are reached over several links.
package emu

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"replab/internal/clock"
	"replab/internal/linkem"
)

// Device is a TUN device opened with IFF_VNET_HDR and TCP segmentation
// offload (OpenTUN): every frame read or written is a virtio-net header
// followed by an IP packet, which may be a TCP super-packet.
type Device interface {
	// Read waits for at least one frame, then reads every frame that is
	// ready without waiting, up to len(bufs): frame i is bufs[i][:sizes[i]].
	// Each buffer holds MaxFrame bytes.
	Read(bufs [][]byte, sizes []int) (int, error)
	// Write writes frames: frame i is its slices in turn. It returns how
	// many were written and the first error.
	Write(frames [][][]byte) (int, error)
	Close() error
}

// Port attaches one site to the emulator.
type Port struct {
	Name string
	Addr netip.Addr
	Dev  Device
	MTU  int // the site's MTU (its packets; super-packets are larger); 0 = linkem.DefaultMTU
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
	// Span is how far apart the delivery times of segments written
	// together may be (see linkem.OfferSegments): 0 means
	// TimerResolution, a negative value none (segments due at the same
	// nanosecond are still written together).
	Span time.Duration
}

// TimerResolution is the default Span: deliveries closer together than
// this are not told apart here anyway. The delivering threads'
// clock_nanosleep wakes 17–30 µs late at the median on this 2-core machine
// and 40–90 µs at the 90th percentile when other work runs, and a
// delivering thread that wakes late writes everything due by then as one.
// Grouping a super-packet's segments due within 100 µs saves a wake-up and
// a write per piece: at 1 Gbit/s (12 µs per 1500-byte packet) pieces of up
// to 9 packets, at 10 Gbit/s (1.2 µs) a whole 64 KiB super-packet; at 100
// Mbit/s and below every packet alone; on a link without a rate, whole.
const TimerResolution = 100 * time.Microsecond

// maxWriteBatch bounds how many frames one pass of a delivering thread
// writes; readBatch how many frames a reader takes per wake-up.
const (
	maxWriteBatch = 64
	readBatch     = 64
)

// Emulator is a running set of links. Its methods are safe for concurrent use.
type Emulator struct {
	ports   []*port
	dirs    []*direction
	byPair  map[[2]int]*direction
	nextHop [][]int // nextHop[at][dst] = neighbour to send to, -1 if unreachable
	addrs   map[netip.Addr]int
	pool    *framePool
	span    int64 // ns, >= 0
	tap     atomic.Pointer[TapFunc]
	classes atomic.Pointer[linkem.Classifier] // nil: every packet is ClassOther

	done    chan struct{}
	wg      sync.WaitGroup
	closeMu sync.Once
}

type port struct {
	Port
	unroutable atomic.Uint64 // frames read that no link can carry (IPv6, unknown or own address, malformed)
	writeErrs  atomic.Uint64
}

type direction struct {
	from, to int
	mu       sync.Mutex
	model    *linkem.Direction
	q        pieceQueue
	pieces   []linkem.Piece // OfferSegments' scratch, under mu
	wake     chan struct{}
	late     *hdrhistogram.Histogram // delivery lateness, ns, since start
	overflow uint64                  // segments dropped because maxInFlightBytes was reached
	lateWin  *hdrhistogram.Histogram // since the last Window call
	lateHist LateHist                // delivery lateness since start, in fixed buckets (DirStats.LateHist)
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
	e.pool = newFramePool(mtu)
	switch {
	case cfg.Span == 0:
		e.span = int64(TimerResolution)
	case cfg.Span > 0:
		e.span = int64(cfg.Span)
	}
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
	frames := make([]*frame, readBatch)
	bufs := make([][]byte, readBatch)
	sizes := make([]int, readBatch)
	for j := range frames {
		frames[j] = e.pool.getLarge()
		bufs[j] = frames[j].buf
	}
	for {
		n, err := pt.Dev.Read(bufs, sizes)
		if err != nil {
			if e.closed() || errors.Is(err, os.ErrClosed) {
				return
			}
			pt.unroutable.Add(1)
			continue
		}
		now := clock.Now()
		var woke [8]*direction // directions to wake after this batch (small, deduplicated)
		nw := 0
		for j := 0; j < n; j++ {
			f := frames[j]
			f.n = sizes[j]
			if s := e.pool.copySmall(f); s != nil {
				f = s // the large buffer stays for the next read
			} else {
				frames[j] = e.pool.getLarge()
				bufs[j] = frames[j].buf
			}
			d := -1
			if f.parse() == nil {
				d = e.route(i, f.pkt())
				f.class = e.classes.Load().Classify(f.pkt())
			}
			if d < 0 {
				pt.unroutable.Add(1)
				f.unref()
				continue
			}
			f.dst, f.readAt = d, now
			dir := e.byPair[[2]int{i, e.nextHop[i][d]}]
			if e.offer(dir, f, 0, f.segs, now) && nw < len(woke) && (nw == 0 || woke[nw-1] != dir) {
				woke[nw] = dir
				nw++
			}
			f.unref() // the reader's reference: the pieces hold theirs
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

// maxInFlightBytes bounds the bytes one direction holds. A shaped link's
// queue is bounded by the model; an unlimited link is not, and when the
// emulator itself is the bottleneck TCP would otherwise park its whole
// window here. Enough for 10 Gbit/s over a 200 ms round trip with a
// one-BDP queue (375 MB).
const maxInFlightBytes = 512 << 20

// offer runs segments [first, first+n) of f through dir's model at now and
// queues the pieces the model delivers, each holding a reference to f. It
// reports whether any was queued.
func (e *Emulator) offer(dir *direction, f *frame, first, n int, now int64) bool {
	dir.mu.Lock()
	if dir.q.bytes >= maxInFlightBytes {
		dir.overflow += uint64(n)
		dir.mu.Unlock()
		return false
	}
	dir.pieces = dir.model.OfferSegments(now, f.segments(first, n), e.span, dir.pieces[:0])
	queued := false
	for _, pc := range dir.pieces {
		if pc.V != linkem.Deliver {
			continue
		}
		f.ref()
		dir.q.push(piece{f: f, first: first + pc.First, n: pc.N, bytes: pc.Bytes, deliverAt: pc.At})
		queued = true
	}
	dir.mu.Unlock()
	return queued
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
	batch := make([]piece, 0, maxWriteBatch)
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
		if due := head.deliverAt; due > now {
			d.mu.Unlock()
			if !sl.Until(due, d.wake, e.done) {
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
			pc := d.q.pop()
			late := now - pc.deliverAt
			_ = d.late.RecordValue(max(late, 1))
			_ = d.lateWin.RecordValue(max(late, 1))
			d.lateHist.record(late)
			d.model.DeliveredSegments(pc.n, pc.bytes, pc.f.class)
			batch = append(batch, pc)
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

// deliver hands due pieces to their destination device, or to the next
// link when the destination is further away.
func (e *Emulator) deliver(d *direction, batch []piece, now int64, w *writer) {
	var woke [8]*direction
	nw := 0
	for _, pc := range batch {
		if pc.f.dst == d.to {
			w.add(pc)
			continue
		}
		next := e.byPair[[2]int{d.to, e.nextHop[d.to][pc.f.dst]}]
		if e.offer(next, pc.f, pc.first, pc.n, now) && nw < len(woke) && (nw == 0 || woke[nw-1] != next) {
			woke[nw] = next
			nw++
		}
		pc.f.unref()
	}
	if w.n > 0 {
		tap := e.tap.Load()
		var writeAt int64
		if tap != nil {
			writeAt = clock.Now()
		}
		if _, err := e.ports[d.to].Dev.Write(w.frames()); err != nil {
			e.ports[d.to].writeErrs.Add(1)
		}
		if tap != nil {
			for _, pc := range w.pcs[:w.n] {
				(*tap)(w.packet(pc), pc.f.readAt, pc.deliverAt, writeAt)
			}
		}
		w.reset()
	}
	for _, n := range woke[:nw] {
		n.signal()
	}
}

// SetClassifier installs the classifier of traffic classes (nil: every
// packet is linkem.ClassOther from now on). Each packet read is
// classified once, and its delivered bytes count in its class on every
// link it crosses (linkem.Counters.ClassBytes).
func (e *Emulator) SetClassifier(c *linkem.Classifier) {
	e.classes.Store(c)
}

// TapFunc sees a packet the emulator has written to its destination
// site's device (or a TCP super-packet: segments written as one): its
// bytes (valid only during the call), when the emulator read it from the
// first site's device, when its last link made it due (its last segment),
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

// writer gathers the pieces one pass delivers to one device: a piece
// that is a whole frame is written as read; another one as its own
// headers (pieceHeader) followed by its payload, in place in the frame.
// Consecutive pieces of one frame are merged first (a thread that woke
// late finds several due at once).
type writer struct {
	pcs  []piece
	n    int
	hdrs [][]byte   // one header buffer per piece
	iov  [][]byte   // two slices per piece
	out  [][][]byte // one frame per piece
	pkt  []byte     // a piece's packet in one buffer, for the tap
}

// maxHeaders is the largest IPv4 and TCP headers behind a virtio-net one.
const maxHeaders = vnetHdrLen + 60 + 60

func newWriter() *writer {
	w := &writer{
		pcs:  make([]piece, maxWriteBatch),
		hdrs: make([][]byte, maxWriteBatch),
		iov:  make([][]byte, 2*maxWriteBatch),
		out:  make([][][]byte, 0, maxWriteBatch),
	}
	for i := range w.hdrs {
		w.hdrs[i] = make([]byte, maxHeaders)
	}
	return w
}

func (w *writer) add(pc piece) {
	if w.n > 0 {
		if last := &w.pcs[w.n-1]; last.f == pc.f && last.first+last.n == pc.first {
			last.n += pc.n
			last.bytes += pc.bytes
			last.deliverAt = max(last.deliverAt, pc.deliverAt)
			pc.f.unref()
			return
		}
	}
	w.pcs[w.n] = pc
	w.n++
}

// frames returns what to write.
func (w *writer) frames() [][][]byte {
	w.out = w.out[:0]
	for i, pc := range w.pcs[:w.n] {
		f := pc.f
		if f.whole(pc.first, pc.n) {
			w.iov[2*i] = f.buf[:f.n]
			w.out = append(w.out, w.iov[2*i:2*i+1])
			continue
		}
		w.iov[2*i], w.iov[2*i+1] = f.pieceHeader(w.hdrs[i], pc.first, pc.n)
		w.out = append(w.out, w.iov[2*i:2*i+2])
	}
	return w.out
}

// packet returns pc's IP packet, valid until the next call.
func (w *writer) packet(pc piece) []byte {
	f := pc.f
	if f.whole(pc.first, pc.n) {
		return f.pkt()
	}
	var hb [maxHeaders]byte
	hdr, payload := f.pieceHeader(hb[:], pc.first, pc.n)
	w.pkt = append(append(w.pkt[:0], hdr[vnetHdrLen:]...), payload...)
	return w.pkt
}

// reset releases the pieces written.
func (w *writer) reset() {
	for i := range w.pcs[:w.n] {
		w.pcs[i].f.unref()
		w.pcs[i] = piece{}
	}
	w.n = 0
}
