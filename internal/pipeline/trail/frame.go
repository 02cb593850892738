package trail

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

const (
	// Magic is the whole file header.
	Magic = "RPLTRL01"
	// HeaderSize is the header's length: Pos 0 is at this file offset.
	HeaderSize = len(Magic)
	// MaxPayload bounds a frame's payload: larger is refused on write and
	// is corruption on read (a torn length must not make a reader allocate
	// gigabytes).
	MaxPayload = 64 << 20
	// frameOverhead is the length and checksum around a payload.
	frameOverhead = 8
	// readBufSize is the Reader's buffer: one pread brings in many records.
	readBufSize = 1 << 20
)

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	// ErrNotTrail marks a file whose header is not a trail's.
	ErrNotTrail = errors.New("not a trail file")
	// ErrClosed marks use of a closed Writer or Reader.
	ErrClosed = errors.New("trail closed")
	// ErrCut marks a Reader whose position is past the end of a trail that
	// a restarted writer cut: reopen from the last position applied.
	ErrCut = errors.New("trail cut below the reader's position")
)

// Pos is a position in a trail: the byte offset just after a record (0 = start, after the file header).
// It counts frame bytes only: the file offset is Pos + HeaderSize.
type Pos int64

// checkHeader validates the first bytes of a file.
func checkHeader(path string, h []byte) error {
	if string(h) != Magic {
		return fmt.Errorf("trail %s: header %q is not %q: %w", path, h, Magic, ErrNotTrail)
	}
	return nil
}

// checkFrame validates a whole frame (length, checksum, payload) and returns
// the op and LSN the caller tracks commits with.
func checkFrame(frame []byte) (Op, uint64, error) {
	if len(frame) < frameOverhead {
		return 0, 0, fmt.Errorf("frame of %d bytes is shorter than its framing: %w", len(frame), ErrCorrupt)
	}
	n := binary.LittleEndian.Uint32(frame)
	if n > MaxPayload {
		return 0, 0, fmt.Errorf("frame length %d exceeds %d: %w", n, MaxPayload, ErrCorrupt)
	}
	if int(n) != len(frame)-frameOverhead {
		return 0, 0, fmt.Errorf("frame length %d does not match its %d bytes: %w", n, len(frame), ErrCorrupt)
	}
	if crc32.Checksum(frame[:4+n], castagnoli) != binary.LittleEndian.Uint32(frame[4+n:]) {
		return 0, 0, fmt.Errorf("frame checksum mismatch: %w", ErrCorrupt)
	}
	var r Record
	if err := decode(frame[4:4+n], &r, false); err != nil {
		return 0, 0, err
	}
	return r.Op, r.LSN, nil
}

// appendFrame appends r's frame to b; on error it returns b as it was.
func appendFrame(b []byte, r *Record) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0) // the length, set once the payload is in
	b = AppendEncoded(b, r)
	n := len(b) - start - 4
	if n > MaxPayload {
		return b[:start], fmt.Errorf("payload of %d bytes exceeds %d: %w", n, MaxPayload, ErrInvalid)
	}
	binary.LittleEndian.PutUint32(b[start:], uint32(n))
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli)), nil
}

// frameState is what scanner.peek found at the current position.
type frameState int

const (
	frameOK       frameState = iota
	framePartial             // fewer bytes than a frame: wait for the rest
	frameBadTail             // checksum fails and nothing follows: possibly still being written
	frameBad                 // checksum fails and more data follows: corruption
	frameTooLarge            // length above MaxPayload: corruption
)

// scanner reads frames from a file through its own buffer, so walking a
// trail costs one pread per buffer, not per record. buf[off:] holds the file
// bytes from pos on.
type scanner struct {
	f   *os.File
	buf []byte
	off int
	pos Pos
}

// fill makes at least need bytes from pos available in buf[off:] if the
// file has them, reporting whether it does.
func (s *scanner) fill(need int) (bool, error) {
	if len(s.buf)-s.off >= need {
		return true, nil
	}
	// Keep only the unread bytes, at the front, and read after them.
	n := copy(s.buf, s.buf[s.off:])
	s.buf = s.buf[:n]
	s.off = 0
	if cap(s.buf) < need {
		nb := make([]byte, n, max(need, readBufSize))
		copy(nb, s.buf)
		s.buf = nb
	}
	m, err := s.f.ReadAt(s.buf[n:cap(s.buf)], int64(HeaderSize)+int64(s.pos)+int64(n))
	s.buf = s.buf[:n+m]
	if err != nil && err != io.EOF {
		return false, err
	}
	return len(s.buf) >= need, nil
}

// peek looks at the frame at pos without consuming it. The frame returned
// aliases the buffer: it is valid until the next fill.
func (s *scanner) peek() ([]byte, frameState, error) {
	ok, err := s.fill(4)
	if err != nil || !ok {
		return nil, framePartial, err
	}
	n := binary.LittleEndian.Uint32(s.buf[s.off:])
	if n > MaxPayload {
		return nil, frameTooLarge, nil
	}
	total := int(n) + frameOverhead
	if ok, err = s.fill(total); err != nil || !ok {
		return nil, framePartial, err
	}
	fr := s.buf[s.off : s.off+total]
	if crc32.Checksum(fr[:4+n], castagnoli) == binary.LittleEndian.Uint32(fr[4+n:]) {
		return fr, frameOK, nil
	}
	more, err := s.fill(total + 1)
	switch {
	case err != nil:
		return nil, framePartial, err
	case more:
		return nil, frameBad, nil
	}
	return nil, frameBadTail, nil
}

// advance consumes a frame of n bytes that peek returned.
func (s *scanner) advance(n int) {
	s.off += n
	s.pos += Pos(n)
}

// dropAhead forgets buffered bytes past pos, so the next fill reads them
// from the file again.
func (s *scanner) dropAhead() {
	s.buf = s.buf[:s.off]
}
