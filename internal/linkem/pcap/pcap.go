// Package pcap writes classic libpcap capture files of raw IP packets, the
// format tcpdump -r and Wireshark read: a 24-byte global header, then per
// packet a 16-byte record header and the packet's first snap-length bytes.
// Timestamps have nanosecond resolution (magic 0xa1b23c4d); every field is
// little-endian, which readers recognise from the magic.
package pcap

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// File format constants.
const (
	MagicNanos   = 0xa1b23c4d // nanosecond timestamps
	VersionMajor = 2
	VersionMinor = 4
	// LinkTypeRaw: each packet starts with its IPv4 or IPv6 header, which
	// is what a TUN device without packet information hands over.
	LinkTypeRaw = 101
	// MaxSnapLen is the largest snap length accepted; larger than any
	// packet the emulator carries (MTU at most 9000).
	MaxSnapLen = 65535
	// MinSnapLen keeps at least an IPv4 header.
	MinSnapLen = 20
	// DefaultSnapLen keeps the largest IPv4 header (60) plus the largest
	// TCP header (60): sequence numbers, windows, options and SACK blocks
	// without the payload, so long runs make small files.
	DefaultSnapLen = 128

	globalHeaderLen = 24
	recordHeaderLen = 16
)

// Writer writes one capture file. It does no buffering of its own: give it
// a bufio.Writer. It is not safe for concurrent use.
type Writer struct {
	w    io.Writer
	snap int
	hdr  [recordHeaderLen]byte
}

// NewWriter writes the global header to w. snapLen 0 means DefaultSnapLen.
func NewWriter(w io.Writer, snapLen int) (*Writer, error) {
	if snapLen == 0 {
		snapLen = DefaultSnapLen
	}
	if snapLen < MinSnapLen || snapLen > MaxSnapLen {
		return nil, fmt.Errorf("snap length %d: want %d to %d bytes", snapLen, MinSnapLen, MaxSnapLen)
	}
	var h [globalHeaderLen]byte
	le := binary.LittleEndian
	le.PutUint32(h[0:], MagicNanos)
	le.PutUint16(h[4:], VersionMajor)
	le.PutUint16(h[6:], VersionMinor)
	// h[8:16]: thiszone and sigfigs, 0 (timestamps are UTC).
	le.PutUint32(h[16:], uint32(snapLen))
	le.PutUint32(h[20:], LinkTypeRaw)
	if _, err := w.Write(h[:]); err != nil {
		return nil, fmt.Errorf("write pcap header: %w", err)
	}
	return &Writer{w: w, snap: snapLen}, nil
}

// SnapLen is the most bytes of a packet a record keeps.
func (w *Writer) SnapLen() int { return w.snap }

// WritePacket writes one record: the packet seen at ts, origLen bytes long
// on the wire, of which data holds the first bytes (cut to the snap length
// here if longer).
func (w *Writer) WritePacket(ts time.Time, origLen int, data []byte) error {
	if len(data) > w.snap {
		data = data[:w.snap]
	}
	if origLen < len(data) {
		origLen = len(data)
	}
	le := binary.LittleEndian
	ns := ts.UnixNano()
	le.PutUint32(w.hdr[0:], uint32(ns/1e9))
	le.PutUint32(w.hdr[4:], uint32(ns%1e9))
	le.PutUint32(w.hdr[8:], uint32(len(data)))
	le.PutUint32(w.hdr[12:], uint32(origLen))
	if _, err := w.w.Write(w.hdr[:]); err != nil {
		return fmt.Errorf("write pcap record: %w", err)
	}
	if _, err := w.w.Write(data); err != nil {
		return fmt.Errorf("write pcap record: %w", err)
	}
	return nil
}
