package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/linkem/emu"
)

// event is one progress line of the engine, with the moment it arrived.
type event struct {
	T    float64 `json:"t_s"` // since Up started
	Line string  `json:"line"`
}

// timeline is the io.Writer given to the engine's Up: it dates every line
// (and echoes it to stderr), and samples the links' delivered bytes so a
// base backup's transfer can be followed over time.
type timeline struct {
	mu     sync.Mutex
	start  time.Time
	echo   io.Writer
	buf    []byte
	events []event

	e       *emu.Emulator
	dirs    []string // "db->s1", …
	samples []sample
	stop    chan struct{}
	done    chan struct{}
}

// sample is the cumulative delivered bytes (and queue drops) of each
// watched direction at T.
type sample struct {
	T     float64
	Bytes []uint64
	Drops []uint64
}

// sampleEvery is the resolution of the transfer timeline.
const sampleEvery = 5 * time.Millisecond

func newTimeline(e *emu.Emulator, echo io.Writer, dirs ...string) *timeline {
	return &timeline{e: e, echo: echo, dirs: dirs, stop: make(chan struct{}), done: make(chan struct{})}
}

// begin starts the clock and the sampler.
func (t *timeline) begin() {
	t.start = time.Now()
	t.take()
	go func() {
		defer close(t.done)
		tk := time.NewTicker(sampleEvery)
		defer tk.Stop()
		for {
			select {
			case <-t.stop:
				t.take()
				return
			case <-tk.C:
				t.take()
			}
		}
	}()
}

// end stops the sampler.
func (t *timeline) end() {
	close(t.stop)
	<-t.done
}

func (t *timeline) take() {
	s := sample{T: time.Since(t.start).Seconds(), Bytes: make([]uint64, len(t.dirs)), Drops: make([]uint64, len(t.dirs))}
	for _, d := range t.e.Stats() {
		for i, name := range t.dirs {
			if d.From+"->"+d.To == name {
				s.Bytes[i] = d.Counters.DeliveredBytes
				s.Drops[i] = d.Counters.DroppedQueuePackets + d.Counters.DroppedLossPackets + d.Counters.DroppedOtherPackets
			}
		}
	}
	t.mu.Lock()
	t.samples = append(t.samples, s)
	t.mu.Unlock()
}

// Write implements io.Writer for the engine's progress lines.
func (t *timeline) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			break
		}
		ev := event{T: time.Since(t.start).Seconds(), Line: string(t.buf[:i])}
		t.events = append(t.events, ev)
		fmt.Fprintf(t.echo, "      %+7.3f s  %s\n", ev.T, ev.Line)
		t.buf = t.buf[i+1:]
	}
	return len(b), nil
}

// bytesAt is direction i's delivered bytes at the last sample at or
// before T (the first sample when T is earlier).
func (t *timeline) bytesAt(i int, T float64) (uint64, uint64) {
	var b, d uint64
	for k, s := range t.samples {
		if k > 0 && s.T > T {
			break
		}
		b, d = s.Bytes[i], s.Drops[i]
	}
	return b, d
}

// transfer describes how direction i carried the bytes of one base backup
// that ran from `from` to `to` (seconds since Up started).
type transfer struct {
	LinkBytes uint64 `json:"link_bytes"` // IP bytes delivered to the standby during the backup
	// FirstDataS: backup start until 64 KiB had arrived: connections,
	// the protocol's round trips and the checkpoint before data flows.
	FirstDataS float64 `json:"first_data_s"`
	// RampS: first data until the first 100 ms in which the link carried
	// at least 90 % of its rate (TCP slow start), -1 if it never did.
	RampS float64 `json:"ramp_s"`
	// BulkS: first data until 99 % of the bytes had arrived; BulkMbps
	// what the link carried meanwhile.
	BulkS    float64 `json:"bulk_s"`
	BulkMbps float64 `json:"bulk_mbps"`
	// TailS: 99 % of the bytes until the backup ended (WAL end, fsync,
	// pg_basebackup's exit).
	TailS      float64 `json:"tail_s"`
	QueueDrops uint64  `json:"link_drops_packets"`
}

const (
	firstDataBytes = 64 << 10
	rampWindow     = 0.1 // s
	rampFraction   = 0.9
)

func (t *timeline) transfer(i int, from, to, rateBps float64) transfer {
	t.mu.Lock()
	defer t.mu.Unlock()
	b0, d0 := t.bytesAt(i, from)
	b1, d1 := t.bytesAt(i, to)
	tr := transfer{LinkBytes: b1 - b0, QueueDrops: d1 - d0, RampS: -1}
	total := float64(b1 - b0)
	first, p99 := -1.0, -1.0
	var win []sample // samples inside the backup
	for _, s := range t.samples {
		if s.T < from || s.T > to {
			continue
		}
		win = append(win, s)
		got := float64(s.Bytes[i] - b0)
		if first < 0 && got >= firstDataBytes {
			first = s.T
		}
		if p99 < 0 && got >= 0.99*total {
			p99 = s.T
		}
	}
	if first < 0 || p99 < 0 {
		return tr
	}
	tr.FirstDataS = benchkit.Round(first-from, 3)
	tr.BulkS = benchkit.Round(p99-first, 3)
	if p99 > first {
		b := func(T float64) uint64 { v, _ := t.bytesAt(i, T); return v }
		tr.BulkMbps = benchkit.Round(float64(b(p99)-b(first))*8/(p99-first)/1e6, 2)
	}
	tr.TailS = benchkit.Round(to-p99, 3)
	for j, s := range win {
		if s.T < first {
			continue
		}
		for k := j + 1; k < len(win); k++ {
			if dt := win[k].T - s.T; dt >= rampWindow {
				if float64(win[k].Bytes[i]-s.Bytes[i])*8/dt >= rampFraction*rateBps {
					tr.RampS = benchkit.Round(s.T-first, 3)
				}
				break
			}
		}
		if tr.RampS >= 0 {
			break
		}
	}
	return tr
}

// writeCSV writes the samples to path: the time since Up started, then
// each watched direction's delivered bytes and drops (cumulative).
func (t *timeline) writeCSV(path string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	b.WriteString("t_s")
	for _, d := range t.dirs {
		fmt.Fprintf(&b, ",%s_bytes,%s_drops", d, d)
	}
	b.WriteByte('\n')
	for _, s := range t.samples {
		fmt.Fprintf(&b, "%.3f", s.T)
		for i := range s.Bytes {
			fmt.Fprintf(&b, ",%d,%d", s.Bytes[i], s.Drops[i])
		}
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write the link samples: %w", err)
	}
	return nil
}
