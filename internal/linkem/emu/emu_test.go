package emu

import (
	"errors"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"replab/internal/linkem"
)

// chanDev is a channel-backed Device: the kernel side of a TUN without a
// kernel, so the scheduler and routing are tested in any environment.
// Packets sent on in get a virtio-net header without offloads; frames sent
// on inFrames are read as they are. Written frames arrive on out without
// their header and, when there is room, whole on outFrames.
type chanDev struct {
	in        chan []byte // packets the "kernel" sends into the emulator
	inFrames  chan []byte // frames (header included) the "kernel" sends
	out       chan []byte // packets the emulator wrote
	outFrames chan []byte // the same, as frames
	closed    chan struct{}
	once      sync.Once
}

func newChanDev() *chanDev {
	return &chanDev{in: make(chan []byte, 1024), inFrames: make(chan []byte, 1024),
		out: make(chan []byte, 1024), outFrames: make(chan []byte, 1024), closed: make(chan struct{})}
}

func (d *chanDev) Read(bufs [][]byte, sizes []int) (int, error) {
	select {
	case p := <-d.in:
		clear(bufs[0][:vnetHdrLen])
		sizes[0] = vnetHdrLen + copy(bufs[0][vnetHdrLen:], p)
		return 1, nil
	case f := <-d.inFrames:
		sizes[0] = copy(bufs[0], f)
		return 1, nil
	case <-d.closed:
		return 0, os.ErrClosed
	}
}

func (d *chanDev) Write(frames [][][]byte) (int, error) {
	for _, parts := range frames {
		var f []byte
		for _, b := range parts {
			f = append(f, b...)
		}
		d.out <- f[vnetHdrLen:]
		select {
		case d.outFrames <- f:
		default:
		}
	}
	return len(frames), nil
}

func (d *chanDev) Close() error {
	d.once.Do(func() { close(d.closed) })
	return nil
}

// ipv4 builds a minimal IPv4 header + payload from src to dst; the
// payload's first byte is seq so order can be checked.
func ipv4(src, dst netip.Addr, seq byte, size int) []byte {
	p := make([]byte, size)
	p[0] = 0x45
	s, d := src.As4(), dst.As4()
	copy(p[12:16], s[:])
	copy(p[16:20], d[:])
	p[20] = seq
	return p
}

var (
	addrA = netip.MustParseAddr("198.18.0.1")
	addrB = netip.MustParseAddr("198.18.0.2")
	addrC = netip.MustParseAddr("198.18.0.3")
)

func newTestEmu(t *testing.T, links []Link, n int) (*Emulator, []*chanDev) {
	t.Helper()
	return newTestEmuSpan(t, links, n, 0)
}

// newTestEmuSpan is newTestEmu with Config.Span.
func newTestEmuSpan(t *testing.T, links []Link, n int, span time.Duration) (*Emulator, []*chanDev) {
	t.Helper()
	addrs := []netip.Addr{addrA, addrB, addrC}
	names := []string{"a", "b", "c"}
	var ports []Port
	var devs []*chanDev
	for i := range n {
		d := newChanDev()
		devs = append(devs, d)
		ports = append(ports, Port{Name: names[i], Addr: addrs[i], Dev: d})
	}
	e, err := New(Config{Ports: ports, Links: links, Span: span})
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	t.Cleanup(func() { e.Close() })
	return e, devs
}

func recv(t *testing.T, d *chanDev, within time.Duration) ([]byte, time.Time) {
	t.Helper()
	select {
	case p := <-d.out:
		return p, time.Now()
	case <-time.After(within):
		t.Fatalf("no packet within %s", within)
		return nil, time.Time{}
	}
}

func TestPacketsArriveAfterTheDelayInOrder(t *testing.T) {
	delay := 20 * time.Millisecond
	_, devs := newTestEmu(t, []Link{{A: 0, B: 1, Forward: linkem.Params{Delay: delay}, Reverse: linkem.Params{Delay: delay}}}, 2)
	start := time.Now()
	for i := range 10 {
		devs[0].in <- ipv4(addrA, addrB, byte(i), 100)
	}
	for i := range 10 {
		p, at := recv(t, devs[1], 10*time.Second)
		if p[20] != byte(i) {
			t.Fatalf("packet %d arrived as %d: reordered", i, p[20])
		}
		if at.Sub(start) < delay {
			t.Fatalf("packet %d arrived after %s, before the %s delay", i, at.Sub(start), delay)
		}
	}
}

func TestUnroutablePacketsAreCountedNotDelivered(t *testing.T) {
	e, devs := newTestEmu(t, []Link{{A: 0, B: 1}}, 2)
	devs[0].in <- ipv4(addrA, netip.MustParseAddr("198.18.9.9"), 0, 40) // unknown address
	devs[0].in <- ipv4(addrA, addrA, 0, 40)                             // own address
	v6 := make([]byte, 40)
	v6[0] = 0x60
	devs[0].in <- v6
	deadline := time.Now().Add(10 * time.Second) // a bound, not a tolerance: a busy machine is slow
	for e.Ports()[0].UnroutablePackets < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := e.Ports()[0].UnroutablePackets; got != 3 {
		t.Errorf("unroutable = %d, want 3", got)
	}
	select {
	case p := <-devs[1].out:
		t.Errorf("unroutable packet delivered: %x", p[:20])
	default:
	}
}

func TestSitesWithoutALinkAreReachedThroughTheShortestPath(t *testing.T) {
	ms := time.Millisecond
	// a-b 5 ms, b-c 5 ms, a-c 30 ms: a->c goes through b (10 ms).
	e, devs := newTestEmu(t, []Link{
		{A: 0, B: 1, Forward: linkem.Params{Delay: 5 * ms}, Reverse: linkem.Params{Delay: 5 * ms}},
		{A: 1, B: 2, Forward: linkem.Params{Delay: 5 * ms}, Reverse: linkem.Params{Delay: 5 * ms}},
		{A: 0, B: 2, Forward: linkem.Params{Delay: 30 * ms}, Reverse: linkem.Params{Delay: 30 * ms}},
	}, 3)
	if got := e.Path("a", "c"); len(got) != 3 || got[1] != "b" {
		t.Fatalf("path a->c = %v, want [a b c]", got)
	}
	start := time.Now()
	devs[0].in <- ipv4(addrA, addrC, 1, 100)
	_, at := recv(t, devs[2], 10*time.Second)
	// Never sooner than the two hops' delays (exact); that it went
	// through b, not the 30 ms link, the counters below prove (a busy
	// machine can make any packet late).
	if d := at.Sub(start); d < 10*ms {
		t.Errorf("a->c took %s, less than the 10 ms of the path through b", d)
	}
	for _, s := range e.Stats() {
		through := (s.From == "a" && s.To == "b") || (s.From == "b" && s.To == "c")
		if through != (s.Counters.DeliveredPackets == 1) {
			t.Errorf("%s->%s delivered %d packets", s.From, s.To, s.Counters.DeliveredPackets)
		}
	}
}

func TestDownLinkDropsAndUpResumes(t *testing.T) {
	e, devs := newTestEmu(t, []Link{{A: 0, B: 1}}, 2)
	if err := e.SetParams("a", "b", linkem.Params{Down: true}); err != nil {
		t.Fatal(err)
	}
	devs[0].in <- ipv4(addrA, addrB, 1, 100)
	time.Sleep(20 * time.Millisecond)
	select {
	case <-devs[1].out:
		t.Fatal("a packet crossed a link that is down")
	default:
	}
	if err := e.SetParams("a", "b", linkem.Params{}); err != nil {
		t.Fatal(err)
	}
	devs[0].in <- ipv4(addrA, addrB, 2, 100)
	if p, _ := recv(t, devs[1], 10*time.Second); p[20] != 2 {
		t.Errorf("got packet %d, want 2", p[20])
	}
	c := e.Stats()[0].Counters
	if c.DroppedOtherPackets != 1 || c.DeliveredPackets != 1 {
		t.Errorf("counters %+v: want 1 dropped (down) and 1 delivered", c)
	}
	if err := e.SetParams("a", "x", linkem.Params{}); err == nil {
		t.Error("SetParams on an unknown direction: want an error")
	}
}

func TestNewRejectsBadConfigs(t *testing.T) {
	d := func() Device { return newChanDev() }
	cases := map[string]Config{
		"one port":          {Ports: []Port{{Name: "a", Addr: addrA, Dev: d()}}},
		"duplicate address": {Ports: []Port{{Name: "a", Addr: addrA, Dev: d()}, {Name: "b", Addr: addrA, Dev: d()}}},
		"bad link index":    {Ports: []Port{{Name: "a", Addr: addrA, Dev: d()}, {Name: "b", Addr: addrB, Dev: d()}}, Links: []Link{{A: 0, B: 5}}},
		"link twice":        {Ports: []Port{{Name: "a", Addr: addrA, Dev: d()}, {Name: "b", Addr: addrB, Dev: d()}}, Links: []Link{{A: 0, B: 1}, {A: 1, B: 0}}},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := New(cfg); err == nil {
				t.Error("want an error")
			}
		})
	}
}

func TestQueueKeepsDeliveryOrder(t *testing.T) {
	var q pieceQueue
	times := []int64{5, 3, 9, 3, 1, 7}
	for i, at := range times {
		q.push(piece{deliverAt: at, first: i, n: 1, bytes: 10})
	}
	if q.segs != 6 || q.bytes != 60 {
		t.Errorf("queue holds %d segments, %d bytes; want 6, 60", q.segs, q.bytes)
	}
	var got []int64
	var ids []int
	for q.len() > 0 {
		p := q.pop()
		got = append(got, p.deliverAt)
		ids = append(ids, p.first)
	}
	want := []int64{1, 3, 3, 5, 7, 9}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	// Equal times keep arrival order (stable): the 3 pushed first (id 1) pops first.
	if ids[1] != 1 || ids[2] != 3 {
		t.Errorf("equal deliverAt not stable: ids %v", ids)
	}
	if q.segs != 0 || q.bytes != 0 {
		t.Errorf("empty queue holds %d segments, %d bytes", q.segs, q.bytes)
	}
	// Growing past the initial ring keeps order.
	for i := range 1000 {
		q.push(piece{deliverAt: int64(i)})
	}
	for i := range 1000 {
		if p := q.pop(); p.deliverAt != int64(i) {
			t.Fatalf("after growth: pop %d gave %d", i, p.deliverAt)
		}
	}
}

func TestCloseStopsEverything(t *testing.T) {
	e, _ := newTestEmu(t, []Link{{A: 0, B: 1, Forward: linkem.Params{Delay: time.Hour}}}, 2)
	done := make(chan error)
	go func() { done <- e.Close() }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, os.ErrClosed) {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
}

// TestTapSeesReadDueAndWriteTimes: the tap gets each delivered packet with
// its read time, its due time (read + the link's delay, exactly, on a link
// without rate or jitter) and a write time not before it was due.
func TestTapSeesReadDueAndWriteTimes(t *testing.T) {
	delay := 3 * time.Millisecond
	e, devs := newTestEmu(t, []Link{{A: 0, B: 1, Forward: linkem.Params{Delay: delay}}}, 2)
	type seen struct {
		seq                  byte
		readAt, dueAt, write int64
	}
	got := make(chan seen, 4)
	e.SetTap(func(pkt []byte, readAt, dueAt, writeAt int64) {
		got <- seen{pkt[20], readAt, dueAt, writeAt}
	})
	devs[0].in <- ipv4(addrA, addrB, 7, 100)
	recv(t, devs[1], 10*time.Second)
	var s seen
	select {
	case s = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the tap saw no packet")
	}
	if s.seq != 7 {
		t.Errorf("tap saw packet %d, want 7", s.seq)
	}
	if s.dueAt-s.readAt != int64(delay) {
		t.Errorf("due − read = %d ns, want the delay %d", s.dueAt-s.readAt, int64(delay))
	}
	if s.write < s.dueAt {
		t.Errorf("written %d ns before it was due", s.dueAt-s.write)
	}
	e.SetTap(nil)
	devs[0].in <- ipv4(addrA, addrB, 8, 100)
	recv(t, devs[1], 10*time.Second)
	select {
	case s := <-got:
		t.Errorf("a removed tap saw packet %d", s.seq)
	case <-time.After(10 * time.Millisecond):
	}
}
