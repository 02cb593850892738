package emu

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"replab/internal/linkem"
)

// tcpOptLen is the TCP options of the test frames (timestamps, padded):
// a 32-byte TCP header, as Linux sends.
const tcpOptLen = 12

// tsoFrame builds what a TUN with TSO hands over for a TCP sender: a
// virtio-net header asking for segmentation into mss-byte payloads and a
// TCP/IPv4 super-packet whose checksum field holds the pseudo-header sum
// (NEEDS_CSUM). Payload byte i is byte(i).
func tsoFrame(src, dst netip.Addr, seq uint32, payload, mss int, flags byte) []byte {
	const ipLen, tcpLen = 20, 20 + tcpOptLen
	f := make([]byte, vnetHdrLen+ipLen+tcpLen+payload)
	h := vnetHdr{flags: vnetNeedsCsum, gsoType: gsoTCPv4, hdrLen: ipLen + tcpLen, gsoSize: uint16(mss), csumStart: ipLen, csumOffset: 16}
	if payload <= mss {
		h.gsoType, h.gsoSize = gsoNone, 0
	}
	h.encode(f)
	ip := f[vnetHdrLen:]
	ip[0], ip[8], ip[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	binary.BigEndian.PutUint16(ip[4:], 0xfff0) // an ID that wraps within the frame
	ip[6] = 0x40                               // DF
	s, d := src.As4(), dst.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[10:], ^fold(sum(0, ip[:ipLen])))
	tcp := ip[ipLen:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	binary.BigEndian.PutUint32(tcp[8:], 77)
	tcp[12] = byte(tcpLen/4) << 4
	tcp[13] = flags | 0x10 // ACK
	binary.BigEndian.PutUint16(tcp[14:], 512)
	tcp[20], tcp[21], tcp[22], tcp[23] = 1, 1, 8, 10
	for i := range payload {
		tcp[tcpLen+i] = byte(i)
	}
	binary.BigEndian.PutUint16(tcp[16:], fold(sum(0, ip[12:20])+6+uint64(len(tcp))))
	return f
}

// segmentRef is the kernel's segmentation of a tsoFrame, done the long way:
// segment j with its own headers and a complete TCP checksum.
func segmentRef(frame []byte, j int) []byte {
	h := decodeVnetHdr(frame)
	p := frame[vnetHdrLen:]
	const hdrLen = 20 + 20 + tcpOptLen
	mss := int(h.gsoSize)
	if h.gsoType == gsoNone {
		mss = len(p) - hdrLen
	}
	start := hdrLen + j*mss
	end := min(start+mss, len(p))
	seg := append(append([]byte(nil), p[:hdrLen]...), p[start:end]...)
	last := end == len(p)
	binary.BigEndian.PutUint16(seg[2:], uint16(len(seg)))
	binary.BigEndian.PutUint16(seg[4:], binary.BigEndian.Uint16(p[4:])+uint16(j))
	seg[10], seg[11] = 0, 0
	binary.BigEndian.PutUint16(seg[10:], ^fold(sum(0, seg[:20])))
	tcp := seg[20:]
	binary.BigEndian.PutUint32(tcp[4:], binary.BigEndian.Uint32(p[24:])+uint32(j*mss))
	if j > 0 {
		tcp[13] &^= tcpCWR
	}
	if !last {
		tcp[13] &^= tcpFIN | tcpPSH
	}
	tcp[16], tcp[17] = 0, 0
	binary.BigEndian.PutUint16(tcp[16:], ^fold(sum(sum(0, seg[12:20])+6+uint64(len(tcp)), tcp)))
	return seg
}

// completed is a written frame's packet with its checksum completed, as
// the receiving kernel would.
func completed(t *testing.T, fr []byte) []byte {
	t.Helper()
	f := &frame{buf: fr, n: len(fr)}
	if err := f.parse(); err != nil {
		t.Fatalf("written frame: %v", err)
	}
	out := make([]byte, len(fr))
	n, orig := f.copySegment(out, 0)
	if f.segs != 1 || n != orig {
		t.Fatalf("completed() takes single segments; frame has %d", f.segs)
	}
	return out[:n]
}

func TestFrameSegments(t *testing.T) {
	fr := tsoFrame(addrA, addrB, 1000, 10_000, 1448, tcpPSH|tcpFIN|tcpCWR)
	f := &frame{buf: fr, n: len(fr)}
	if err := f.parse(); err != nil {
		t.Fatal(err)
	}
	// 10 000 bytes of payload in 1448-byte segments: 6 full and one of 1312.
	if f.segs != 7 || f.hdrLen != 52 || f.mss != 1448 {
		t.Fatalf("segs %d, hdrLen %d, mss %d; want 7, 52, 1448", f.segs, f.hdrLen, f.mss)
	}
	want := linkem.Segments{N: 7, Size: 1500, Last: 52 + 1312}
	if got := f.segments(0, 7); got != want {
		t.Errorf("segments(0, 7) = %+v, want %+v", got, want)
	}
	if got, want := f.segments(2, 3), (linkem.Segments{N: 3, Size: 1500, Last: 1500}); got != want {
		t.Errorf("segments(2, 3) = %+v, want %+v", got, want)
	}
	t.Run("every segment, copied for a capture, is the kernel's segmentation with a complete checksum", func(t *testing.T) {
		for j := range 7 {
			buf := make([]byte, 2000)
			n, orig := f.copySegment(buf, j)
			if ref := segmentRef(fr, j); !bytes.Equal(buf[:n], ref) || orig != len(ref) {
				t.Errorf("segment %d:\n got % x\nwant % x", j, buf[:min(n, 64)], ref[:64])
			}
		}
	})
	t.Run("a piece of several segments is a super-packet of exactly those", func(t *testing.T) {
		var hb [maxHeaders]byte
		hdr, payload := f.pieceHeader(hb[:], 2, 3)
		piece := append(append([]byte(nil), hdr...), payload...)
		p := &frame{buf: piece, n: len(piece)}
		if err := p.parse(); err != nil {
			t.Fatal(err)
		}
		if p.segs != 3 || p.mss != 1448 {
			t.Fatalf("piece has %d segments of %d; want 3 of 1448", p.segs, p.mss)
		}
		for j := range 3 {
			buf := make([]byte, 2000)
			n, _ := p.copySegment(buf, j)
			if ref := segmentRef(fr, 2+j); !bytes.Equal(buf[:n], ref) {
				t.Errorf("piece's segment %d differs from the frame's segment %d", j, 2+j)
			}
		}
	})
	t.Run("a piece of one segment is a plain packet that the receiver checksums", func(t *testing.T) {
		var hb [maxHeaders]byte
		hdr, payload := f.pieceHeader(hb[:], 6, 1)
		piece := append(append([]byte(nil), hdr...), payload...)
		if h := decodeVnetHdr(piece); h.gsoType != gsoNone || h.flags != vnetNeedsCsum {
			t.Errorf("header %+v: want no GSO, NEEDS_CSUM", h)
		}
		if got, ref := completed(t, piece), segmentRef(fr, 6); !bytes.Equal(got, ref) {
			t.Errorf("last segment:\n got % x\nwant % x", got[:64], ref[:64])
		}
	})
	t.Run("a frame without GSO is one segment", func(t *testing.T) {
		fr := tsoFrame(addrA, addrB, 5, 100, 1448, 0)
		f := &frame{buf: fr, n: len(fr)}
		if err := f.parse(); err != nil || f.segs != 1 || !f.whole(0, 1) {
			t.Fatalf("parse: %v, %d segments", err, f.segs)
		}
		if got := f.segments(0, 1); got != (linkem.Segments{N: 1, Size: 152}) {
			t.Errorf("segments = %+v", got)
		}
	})
	t.Run("malformed frames are refused", func(t *testing.T) {
		bad := append([]byte(nil), fr...)
		bad[1] = 3 // UDP (legacy UFO)
		short := fr[:vnetHdrLen+10]
		noTCP := append([]byte(nil), fr...)
		noTCP[vnetHdrLen+9] = 17
		for name, b := range map[string][]byte{"GSO type": bad, "short": short, "not TCP": noTCP} {
			if err := (&frame{buf: b, n: len(b)}).parse(); err == nil {
				t.Errorf("%s: parsed", name)
			}
		}
	})
}

// recvFrames reads n written frames from d.
func recvFrames(t *testing.T, d *chanDev, n int) [][]byte {
	t.Helper()
	var out [][]byte
	for range n {
		select {
		case f := <-d.outFrames:
			<-d.out
			out = append(out, f)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d frames written, want %d", len(out), n)
		}
	}
	return out
}

func TestSuperPacketsCrossTheEmulator(t *testing.T) {
	ms := time.Millisecond
	fr := tsoFrame(addrA, addrB, 1000, 5*1448, 1448, tcpPSH)
	t.Run("an unlimited link writes a super-packet whole, as read, once its delay is over", func(t *testing.T) {
		e, devs := newTestEmu(t, []Link{{A: 0, B: 1, Forward: linkem.Params{Delay: 5 * ms}}}, 2)
		start := time.Now()
		devs[0].inFrames <- fr
		got := recvFrames(t, devs[1], 1)
		if d := time.Since(start); d < 5*ms {
			t.Errorf("delivered after %s, before the 5 ms delay", d)
		}
		if !bytes.Equal(got[0], fr) {
			t.Error("the super-packet was changed on the way")
		}
		c := e.Stats()[0].Counters
		if c.OfferedPackets != 5 || c.DeliveredPackets != 5 || c.DeliveredBytes != 5*1500 {
			t.Errorf("counters %+v: want 5 packets of 1500 bytes offered and delivered", c)
		}
	})
	t.Run("a lost segment is cut out: the others arrive, with their own headers", func(t *testing.T) {
		// Gilbert-Elliott with P = R = 1 loses every second segment.
		e, devs := newTestEmu(t, []Link{{A: 0, B: 1, Forward: linkem.Params{GE: &linkem.GilbertElliott{P: 1, R: 1, LossBad: 1}}}}, 2)
		devs[0].inFrames <- fr
		got := recvFrames(t, devs[1], 3)
		for i, j := range []int{0, 2, 4} {
			if p, ref := completed(t, got[i]), segmentRef(fr, j); !bytes.Equal(p, ref) {
				t.Errorf("frame %d is not segment %d", i, j)
			}
		}
		c := e.Stats()[0].Counters
		if c.DroppedLossPackets != 2 || c.DeliveredPackets != 3 {
			t.Errorf("counters %+v: want 2 lost, 3 delivered", c)
		}
	})
	t.Run("at 1 Gbit/s with a 20 µs span a super-packet goes out in pieces, each a super-packet of the segments due by then", func(t *testing.T) {
		// The model cuts it in pairs (12 µs apart, within the span); a
		// delivering thread that wakes late writes the pieces due by then
		// as one, so the cut depends on the machine.
		e, devs := newTestEmuSpan(t, []Link{{A: 0, B: 1, Forward: linkem.Params{RateBps: 1_000_000_000, QueueBytes: 1 << 20}}}, 2, 20*time.Microsecond)
		devs[0].inFrames <- fr
		for next := 0; next < 5; {
			got := recvFrames(t, devs[1], 1)[0]
			f := &frame{buf: got, n: len(got)}
			if err := f.parse(); err != nil || next+f.segs > 5 {
				t.Fatalf("frame after segment %d: %v, %d segments", next, err, f.segs)
			}
			for j := range f.segs {
				buf := make([]byte, 2000)
				k, _ := f.copySegment(buf, j)
				if !bytes.Equal(buf[:k], segmentRef(fr, next+j)) {
					t.Errorf("segment %d is not the super-packet's segment %d", j, next+j)
				}
			}
			next += f.segs
		}
		if c := e.Stats()[0].Counters; c.DeliveredPackets != 5 {
			t.Errorf("delivered %d packets, want 5", c.DeliveredPackets)
		}
	})
	t.Run("at 1 Gbit/s with the default span a 5-packet super-packet (60 µs) goes out whole", func(t *testing.T) {
		e, devs := newTestEmu(t, []Link{{A: 0, B: 1, Forward: linkem.Params{RateBps: 1_000_000_000, QueueBytes: 1 << 20}}}, 2)
		devs[0].inFrames <- fr
		if got := recvFrames(t, devs[1], 1); !bytes.Equal(got[0], fr) {
			t.Error("the super-packet was cut or changed")
		}
		if c := e.Stats()[0].Counters; c.DeliveredPackets != 5 {
			t.Errorf("delivered %d packets, want 5", c.DeliveredPackets)
		}
	})
	t.Run("with no span, segments due at different times go out in order, each frame a run of them", func(t *testing.T) {
		// 1.2 ms apart: one by one, unless the delivering thread wakes
		// that late, which writes the segments due by then as one.
		_, devs := newTestEmuSpan(t, []Link{{A: 0, B: 1, Forward: linkem.Params{RateBps: 10_000_000, QueueBytes: 1 << 20}}}, 2, -1)
		devs[0].inFrames <- fr
		for next := 0; next < 5; {
			got := recvFrames(t, devs[1], 1)[0]
			f := &frame{buf: got, n: len(got)}
			if err := f.parse(); err != nil || next+f.segs > 5 {
				t.Fatalf("frame after segment %d: %v, %d segments", next, err, f.segs)
			}
			for j := range f.segs {
				buf := make([]byte, 2000)
				k, _ := f.copySegment(buf, j)
				if !bytes.Equal(buf[:k], segmentRef(fr, next+j)) {
					t.Errorf("segment %d is not the super-packet's segment %d", j, next+j)
				}
			}
			next += f.segs
		}
	})
	t.Run("segments larger than the link's MTU are dropped", func(t *testing.T) {
		e, devs := newTestEmu(t, []Link{{A: 0, B: 1, Forward: linkem.Params{MTU: 1400}}}, 2)
		devs[0].inFrames <- fr
		devs[0].in <- ipv4(addrA, addrB, 9, 100)
		if p, _ := recv(t, devs[1], 10*time.Second); p[20] != 9 {
			t.Errorf("got packet %d, want the small one (9)", p[20])
		}
		// The frame and the packet come in on channels of their own: the
		// packet can cross before the frame is read. Wait for the drops.
		var dropped uint64
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if dropped = e.Stats()[0].Counters.DroppedOtherPackets; dropped >= 5 {
				break
			}
		}
		if dropped != 5 {
			t.Errorf("dropped %d packets over the MTU, want 5", dropped)
		}
	})
	t.Run("a super-packet crossing two links is cut only where a link needs it", func(t *testing.T) {
		e, devs := newTestEmu(t, []Link{
			{A: 0, B: 1, Forward: linkem.Params{Delay: ms}},
			{A: 1, B: 2, Forward: linkem.Params{GE: &linkem.GilbertElliott{P: 1, R: 1, LossBad: 1}}},
		}, 3)
		devs[0].inFrames <- tsoFrame(addrA, addrC, 1000, 5*1448, 1448, 0)
		recvFrames(t, devs[2], 3)
		for _, s := range e.Stats() {
			if s.From == "b" && s.To == "c" && (s.Counters.DeliveredPackets != 3 || s.Counters.DroppedLossPackets != 2) {
				t.Errorf("b->c counters %+v: want 3 delivered, 2 lost", s.Counters)
			}
		}
	})
}
