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

	// The fact check (linkcheck.go): configured next to delivered.
	//
	// LatenessCount deliveries (pieces written out: a packet, or segments
	// due together) had their lateness measured in the phase;
	// LatenessP50Us and LatenessP99Us are its percentiles (upper bounds
	// of 12.5 %-wide buckets), and DelayP50Ms / DelayP99Ms the delivered
	// delay they make: DelayMs plus the lateness.
	LatenessCount uint64  `json:"lateness_count"`
	LatenessP50Us float64 `json:"lateness_p50_us"`
	LatenessP99Us float64 `json:"lateness_p99_us"`
	DelayP50Ms    float64 `json:"delay_p50_ms"`
	DelayP99Ms    float64 `json:"delay_p99_ms"`
	// OfferedPackets were offered to the direction; LossDrawnPackets of
	// them reached the loss models (not dropped before: queue full, link
	// down, over the MTU). LossConfiguredPct is the models' long-run loss
	// at the end of the phase (linkem.Params.MeanLoss), LossDeliveredPct
	// dropped_loss_packets / loss_drawn_packets, with its 95 % Wilson
	// interval (widened for Gilbert-Elliott's bursts).
	OfferedPackets    uint64  `json:"offered_packets"`
	LossDrawnPackets  uint64  `json:"loss_drawn_packets"`
	LossConfiguredPct float64 `json:"loss_configured_pct"`
	LossDeliveredPct  float64 `json:"loss_delivered_pct"`
	LossCI95LowPct    float64 `json:"loss_ci95_low_pct"`
	LossCI95HighPct   float64 `json:"loss_ci95_high_pct"`
	// RatePeakSecondBps is the highest delivered bits per second of an
	// interval between samples (≈ 1 s; see UtilizationPeakPct), to set
	// against rate_bps.
	RatePeakSecondBps float64 `json:"rate_peak_second_bps"`
	// BytesByClass splits Bytes by traffic class (linkem.Classifier).
	BytesByClass ClassBytes `json:"bytes_by_class"`
	// Check is the verdict: did the direction do what it was configured
	// to? Absent from summaries written before the fact check.
	Check *LinkCheck `json:"check,omitempty"`
}

// linkPoint is one direction's cumulative counters at one sample.
type linkPoint struct {
	t       time.Time
	c       linkem.Counters
	rateBps int64 // configured at the sample; 0 = unlimited
	delay   time.Duration
	loss    float64 // configured long-run loss (linkem.Params.MeanLoss)
	lossDE  float64 // its design effect (linkem.Params.LossDesignEffect)
	trace   bool    // trace-driven rate
	// late is the lateness histogram's growth since the previous sample,
	// sparse: a second's deliveries fill a few of emu.LateBuckets.
	late []lateCount
}

// lateCount is one bucket's growth.
type lateCount struct {
	bucket uint16
	n      uint64
}

// lateDiff returns the buckets of cur that grew since prev.
func lateDiff(prev, cur *emu.LateHist) []lateCount {
	var out []lateCount
	for i := range cur {
		if cur[i] > prev[i] {
			out = append(out, lateCount{uint16(i), cur[i] - prev[i]})
		}
	}
	return out
}

// newLinkPoint is a direction's sample at t; prev is its previous
// lateness histogram, updated to this one.
func newLinkPoint(t time.Time, d emu.DirStats, prev *emu.LateHist) linkPoint {
	p := linkPoint{t: t, c: d.Counters, rateBps: rateOf(d.Params), delay: d.Params.Delay,
		loss: d.Params.MeanLoss(), lossDE: d.Params.LossDesignEffect(), trace: d.Params.Trace != nil,
		late: lateDiff(prev, &d.LateHist)}
	*prev = d.LateHist
	return p
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
	s.OfferedPackets = diff(func(c linkem.Counters) uint64 { return c.OfferedPackets })
	if before := s.DroppedQueuePackets + s.DroppedOtherPackets; s.OfferedPackets > before {
		s.LossDrawnPackets = s.OfferedPackets - before
	}
	var cls [linkem.NumClasses]uint64
	for i := range cls {
		cls[i] = diff(func(c linkem.Counters) uint64 { return c.ClassBytes[i] })
	}
	s.BytesByClass = classBytes(cls)

	last := pts[len(pts)-1]
	for _, p := range pts {
		if p.t.After(end) {
			last = p
			break
		}
		last = p
	}
	s.RateBps, s.DelayMs = last.rateBps, float64(last.delay)/1e6
	in := checkInput{lossDE: last.lossDE, trace: last.trace}

	// The samples that bracket the phase: the last at or before its
	// start, the first at or after its end (the monitor takes one at each
	// boundary it knows of in time; otherwise the phase's histogram
	// reaches to the samples around it).
	first, final := 0, len(pts)-1
	for i, p := range pts {
		if !p.t.After(start) {
			first = i
		}
		if !p.t.Before(end) {
			final = i
			break
		}
	}
	var late emu.LateHist
	for i := first + 1; i <= final; i++ {
		for _, lc := range pts[i].late {
			late[lc.bucket] += lc.n
		}
	}
	for _, p := range pts[first : final+1] {
		in.lossChanged = in.lossChanged || p.loss != last.loss
	}
	if s.LatenessCount = late.Count(); s.LatenessCount > 0 {
		s.LatenessP50Us, s.LatenessP99Us = late.QuantileUs(0.5), late.QuantileUs(0.99)
		s.DelayP50Ms = round(s.DelayMs+s.LatenessP50Us/1e3, 3)
		s.DelayP99Ms = round(s.DelayMs+s.LatenessP99Us/1e3, 3)
	}
	s.LossConfiguredPct = round(last.loss*100, 6)
	if n := s.LossDrawnPackets; n > 0 {
		s.LossDeliveredPct = round(float64(s.DroppedLossPackets)/float64(n)*100, 6)
		lo, hi := lossInterval(s.DroppedLossPackets, n, last.lossDE, LossReportLevel)
		s.LossCI95LowPct, s.LossCI95HighPct = round(lo*100, 6), round(hi*100, 6)
	}

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
		var by uint64
		if x, y := at(a, delivered), at(b, delivered); y > x {
			by = y - x
		}
		dt := b.Sub(a)
		if dt >= minPeak {
			s.RatePeakSecondBps = max(s.RatePeakSecondBps, round(float64(by)*8/dt.Seconds(), 0))
		}
		rate := pts[i].rateBps
		if rate <= 0 {
			continue
		}
		// The check holds an interval to the higher of the rates at its
		// ends: a rate lowered inside it is not a stray.
		if top := max(rate, pts[i-1].rateBps); dt >= minPeak && pts[i-1].rateBps > 0 {
			if x := float64(by) * 8 / rateAllowance(dt, top); x > in.rateExcess {
				in.rateExcess, in.rateExcessAt, in.rateAt = x, float64(by)*8/dt.Seconds(), top
			}
		}
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
	c := check(s, in)
	s.Check = &c
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
