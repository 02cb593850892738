package monitor

import (
	"time"

	"replab/internal/linkem"
	"replab/internal/linkem/emu"
)

// Links is where link counters come from; *emu.Emulator (Lab.Emulator())
// is one.
type Links interface {
	// Stats returns every direction's parameters and counters, cumulative
	// since the lab started. (The monitor never calls Window, whose
	// lateness window belongs to the lab's links.csv.)
	Stats() []emu.DirStats
	// Path lists the sites a packet from -> to crosses, both ends
	// included; nil when unreachable.
	Path(from, to string) []string
}

// LinkSummary is one direction over the measure phase. Byte and packet
// counts are what the link model delivered or dropped (IP packets, headers
// included) between the first and the last instant of the phase.
type LinkSummary struct {
	Bytes   uint64 `json:"bytes"`   // delivered
	Packets uint64 `json:"packets"` // delivered
	// Dropped packets by cause: the drop-tail queue was full, random or
	// Gilbert-Elliott loss, or other (link down, larger than the MTU).
	DroppedQueuePackets uint64 `json:"dropped_queue_packets"`
	DroppedLossPackets  uint64 `json:"dropped_loss_packets"`
	DroppedOtherPackets uint64 `json:"dropped_other_packets"`
	// ThroughputAvgBps is delivered bits per second over the phase.
	ThroughputAvgBps float64 `json:"throughput_avg_bps"`
	// RateBps is the configured rate (a trace's mean rate) at the end of
	// the phase; 0 = unlimited.
	RateBps int64 `json:"rate_bps"`
	// UtilizationAvgPct is delivered bits / (configured rate × time) over
	// the phase, in percent; UtilizationPeakPct the highest of the
	// per-interval (≈ 1 s) values. Both null for an unlimited link.
	UtilizationAvgPct  *float64 `json:"utilization_avg_pct"`
	UtilizationPeakPct *float64 `json:"utilization_peak_pct"`
	// QueuePeakBytes is the largest backlog waiting for serialization
	// seen during the phase (sampled, plus the model's high-water mark if
	// it rose during the phase).
	QueuePeakBytes int64 `json:"queue_peak_bytes"`
	// DelayMs is the configured one-way delay at the end of the phase.
	DelayMs float64 `json:"delay_ms"`
}

// linkPoint is one direction's cumulative counters at one sample.
type linkPoint struct {
	t       time.Time
	c       linkem.Counters
	rateBps int64 // configured at the sample; 0 = unlimited
	delay   time.Duration
}

// rateOf is a direction's configured rate: a trace's mean, else RateBps.
func rateOf(p linkem.Params) int64 {
	if p.Trace != nil {
		return p.Trace.MeanRateBps()
	}
	return p.RateBps
}

// UtilizationPct is the share of a rate that bytes delivered in dt used,
// in percent; ok is false for an unlimited rate or an empty interval.
func UtilizationPct(bytes uint64, dt time.Duration, rateBps int64) (pct float64, ok bool) {
	if rateBps <= 0 || dt <= 0 {
		return 0, false
	}
	return float64(bytes) * 8 / dt.Seconds() / float64(rateBps) * 100, true
}

// interp returns a cumulative counter at t by linear interpolation between
// the samples around it (clamped to the first and last sample).
func interp(ts []time.Time, v func(i int) float64, t time.Time) float64 {
	n := len(ts)
	if n == 0 {
		return 0
	}
	if !t.After(ts[0]) {
		return v(0)
	}
	if !t.Before(ts[n-1]) {
		return v(n - 1)
	}
	// First sample after t.
	lo, hi := 0, n-1
	for lo < hi {
		mid := (lo + hi) / 2
		if ts[mid].After(t) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	a, b := hi-1, hi
	span := ts[b].Sub(ts[a])
	if span <= 0 {
		return v(b)
	}
	f := float64(t.Sub(ts[a])) / float64(span)
	return v(a) + (v(b)-v(a))*f
}

// summarizeLink computes one direction's summary over [start, end] from
// its samples (in time order). Utilization peaks count only intervals of
// at least minPeak, so a sliver between a boundary sample and a tick
// cannot report a burst as a peak; with none that long, the peak is the
// average.
func summarizeLink(pts []linkPoint, start, end time.Time, minPeak time.Duration) LinkSummary {
	var s LinkSummary
	if len(pts) == 0 || !end.After(start) {
		return s
	}
	ts := make([]time.Time, len(pts))
	for i, p := range pts {
		ts[i] = p.t
	}
	at := func(t time.Time, f func(c linkem.Counters) uint64) uint64 {
		v := interp(ts, func(i int) float64 { return float64(f(pts[i].c)) }, t)
		return uint64(v + 0.5)
	}
	diff := func(f func(c linkem.Counters) uint64) uint64 {
		a, b := at(start, f), at(end, f)
		if b < a {
			return 0
		}
		return b - a
	}
	s.Bytes = diff(func(c linkem.Counters) uint64 { return c.DeliveredBytes })
	s.Packets = diff(func(c linkem.Counters) uint64 { return c.DeliveredPackets })
	s.DroppedQueuePackets = diff(func(c linkem.Counters) uint64 { return c.DroppedQueuePackets })
	s.DroppedLossPackets = diff(func(c linkem.Counters) uint64 { return c.DroppedLossPackets })
	s.DroppedOtherPackets = diff(func(c linkem.Counters) uint64 { return c.DroppedOtherPackets })
	s.ThroughputAvgBps = round(float64(s.Bytes)*8/end.Sub(start).Seconds(), 0)

	last := pts[len(pts)-1]
	for _, p := range pts {
		if p.t.After(end) {
			last = p
			break
		}
		last = p
	}
	s.RateBps, s.DelayMs = last.rateBps, float64(last.delay)/1e6

	// Per-interval utilization: each pair of consecutive samples, clipped
	// to the phase, at the rate configured at the interval's end.
	var bits, capacity float64 // over intervals with a rate
	peak, havePeak := 0.0, false
	delivered := func(c linkem.Counters) uint64 { return c.DeliveredBytes }
	for i := 1; i < len(pts); i++ {
		a, b := maxTime(pts[i-1].t, start), minTime(pts[i].t, end)
		if !b.After(a) {
			continue
		}
		rate := pts[i].rateBps
		if rate <= 0 {
			continue
		}
		var by uint64
		if x, y := at(a, delivered), at(b, delivered); y > x {
			by = y - x
		}
		dt := b.Sub(a)
		bits += float64(by) * 8
		capacity += dt.Seconds() * float64(rate)
		if pct, ok := UtilizationPct(by, dt, rate); ok && dt >= minPeak && (!havePeak || pct > peak) {
			peak, havePeak = round(pct, 3), true
		}
	}
	if capacity > 0 {
		avg := round(bits/capacity*100, 3)
		s.UtilizationAvgPct = &avg
		if !havePeak {
			peak = avg
		}
		s.UtilizationPeakPct = &peak
	}

	// Queue: the largest sampled backlog in the phase, and the model's
	// high-water mark when it rose during the phase.
	hwStart := int64(interp(ts, func(i int) float64 { return float64(pts[i].c.QueueHighWaterBytes) }, start))
	for _, p := range pts {
		if p.t.Before(start) {
			continue
		}
		if p.t.After(end) {
			// The first sample after the phase may carry a high-water mark
			// reached inside it; it cannot tell, so only an earlier one counts.
			break
		}
		s.QueuePeakBytes = max(s.QueuePeakBytes, p.c.QueueBytes)
		if p.c.QueueHighWaterBytes > hwStart {
			s.QueuePeakBytes = max(s.QueuePeakBytes, p.c.QueueHighWaterBytes)
		}
	}
	return s
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
