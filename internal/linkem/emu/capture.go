package emu

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"replab/internal/clock"
	"replab/internal/linkem/pcap"
)

// A capture records the packets one direction delivers, at egress: the
// moment the emulator hands a packet to the far site (or to the next link
// of a longer path). Packets the model drops (queue, loss, down, MTU) are
// not recorded, so a capture shows what a tcpdump at the receiver would
// see. A super-packet is recorded as the MTU-sized packets the link
// carries (the model's packets), with the headers and checksums the
// kernel's segmentation would give them. Timestamps are wall-clock time of
// that moment.

// captureRecords bounds the records waiting for the writer: beyond it the
// packet path drops records (counted) rather than waiting for the disk.
const captureRecords = 8192

// captureFlushEvery lets a running capture be read (tcpdump -r) and keeps
// little unwritten should the process die.
const captureFlushEvery = time.Second

// ErrCapturing is returned by StartCapture for a direction that is
// already being captured.
var ErrCapturing = errors.New("already being captured")

// CaptureStats counts a capture's records.
type CaptureStats struct {
	Packets uint64 `json:"packets"` // records written to the file
	// DroppedRecords are packets the link delivered that the file lacks:
	// the writer fell behind (or failed), and the packet path does not wait.
	DroppedRecords uint64 `json:"dropped_records"`
	SnapBytes      int    `json:"snap_bytes"`
}

// Capture is a running capture of one direction.
type Capture struct {
	From, To string
	dir      *direction

	mu        sync.Mutex // the packet path against Stop
	stopped   bool
	allocated int // record buffers made so far (at most captureRecords)
	bufSize   int
	recs      chan capRecord
	free      chan []byte

	wall0 time.Time // one wall-clock/monotonic pair converts timestamps
	mono0 int64

	packets, dropped atomic.Uint64
	done             chan struct{} // closed when the writer has flushed and exited
	err              error         // the writer's first error; read after done
	stopOnce         sync.Once
	snap             int
}

type capRecord struct {
	at   int64 // clock.Now ns
	orig int
	data []byte
}

// StartCapture starts writing from->to's packets to w as a pcap file with
// the given snap length (0: pcap.DefaultSnapLen). The caller owns w and
// closes it after Stop. A direction has at most one capture at a time.
func (e *Emulator) StartCapture(from, to string, w io.Writer, snapLen int) (*Capture, error) {
	d, err := e.dir(from, to)
	if err != nil {
		return nil, err
	}
	if e.closed() {
		return nil, errors.New("the emulator is closed")
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	pw, err := pcap.NewWriter(bw, snapLen)
	if err != nil {
		return nil, err
	}
	c := &Capture{
		From: from, To: to, dir: d,
		bufSize: min(pw.SnapLen(), MaxFrame-vnetHdrLen),
		recs:    make(chan capRecord, captureRecords),
		free:    make(chan []byte, captureRecords),
		wall0:   time.Now(),
		mono0:   clock.Now(),
		done:    make(chan struct{}),
		snap:    pw.SnapLen(),
	}
	if !d.capture.CompareAndSwap(nil, c) {
		return nil, fmt.Errorf("%s->%s is %w", from, to, ErrCapturing)
	}
	go c.write(bw, pw)
	return c, nil
}

// record copies the head of each packet (segment) of a batch about to be
// delivered at now. It never blocks on the writer.
func (c *Capture) record(now int64, batch []piece) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	for _, pc := range batch {
		for j := pc.first; j < pc.first+pc.n; j++ {
			var b []byte
			select {
			case b = <-c.free:
			default:
				if c.allocated == captureRecords {
					c.dropped.Add(1)
					continue
				}
				b = make([]byte, c.bufSize)
				c.allocated++
			}
			n, orig := pc.f.copySegment(b[:cap(b)], j)
			// Never blocks: there are no more buffers than places in recs.
			c.recs <- capRecord{at: now, orig: orig, data: b[:n]}
		}
	}
}

func (c *Capture) write(bw *bufio.Writer, pw *pcap.Writer) {
	defer close(c.done)
	tk := time.NewTicker(captureFlushEvery)
	defer tk.Stop()
	flush := func() {
		if c.err == nil {
			if err := bw.Flush(); err != nil {
				c.err = fmt.Errorf("write capture %s->%s: %w", c.From, c.To, err)
			}
		}
	}
	for {
		select {
		case r, ok := <-c.recs:
			if !ok {
				flush()
				return
			}
			if c.err == nil {
				if err := pw.WritePacket(c.wall0.Add(time.Duration(r.at-c.mono0)), r.orig, r.data); err != nil {
					c.err = fmt.Errorf("capture %s->%s: %w", c.From, c.To, err)
				}
			}
			if c.err == nil {
				c.packets.Add(1)
			} else {
				c.dropped.Add(1)
			}
			c.free <- r.data[:cap(r.data)]
		case <-tk.C:
			flush()
		}
	}
}

// Stats returns the counts so far.
func (c *Capture) Stats() CaptureStats {
	return CaptureStats{Packets: c.packets.Load(), DroppedRecords: c.dropped.Load(), SnapBytes: c.snap}
}

// Stop ends the capture: no packet is recorded after it returns, and
// everything recorded is written and flushed to the writer (which the
// caller then closes). It returns the final counts and the first write
// error. Calling it again returns the same.
func (c *Capture) Stop() (CaptureStats, error) {
	c.stopOnce.Do(func() {
		c.dir.capture.CompareAndSwap(c, nil)
		c.mu.Lock()
		c.stopped = true
		close(c.recs)
		c.mu.Unlock()
	})
	<-c.done
	return c.Stats(), c.err
}
