package trail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// defaultPoll is how often a waiting Reader looks for new data.
const defaultPoll = 5 * time.Millisecond

// Reader reads a trail from a position, following it as it grows (like tail -f).
// Not safe for concurrent use.
type Reader struct {
	path  string
	s     scanner
	poll  time.Duration
	timer *time.Timer
}

// Open opens path for reading from pos (0 = the first record). It fails if the header is not a trail's.
// from must be a record boundary (a Pos this package returned); any other
// offset reads as corruption, and one past the trail's end makes a waiting
// Next return ErrCut (the trail lost what the caller had seen).
func Open(path string, from Pos) (*Reader, error) {
	if from < 0 {
		return nil, fmt.Errorf("trail %s at %d: negative position", path, from)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trail %s: %w", path, err)
	}
	var h [HeaderSize]byte
	n, err := f.ReadAt(h[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, fmt.Errorf("trail %s: read header: %w", path, err)
	}
	if err := checkHeader(path, h[:n]); err != nil {
		f.Close()
		return nil, err
	}
	return &Reader{path: path, s: scanner{f: f, pos: from}, poll: defaultPoll}, nil
}

// SetPoll sets how often a waiting Next looks for new data; d <= 0 restores
// the default, 5 ms.
func (r *Reader) SetPoll(d time.Duration) {
	if d <= 0 {
		d = defaultPoll
	}
	r.poll = d
}

// Pos is the position after the last record returned (where the next one starts).
func (r *Reader) Pos() Pos { return r.s.pos }

// Close closes the file.
func (r *Reader) Close() error {
	if r.s.f == nil {
		return fmt.Errorf("trail %s: %w", r.path, ErrClosed)
	}
	err := r.s.f.Close()
	r.s.f, r.s.buf, r.s.off = nil, nil, 0
	if r.timer != nil {
		r.timer.Stop()
	}
	if err != nil {
		return fmt.Errorf("trail %s: close: %w", r.path, err)
	}
	return nil
}

// frame returns the complete, checksum-valid frame at the current position,
// or nil if there is none yet. The frame aliases the buffer.
func (r *Reader) frame() ([]byte, error) {
	if r.s.f == nil {
		return nil, fmt.Errorf("trail %s: %w", r.path, ErrClosed)
	}
	fr, state, err := r.s.peek()
	if state != frameOK {
		// Read these bytes again next time: a partial or failing frame at
		// the end may be mid-write, and after an error the caller may retry
		// once a restarted writer has cut the damage.
		r.s.dropAhead()
	}
	if err != nil {
		return nil, fmt.Errorf("trail %s at %d: read: %w", r.path, r.s.pos, err)
	}
	switch state {
	case frameOK:
		return fr, nil
	case frameTooLarge:
		return nil, fmt.Errorf("trail %s at %d: frame length exceeds %d: %w", r.path, r.s.pos, MaxPayload, ErrCorrupt)
	case frameBad:
		return nil, fmt.Errorf("trail %s at %d: frame checksum mismatch: %w", r.path, r.s.pos, ErrCorrupt)
	}
	return nil, nil
}

// TryNext is Next without waiting: ok=false when no complete record is available now.
func (r *Reader) TryNext() (rec Record, end Pos, ok bool, err error) {
	fr, err := r.frame()
	if err != nil || fr == nil {
		return Record{}, r.s.pos, false, err
	}
	if rec, err = Decode(fr[4 : len(fr)-4]); err != nil {
		return Record{}, r.s.pos, false, fmt.Errorf("trail %s at %d: %w", r.path, r.s.pos, err)
	}
	r.s.advance(len(fr))
	return rec, r.s.pos, true, nil
}

// Next returns the next record and the position just after it. When the trail holds no complete record
// past the current position, it waits (polling the file size every poll interval, default 5 ms, see
// SetPoll) until one is there or ctx is done (then ctx.Err()). A partial frame at the end is waited for,
// never returned; a frame with a bad checksum that is followed by more data is an error naming the position.
// A bad frame at the very end is waited for too: it may be mid-write.
func (r *Reader) Next(ctx context.Context) (Record, Pos, error) {
	for {
		rec, end, ok, err := r.TryNext()
		if err != nil || ok {
			return rec, end, err
		}
		if err := r.wait(ctx); err != nil {
			return Record{}, r.s.pos, err
		}
	}
}

// TryNextFrame is NextFrame without waiting: ok=false when no complete
// record is available now. A pump batches with it: send what is there, then
// wait with NextFrame.
func (r *Reader) TryNextFrame() (frame []byte, op Op, lsn uint64, end Pos, ok bool, err error) {
	fr, err := r.frame()
	if err != nil || fr == nil {
		return nil, 0, 0, r.s.pos, false, err
	}
	var rec Record
	if err := decode(fr[4:len(fr)-4], &rec, false); err != nil {
		return nil, 0, 0, r.s.pos, false, fmt.Errorf("trail %s at %d: %w", r.path, r.s.pos, err)
	}
	// A copy: the buffer is reused, and a caller holding frames across calls
	// must not see them change.
	frame = bytes.Clone(fr)
	r.s.advance(len(fr))
	return frame, rec.Op, rec.LSN, r.s.pos, true, nil
}

// NextFrame is Next but returns the record's whole frame (header+payload+checksum, exactly the bytes in
// the file) instead of decoding it, plus the decoded Op and LSN (so the caller can tell commits).
// The payload is validated as Next would. The frame is the caller's to keep.
func (r *Reader) NextFrame(ctx context.Context) (frame []byte, op Op, lsn uint64, end Pos, err error) {
	for {
		frame, op, lsn, end, ok, err := r.TryNextFrame()
		if err != nil || ok {
			return frame, op, lsn, end, err
		}
		if err := r.wait(ctx); err != nil {
			return nil, 0, 0, r.s.pos, err
		}
	}
}

// wait sleeps one poll interval, or until ctx is done. It also notices a
// trail cut below the reader's position by a restarted writer: waiting
// there could splice old and new bytes.
func (r *Reader) wait(ctx context.Context) error {
	st, err := r.s.f.Stat()
	if err != nil {
		return fmt.Errorf("trail %s at %d: %w", r.path, r.s.pos, err)
	}
	if st.Size() < int64(HeaderSize)+int64(r.s.pos) {
		return fmt.Errorf("trail %s at %d: the trail was cut to %d: %w",
			r.path, r.s.pos, st.Size()-int64(HeaderSize), ErrCut)
	}
	if r.timer == nil {
		r.timer = time.NewTimer(r.poll)
	} else {
		r.timer.Reset(r.poll)
	}
	select {
	case <-ctx.Done():
		r.timer.Stop()
		return ctx.Err()
	case <-r.timer.C:
		return nil
	}
}
