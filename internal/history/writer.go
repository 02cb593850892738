package history

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// FileName is the history's name in a results directory.
const FileName = "history.jsonl"

// bufferSize is the Writer's buffer: 64 KiB holds a few hundred operations,
// so the file is written in large pieces. A crash loses what is buffered;
// the Reader reports a last line cut short.
const bufferSize = 64 << 10

// Writer streams completed operations to a history.jsonl, one line each,
// holding none of them in memory. Record is safe for concurrent callers:
// every user of the driver records its own operations as they complete.
//
//	w, err := history.Create(filepath.Join(dir, history.FileName))
//	…
//	// in each user, after a transaction completes:
//	w.Record(history.Op{Process: p, Node: node, Type: history.OK, F: history.FTxn,
//		InvokeNs: t0, CompleteNs: clock.Now(), TxnType: "append", Value: mops})
//	…
//	err = w.Close() // flushes; the first write error, if any
type Writer struct {
	mu    sync.Mutex
	bw    *bufio.Writer
	c     io.Closer // the file Create opened; nil for NewWriter
	next  int
	err   error
	close bool
}

// Create creates (or truncates) the file at path and returns a Writer to it.
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create history: %w", err)
	}
	w := NewWriter(f)
	w.c = f
	return w, nil
}

// NewWriter returns a Writer to w; Close flushes but does not close w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, bufferSize)}
}

// Record appends op with the next index (0, 1, 2, … in the order Record is
// called) and returns that index. It does not keep op or its slices: the
// caller may reuse them when Record returns. After a write error every
// Record returns that error.
func (w *Writer) Record(op Op) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	if w.close {
		return 0, errClosed
	}
	op.Index = w.next
	// Encode straight into the buffer's free space when the line fits,
	// else into a fresh slice that bufio writes through.
	b := op.AppendJSON(w.bw.AvailableBuffer())
	b = append(b, '\n')
	if _, err := w.bw.Write(b); err != nil {
		w.err = fmt.Errorf("write history: %w", err)
		return 0, w.err
	}
	w.next++
	return op.Index, nil
}

var errClosed = errors.New("write history: the writer is closed")

// Count is how many operations have been recorded.
func (w *Writer) Count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}

// Flush writes what is buffered, so a reader (or a crash) sees every
// operation recorded so far.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flush()
}

func (w *Writer) flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("write history: %w", err)
	}
	return w.err
}

// Close flushes and closes the file Create opened. It returns the first
// error any Record, Flush or Close met. Closing twice is harmless.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.close {
		return w.err
	}
	w.close = true
	err := w.flush()
	if w.c != nil {
		if cerr := w.c.Close(); cerr != nil && err == nil {
			w.err = fmt.Errorf("close history: %w", cerr)
			err = w.err
		}
	}
	return err
}
