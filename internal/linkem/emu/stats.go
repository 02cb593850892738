package emu

import (
	"fmt"

	"github.com/HdrHistogram/hdrhistogram-go"

	"replab/internal/clock"
	"replab/internal/linkem"
)

// Lateness summarises how late packets were handed out after their
// scheduled delivery time (the emulator's own error), in microseconds.
type Lateness struct {
	Count  int64   `json:"count"`
	P50Us  float64 `json:"p50_us"`
	P99Us  float64 `json:"p99_us"`
	MaxUs  float64 `json:"max_us"`
	MeanUs float64 `json:"mean_us"`
}

// FaithfulP99Us is the lateness p99 above which the emulation no longer
// reproduces the configured link faithfully.
const FaithfulP99Us = 1000

func summarize(h *hdrhistogram.Histogram) Lateness {
	if h.TotalCount() == 0 {
		return Lateness{}
	}
	return Lateness{
		Count:  h.TotalCount(),
		P50Us:  float64(h.ValueAtQuantile(50)) / 1e3,
		P99Us:  float64(h.ValueAtQuantile(99)) / 1e3,
		MaxUs:  float64(h.Max()) / 1e3,
		MeanUs: h.Mean() / 1e3,
	}
}

// DirStats is one direction's state at a moment.
type DirStats struct {
	From     string          `json:"from"`
	To       string          `json:"to"`
	Params   linkem.Params   `json:"params"`
	Counters linkem.Counters `json:"counters"`
	Lateness Lateness        `json:"lateness"` // since start
	// LateHist is the lateness since start in fixed buckets, cumulative:
	// the monitor subtracts two readings for a phase's percentiles.
	LateHist LateHist `json:"-"`
	InFlight int      `json:"in_flight_packets"` // accepted, not yet delivered (MTU-sized packets)
	// OverflowPackets were dropped by the emulator itself: the direction
	// already held maxInFlightBytes (only an unlimited link gets there).
	OverflowPackets uint64 `json:"overflow_packets"`
	// Capture counts the running capture's records; nil when none runs.
	Capture *CaptureStats `json:"capture,omitempty"`
}

// PortStats is one site's attachment.
type PortStats struct {
	Name              string `json:"name"`
	UnroutablePackets uint64 `json:"unroutable_packets"`
	WriteErrors       uint64 `json:"write_errors"`
}

// Stats returns every direction's counters and lateness since start.
func (e *Emulator) Stats() []DirStats {
	return e.stats(false)
}

// Window is Stats with lateness over the time since the previous Window
// call (for per-second series).
func (e *Emulator) Window() []DirStats {
	return e.stats(true)
}

func (e *Emulator) stats(window bool) []DirStats {
	out := make([]DirStats, 0, len(e.dirs))
	for _, d := range e.dirs {
		d.mu.Lock()
		s := DirStats{
			From:            e.ports[d.from].Name,
			To:              e.ports[d.to].Name,
			Params:          d.model.Params(),
			Counters:        d.model.Counters(),
			InFlight:        d.q.segs,
			OverflowPackets: d.overflow,
			LateHist:        d.lateHist,
		}
		if window {
			s.Lateness = summarize(d.lateWin)
			d.lateWin.Reset()
		} else {
			s.Lateness = summarize(d.late)
		}
		d.mu.Unlock()
		if c := d.capture.Load(); c != nil {
			cs := c.Stats()
			s.Capture = &cs
		}
		out = append(out, s)
	}
	return out
}

// Ports returns per-site counters.
func (e *Emulator) Ports() []PortStats {
	out := make([]PortStats, 0, len(e.ports))
	for _, p := range e.ports {
		out = append(out, PortStats{Name: p.Name, UnroutablePackets: p.unroutable.Load(), WriteErrors: p.writeErrs.Load()})
	}
	return out
}

func (e *Emulator) dir(from, to string) (*direction, error) {
	for _, d := range e.dirs {
		if e.ports[d.from].Name == from && e.ports[d.to].Name == to {
			return d, nil
		}
	}
	return nil, fmt.Errorf("no link %s->%s", from, to)
}

// Params returns the current parameters of from->to.
func (e *Emulator) Params(from, to string) (linkem.Params, error) {
	d, err := e.dir(from, to)
	if err != nil {
		return linkem.Params{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.model.Params(), nil
}

// SetParams changes from->to while packets flow. Routes stay as computed
// at start: a delay change does not reroute, and a link set down is a
// partition, not a detour.
func (e *Emulator) SetParams(from, to string, p linkem.Params) error {
	d, err := e.dir(from, to)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.model.SetParams(clock.Now(), p)
	d.mu.Unlock()
	d.signal()
	return nil
}

// Path returns the site names a packet from -> to crosses, both ends
// included, or nil when to is unreachable.
func (e *Emulator) Path(from, to string) []string {
	fi, ti := -1, -1
	for i, p := range e.ports {
		switch p.Name {
		case from:
			fi = i
		case to:
			ti = i
		}
	}
	if fi < 0 || ti < 0 || fi == ti {
		return nil
	}
	path := []string{from}
	for at := fi; at != ti; {
		at = e.nextHop[at][ti]
		if at < 0 || len(path) > len(e.ports) {
			return nil
		}
		path = append(path, e.ports[at].Name)
	}
	return path
}
