package enginekit

import (
	"io"
	"sync"
)

// LockedWriter serialises writes from several goroutines to one log.
type LockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewLockedWriter wraps w; a LockedWriter is returned as it is.
func NewLockedWriter(w io.Writer) *LockedWriter {
	if lw, ok := w.(*LockedWriter); ok {
		return lw
	}
	return &LockedWriter{w: w}
}

func (l *LockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
