package emu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"replab/internal/linkem"
)

// A frame is what a TUN device opened with IFF_VNET_HDR reads and writes:
// a virtio-net header (struct virtio_net_hdr, 10 bytes, native byte
// order) and an IP packet. With TCP segmentation offload on, the packet
// may be a super-packet of up to 64 KiB that the header says how to cut
// into MTU-sized segments (gso_size payload bytes each, headers repeated);
// the emulator never cuts it further than the link model asks.
const (
	vnetHdrLen = 10
	// MaxFrame is the largest frame a device reads: the header and the
	// largest IPv4 packet.
	MaxFrame = vnetHdrLen + 65535

	vnetNeedsCsum = 1 // flags: the checksum from csumStart is left to the receiver
	gsoNone       = 0 // gsoType values (VIRTIO_NET_HDR_GSO_*)
	gsoTCPv4      = 1
	gsoECN        = 0x80

	tcpFIN = 0x01
	tcpPSH = 0x08
	tcpCWR = 0x80
)

// vnetHdr is struct virtio_net_hdr.
type vnetHdr struct {
	flags, gsoType                         uint8
	hdrLen, gsoSize, csumStart, csumOffset uint16
}

func decodeVnetHdr(b []byte) vnetHdr {
	return vnetHdr{
		flags: b[0], gsoType: b[1],
		hdrLen:     binary.NativeEndian.Uint16(b[2:]),
		gsoSize:    binary.NativeEndian.Uint16(b[4:]),
		csumStart:  binary.NativeEndian.Uint16(b[6:]),
		csumOffset: binary.NativeEndian.Uint16(b[8:]),
	}
}

func (h vnetHdr) encode(b []byte) {
	b[0], b[1] = h.flags, h.gsoType
	binary.NativeEndian.PutUint16(b[2:], h.hdrLen)
	binary.NativeEndian.PutUint16(b[4:], h.gsoSize)
	binary.NativeEndian.PutUint16(b[6:], h.csumStart)
	binary.NativeEndian.PutUint16(b[8:], h.csumOffset)
}

// frame is one frame in flight inside the emulator. Its pieces (runs of
// its segments, see linkem.OfferSegments) share it: each holds a
// reference, and the buffer goes back to its pool with the last one.
type frame struct {
	buf    []byte // the frame: buf[:n]
	n      int
	pool   *sync.Pool
	refs   atomic.Int32
	readAt int64 // CLOCK_MONOTONIC ns, read from the first site's device
	dst    int   // final destination port
	class  linkem.Class

	hdr vnetHdr
	// Segmentation, from parse: segs segments of hdrLen header bytes and
	// up to mss payload bytes each (one segment for a frame without GSO).
	segs   int
	hdrLen int // IP + TCP header bytes (GSO frames only)
	ipLen  int // IP header bytes (GSO frames only)
	mss    int // payload bytes per segment (GSO frames only)
}

// pkt is the frame's IP packet.
func (f *frame) pkt() []byte { return f.buf[vnetHdrLen:f.n] }

func (f *frame) ref() { f.refs.Add(1) }

func (f *frame) unref() {
	if f.refs.Add(-1) == 0 {
		f.pool.Put(f)
	}
}

var errBadFrame = errors.New("malformed frame")

// parse reads the frame's virtio-net header and works out its segments.
// A frame without GSO is one segment. A TCP/IPv4 super-packet is
// ceil(payload / gso_size) segments. Other offloads are refused (the
// emulator asks the kernel for TCP/IPv4 segmentation only).
func (f *frame) parse() error {
	if f.n < vnetHdrLen+20 {
		return fmt.Errorf("%w: %d bytes", errBadFrame, f.n)
	}
	f.hdr = decodeVnetHdr(f.buf)
	f.segs, f.hdrLen, f.ipLen, f.mss = 1, 0, 0, 0
	if f.hdr.gsoType == gsoNone {
		return nil
	}
	if f.hdr.gsoType&^gsoECN != gsoTCPv4 {
		return fmt.Errorf("%w: GSO type %#x", errBadFrame, f.hdr.gsoType)
	}
	p := f.pkt()
	ipLen := int(p[0]&0x0f) * 4
	if p[0]>>4 != 4 || ipLen < 20 || p[9] != 6 || len(p) < ipLen+20 {
		return fmt.Errorf("%w: TCP/IPv4 GSO without a TCP/IPv4 header", errBadFrame)
	}
	// The kernel's hdr_len is not always the headers' length: take the
	// TCP header's own.
	tcpLen := int(p[ipLen+12]>>4) * 4
	if tcpLen < 20 || len(p) < ipLen+tcpLen || f.hdr.gsoSize == 0 ||
		int(f.hdr.csumStart) != ipLen || f.hdr.csumOffset != 16 {
		return fmt.Errorf("%w: bad TCP header or GSO fields", errBadFrame)
	}
	f.ipLen, f.hdrLen, f.mss = ipLen, ipLen+tcpLen, int(f.hdr.gsoSize)
	f.segs = max((len(p)-f.hdrLen+f.mss-1)/f.mss, 1)
	return nil
}

// segments describes segments [first, first+n) to the link model.
func (f *frame) segments(first, n int) linkem.Segments {
	if f.segs == 1 {
		return linkem.Segments{N: 1, Size: len(f.pkt())}
	}
	return linkem.Segments{N: n, Size: f.hdrLen + f.mss, Last: f.hdrLen + f.payloadLen(first+n-1, 1)}
}

// payloadLen is the payload bytes of segments [first, first+n).
func (f *frame) payloadLen(first, n int) int {
	total := len(f.pkt()) - f.hdrLen
	return min((first+n)*f.mss, total) - first*f.mss
}

// whole reports whether segments [first, first+n) are the whole frame.
func (f *frame) whole(first, n int) bool { return first == 0 && n == f.segs }

// pieceHeaderLen is the size of the header pieceHeader builds.
func (f *frame) pieceHeaderLen() int { return vnetHdrLen + f.hdrLen }

// pieceHeader writes into dst (at least pieceHeaderLen bytes) the
// virtio-net, IPv4 and TCP headers of segments [first, first+n) of a GSO
// frame, as the kernel's own segmentation would make them: the IPv4 total
// length and header checksum, the IP ID advanced by first, the sequence
// number advanced by first segments, CWR only on the first segment, FIN
// and PSH only on the last, and the TCP checksum field holding the
// pseudo-header sum for the piece's length (the receiver completes it: the
// flag NEEDS_CSUM stays set). A piece of one segment is an ordinary
// packet (no GSO); a longer one stays a super-packet. It returns the
// header and the payload, which stays in the frame's buffer.
func (f *frame) pieceHeader(dst []byte, first, n int) (hdr, payload []byte) {
	p := f.pkt()
	start := f.hdrLen + first*f.mss
	payload = p[start : start+f.payloadLen(first, n)]
	hdr = dst[:f.pieceHeaderLen()]
	h := f.hdr
	if n == 1 {
		h.gsoType, h.gsoSize, h.hdrLen = gsoNone, 0, 0
	} else {
		h.hdrLen = uint16(f.hdrLen)
	}
	h.encode(hdr)
	ip := hdr[vnetHdrLen:]
	copy(ip, p[:f.hdrLen])
	binary.BigEndian.PutUint16(ip[2:], uint16(f.hdrLen+len(payload)))
	binary.BigEndian.PutUint16(ip[4:], binary.BigEndian.Uint16(p[4:])+uint16(first))
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ^fold(sum(0, ip[:f.ipLen])))
	tcp := ip[f.ipLen:]
	binary.BigEndian.PutUint32(tcp[4:], binary.BigEndian.Uint32(p[f.ipLen+4:])+uint32(first*f.mss))
	if first > 0 {
		tcp[13] &^= tcpCWR
	}
	if first+n < f.segs {
		tcp[13] &^= tcpFIN | tcpPSH
	}
	if f.hdr.flags&vnetNeedsCsum != 0 {
		tcpLen := f.hdrLen - f.ipLen + len(payload)
		ps := sum(0, ip[12:20]) + 6 + uint64(tcpLen)
		binary.BigEndian.PutUint16(tcp[16:], fold(ps))
	}
	return hdr, payload
}

// copySegment copies segment j of f into dst, as far as it fits, with
// its checksum completed (the kernel leaves it to the receiver when the
// flag NEEDS_CSUM is set), and returns the bytes copied and the segment's
// length.
func (f *frame) copySegment(dst []byte, j int) (n, orig int) {
	var hb [maxHeaders]byte
	var hdr, payload []byte
	if f.segs == 1 {
		payload = f.pkt()
	} else {
		hdr, payload = f.pieceHeader(hb[:], j, 1)
		hdr = hdr[vnetHdrLen:]
	}
	orig = len(hdr) + len(payload)
	n = copy(dst, hdr)
	n += copy(dst[n:], payload)
	if f.hdr.flags&vnetNeedsCsum == 0 {
		return n, orig
	}
	start, at := int(f.hdr.csumStart), int(f.hdr.csumStart)+int(f.hdr.csumOffset)
	if at+2 > n || start > orig {
		return n, orig
	}
	// The field holds the pseudo-header's sum: the sum from start to the
	// end, folded and inverted, is the checksum.
	var s uint64
	if len(hdr) > start {
		s = sum(sum(0, hdr[start:]), payload) // len(hdr) - start is even: a TCP header
	} else {
		s = sum(0, payload[start-len(hdr):])
	}
	c := ^fold(s)
	if c == 0 && len(payload) > 9 && hdr == nil && payload[9] == 17 {
		c = 0xffff // UDP sends a computed zero as all ones
	}
	binary.BigEndian.PutUint16(dst[at:], c)
	return n, orig
}

// sum adds b as big-endian 16-bit words (the Internet checksum's sum,
// before folding).
func sum(s uint64, b []byte) uint64 {
	for len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

// fold folds a sum to 16 bits with end-around carry.
func fold(s uint64) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// framePool recycles frame buffers in two sizes: MaxFrame for reads and
// super-packets, and the largest MTU's frame for single packets, into
// which small frames are copied so that a queue of ACKs does not hold
// 64 KiB each.
type framePool struct {
	large, small sync.Pool
	smallSize    int
}

func newFramePool(mtu int) *framePool {
	fp := &framePool{smallSize: vnetHdrLen + mtu}
	fp.large.New = func() any { return &frame{buf: make([]byte, MaxFrame), pool: &fp.large} }
	fp.small.New = func() any { return &frame{buf: make([]byte, fp.smallSize), pool: &fp.small} }
	return fp
}

func (fp *framePool) getLarge() *frame {
	f := fp.large.Get().(*frame)
	f.refs.Store(1)
	return f
}

// copySmall returns a small frame holding a copy of f's bytes, or nil when
// they do not fit one.
func (fp *framePool) copySmall(f *frame) *frame {
	if f.n > fp.smallSize {
		return nil
	}
	s := fp.small.Get().(*frame)
	s.refs.Store(1)
	s.n = copy(s.buf, f.buf[:f.n])
	return s
}
