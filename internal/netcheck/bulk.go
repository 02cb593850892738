package netcheck

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"time"
)

// sendBulk writes the bulk payload to c until a write fails (the caller
// stops it by closing c or setting a past write deadline).
func sendBulk(c net.Conn) error {
	p := bulkPayload()
	for {
		if _, err := c.Write(p); err != nil {
			return err
		}
	}
}

// discard closes c dropping whatever it still has queued to send, so that a
// finished measurement does not keep loading the link.
func discard(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// receiveWindow reads a bulk stream from c and counts what arrives inside
// the measured window, which opens warmup after the first byte and closes d
// later. Read deadlines at the window's edges wake the reader there. The
// bytes of a read that spans an edge (it returned after the edge, the read
// before it returned before) are split in proportion to time, so a reader
// that wakes late does not move bytes out of the window. window is d plus,
// at most, the reader's wake-up lateness at the closing.
func receiveWindow(b bound, c net.Conn, warmup, d time.Duration) (n int64, window time.Duration, err error) {
	buf := make([]byte, 256<<10)
	if err := b.setReadDeadline(c, b.hard); err != nil {
		return 0, 0, err
	}
	if _, err := c.Read(buf); err != nil {
		return 0, 0, b.err(fmt.Errorf("wait for first byte: %w", err))
	}
	prev := time.Now() // when the last read returned
	start := prev.Add(warmup)
	end := start.Add(d)
	if end.After(b.hard) {
		return 0, 0, b.err(fmt.Errorf("window would end after the time limit"))
	}
	measuring := false
	var first time.Time // when the window opened
	var counted float64 // bytes
	for {
		edge := start
		if measuring {
			edge = end
		}
		if err := b.setReadDeadline(c, edge); err != nil {
			return 0, 0, err
		}
		k, err := c.Read(buf)
		now := time.Now()
		if err != nil {
			if !isTimeout(err) || b.ctx.Err() != nil || now.Before(edge) {
				if errors.Is(err, io.EOF) {
					err = errors.New("sender stopped before the window ended")
				}
				return 0, 0, b.err(err)
			}
			if !measuring { // nothing arrived since prev: the window opens now
				measuring, first, prev = true, now, now
				continue
			}
			return int64(math.Round(counted)), now.Sub(first), nil
		}
		switch {
		case !measuring && now.Before(start):
			// warmup
		case !measuring: // spans the opening
			measuring, first = true, start
			counted += float64(k) * share(now.Sub(start), now.Sub(prev))
		case now.Before(end):
			counted += float64(k)
		default: // spans the closing
			counted += float64(k) * share(end.Sub(prev), now.Sub(prev))
			return int64(math.Round(counted)), end.Sub(first), nil
		}
		prev = now
	}
}

// share is part/whole, clamped to [0, 1] (1 when whole is 0).
func share(part, whole time.Duration) float64 {
	if whole <= 0 {
		return 1
	}
	return min(max(float64(part)/float64(whole), 0), 1)
}

func checkWindow(dir Direction, warmup, d time.Duration) error {
	switch {
	case dir != Upload && dir != Download:
		return fmt.Errorf("bad direction %d", dir)
	case warmup < 0:
		return fmt.Errorf("negative warmup %s", warmup)
	case d <= 0:
		return fmt.Errorf("duration %s: want > 0", d)
	case warmup+d > maxWindow:
		return fmt.Errorf("warmup+duration %s: want <= %s", warmup+d, maxWindow)
	}
	return nil
}
