package trail

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// flushSize is the buffer size past which Append writes without waiting
// for Sync, bounding the writer's memory.
const flushSize = 1 << 20

// Writer appends records to a trail file. Not safe for concurrent use.
//
// After a failed write or fsync the Writer is unusable (every call returns
// that error): what reached the file is unknown, and fsync cannot be retried
// safely. Close it and Create again to recover.
type Writer struct {
	path string
	f    *os.File
	buf  []byte // frames appended but not yet written

	size, durable           Pos
	lastCommit, durableLast uint64
	discarded               int64
	err                     error // sticky write/fsync failure
}

// Create opens path for appending, creating it (with its header) if missing. On an existing trail it
// recovers: it reads every record, truncates a torn tail (a partial frame or a frame whose checksum fails)
// AND any records after the last commit record (an incomplete transaction: the source resends it), fsyncs
// the truncation, and reports via LastCommit what the trail holds.
//
// A file that is not a trail is refused (ErrNotTrail), never overwritten, and
// so is a trail with a checksum-valid frame that does not decode: that is not
// a crash's doing. Where the platform has flock, a second Writer on the same
// file fails until the first is closed.
func Create(path string) (*Writer, error) {
	// A new trail appears with its header already in it: a reader that
	// opens it at once must not find it empty.
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := createWithHeader(path); err != nil {
			return nil, fmt.Errorf("trail %s: %w", path, err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("trail %s: %w", path, err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("trail %s: lock: %w", path, err)
	}
	w := &Writer{path: path, f: f}
	if err := w.recover(); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

func (w *Writer) recover() error {
	st, err := w.f.Stat()
	if err != nil {
		return fmt.Errorf("trail %s: %w", w.path, err)
	}
	if st.Size() < int64(HeaderSize) {
		return w.writeHeader(st.Size())
	}
	var h [HeaderSize]byte
	if _, err := w.f.ReadAt(h[:], 0); err != nil {
		return fmt.Errorf("trail %s: read header: %w", w.path, err)
	}
	if err := checkHeader(w.path, h[:]); err != nil {
		return err
	}
	s := scanner{f: w.f}
	var end Pos
	var last uint64
	for {
		fr, state, err := s.peek()
		if err != nil {
			return fmt.Errorf("trail %s at %d: read: %w", w.path, s.pos, err)
		}
		if state != frameOK {
			break // a torn tail, however it looks: cut from here
		}
		var r Record
		if err := decode(fr[4:len(fr)-4], &r, false); err != nil {
			return fmt.Errorf("trail %s at %d: %w", w.path, s.pos, err)
		}
		s.advance(len(fr))
		if r.Op == OpCommit {
			end, last = s.pos, r.LSN
		}
	}
	if tail := st.Size() - int64(HeaderSize) - int64(end); tail > 0 {
		if err := w.f.Truncate(int64(HeaderSize) + int64(end)); err != nil {
			return fmt.Errorf("trail %s at %d: truncate: %w", w.path, end, err)
		}
		// The cut must be durable before anything is appended after it, or a
		// crash could bring the old tail back behind new frames.
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("trail %s at %d: fsync truncation: %w", w.path, end, err)
		}
		w.discarded = tail
	}
	w.size, w.durable = end, end
	w.lastCommit, w.durableLast = last, last
	return nil
}

// writeHeader starts a new trail in a file of size bytes: empty, or holding
// the start of a header whose creation a crash cut short.
func (w *Writer) writeHeader(size int64) error {
	h := make([]byte, size)
	if _, err := w.f.ReadAt(h, 0); err != nil {
		return fmt.Errorf("trail %s: read header: %w", w.path, err)
	}
	if !strings.HasPrefix(Magic, string(h)) {
		return checkHeader(w.path, h)
	}
	if _, err := w.f.WriteAt([]byte(Magic), 0); err != nil {
		return fmt.Errorf("trail %s: write header: %w", w.path, err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("trail %s: fsync header: %w", w.path, err)
	}
	// The directory entry must be durable too, or a crash loses the file.
	if err := syncDir(filepath.Dir(w.path)); err != nil {
		return fmt.Errorf("trail %s: fsync directory: %w", w.path, err)
	}
	return nil
}

// createWithHeader makes path a trail holding only its header, atomically:
// written to a temporary file and linked into place (an existing path is
// left alone).
func createWithHeader(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".trail-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(Magic); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Path is the trail file's path.
func (w *Writer) Path() string { return w.path }

// LastCommit is the LSN of the last commit record in the trail (0 if none): the extract restarts from there
// and drops any transaction whose commit LSN <= it. Like Size, it counts
// buffered records; Sync returns the durable one.
func (w *Writer) LastCommit() uint64 { return w.lastCommit }

// Discarded is how many bytes Create cut from the end of an existing trail
// (a torn frame, an incomplete transaction), for the caller to log.
func (w *Writer) Discarded() int64 { return w.discarded }

// Size is the end position including buffered records.
func (w *Writer) Size() Pos { return w.size }

// Durable is the position of the last Sync.
func (w *Writer) Durable() Pos { return w.durable }

func (w *Writer) usable() error {
	if w.f == nil {
		return fmt.Errorf("trail %s: %w", w.path, ErrClosed)
	}
	return w.err
}

// Append adds a record to the write buffer (not durable yet). It returns the record's end position.
// It refuses an invalid record (see Record.Validate) and one whose payload
// exceeds MaxPayload, leaving the trail as it was. It does not allocate
// beyond the amortized growth of the buffer.
func (w *Writer) Append(r *Record) (Pos, error) {
	if err := w.usable(); err != nil {
		return w.size, err
	}
	if err := r.Validate(); err != nil {
		return w.size, fmt.Errorf("trail %s at %d: append: %w", w.path, w.size, err)
	}
	start := len(w.buf)
	buf, err := appendFrame(w.buf, r)
	w.buf = buf
	if err != nil {
		return w.size, fmt.Errorf("trail %s at %d: append: %w", w.path, w.size, err)
	}
	return w.appended(len(w.buf)-start, r.Op, r.LSN)
}

// AppendFrame appends an already-framed record (as NextFrame returned it) after checking its checksum.
// It also checks the length and that the payload decodes, so a trail built
// from frames is as sound as one built from records.
func (w *Writer) AppendFrame(frame []byte) (Pos, error) {
	if err := w.usable(); err != nil {
		return w.size, err
	}
	op, lsn, err := checkFrame(frame)
	if err != nil {
		return w.size, fmt.Errorf("trail %s at %d: append frame: %w", w.path, w.size, err)
	}
	w.buf = append(w.buf, frame...)
	return w.appended(len(frame), op, lsn)
}

// appended accounts for a frame of n bytes just added to the buffer.
func (w *Writer) appended(n int, op Op, lsn uint64) (Pos, error) {
	w.size += Pos(n)
	if op == OpCommit {
		w.lastCommit = lsn
	}
	if len(w.buf) >= flushSize {
		if err := w.flush(); err != nil {
			return w.size, err
		}
	}
	return w.size, nil
}

// flush writes the buffer (one pwrite) without fsync.
func (w *Writer) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	at := w.size - Pos(len(w.buf))
	if _, err := w.f.WriteAt(w.buf, int64(HeaderSize)+int64(at)); err != nil {
		w.err = fmt.Errorf("trail %s at %d: write: %w", w.path, at, err)
		return w.err
	}
	if cap(w.buf) > 4*flushSize {
		w.buf = nil // a huge record grew it: don't keep that much idle
	} else {
		w.buf = w.buf[:0]
	}
	return nil
}

// Sync writes the buffer and fsyncs; after it returns nil, every appended record survives a crash.
// It returns the durable end position and the LSN of the last durable commit record (0 if none yet).
func (w *Writer) Sync() (Pos, uint64, error) {
	if err := w.usable(); err != nil {
		return w.durable, w.durableLast, err
	}
	if err := w.flush(); err != nil {
		return w.durable, w.durableLast, err
	}
	if w.durable == w.size {
		return w.durable, w.durableLast, nil
	}
	if err := w.f.Sync(); err != nil {
		w.err = fmt.Errorf("trail %s at %d: fsync: %w", w.path, w.size, err)
		return w.durable, w.durableLast, w.err
	}
	w.durable, w.durableLast = w.size, w.lastCommit
	return w.durable, w.durableLast, nil
}

// Close is Sync then close. The file is closed even when Sync fails.
func (w *Writer) Close() error {
	if w.f == nil {
		return fmt.Errorf("trail %s: %w", w.path, ErrClosed)
	}
	_, _, err := w.Sync()
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("trail %s: close: %w", w.path, cerr)
	}
	w.f, w.buf = nil, nil
	return err
}
