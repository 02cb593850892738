package monitor

import (
	"math"
	"testing"
	"time"

	"replab/internal/linkem"
)

func TestUtilizationPct(t *testing.T) {
	cases := []struct {
		name   string
		bytes  uint64
		dt     time.Duration
		rate   int64
		want   float64
		wantOK bool
	}{
		{"a full second at 1 Mbit/s", 125_000, time.Second, 1_000_000, 100, true},
		{"half the rate", 62_500, time.Second, 1_000_000, 50, true},
		{"9.6 kbit/s serial line, 2 s", 1_200, 2 * time.Second, 9_600, 50, true},
		{"a short interval scales up", 12_500, 100 * time.Millisecond, 1_000_000, 100, true},
		{"idle", 0, time.Second, 1_000_000, 0, true},
		{"unlimited link: no utilization", 1 << 20, time.Second, 0, 0, false},
		{"empty interval", 10, 0, 1_000_000, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := UtilizationPct(c.bytes, c.dt, c.rate)
			if ok != c.wantOK || math.Abs(got-c.want) > 1e-9 {
				t.Errorf("UtilizationPct(%d, %s, %d) = %.3f, %v; want %.3f, %v", c.bytes, c.dt, c.rate, got, ok, c.want, c.wantOK)
			}
		})
	}
}

// series builds samples every second from per-second delivered bytes,
// with the rate in force during each second.
func series(t0 time.Time, perSec []uint64, rates []int64) []linkPoint {
	pts := []linkPoint{{t: t0, rateBps: rates[0]}}
	var c linkem.Counters
	for i, b := range perSec {
		c.DeliveredBytes += b
		c.DeliveredPackets += b / 1000
		pts = append(pts, linkPoint{t: t0.Add(time.Duration(i+1) * time.Second), c: c, rateBps: rates[min(i, len(rates)-1)]})
	}
	return pts
}

func TestSummarizeLink(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	const mbit = 1_000_000
	cases := []struct {
		name      string
		pts       []linkPoint
		start     float64
		end       float64
		bytes     uint64
		avg, peak float64 // percent; negative: want null (unlimited)
	}{
		{
			name: "steady half rate", pts: series(t0, []uint64{62_500, 62_500, 62_500, 62_500}, []int64{mbit}),
			start: 0, end: 4, bytes: 250_000, avg: 50, peak: 50,
		},
		{
			name: "measure phase excludes warmup and cooldown", pts: series(t0, []uint64{125_000, 25_000, 25_000, 125_000}, []int64{mbit}),
			start: 1, end: 3, bytes: 50_000, avg: 20, peak: 20,
		},
		{
			name: "boundaries between samples are interpolated", pts: series(t0, []uint64{100_000, 50_000, 100_000}, []int64{mbit}),
			// half of second 1 (50 000), all of second 2 (50 000), half of second 3 (50 000)
			start: 0.5, end: 2.5, bytes: 150_000, avg: 60, peak: 80, // the interpolated halves carry their seconds' rate
		},
		{
			name: "peak is the busiest whole interval", pts: series(t0, []uint64{12_500, 118_750, 12_500, 12_500}, []int64{mbit}),
			start: 0, end: 4, bytes: 156_250, avg: 31.25, peak: 95,
		},
		{
			name: "unlimited link reports bytes only", pts: series(t0, []uint64{1 << 20, 1 << 20}, []int64{0}),
			start: 0, end: 2, bytes: 2 << 20, avg: -1, peak: -1,
		},
		{
			name: "rate change mid-phase weights capacity", pts: series(t0, []uint64{125_000, 125_000}, []int64{mbit, 2 * mbit}),
			// 2 Mbit delivered of 1 + 2 Mbit capacity
			start: 0, end: 2, bytes: 250_000, avg: 200.0 / 3, peak: 100,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := summarizeLink(c.pts, at(c.start), at(c.end), 500*time.Millisecond)
			if s.Bytes != c.bytes {
				t.Errorf("bytes %d, want %d", s.Bytes, c.bytes)
			}
			if want := float64(c.bytes) * 8 / (c.end - c.start); math.Abs(s.ThroughputAvgBps-want) > 1 {
				t.Errorf("throughput %.1f bit/s, want %.1f", s.ThroughputAvgBps, want)
			}
			checkPct(t, "average", s.UtilizationAvgPct, c.avg)
			checkPct(t, "peak", s.UtilizationPeakPct, c.peak)
		})
	}
}

func checkPct(t *testing.T, what string, got *float64, want float64) {
	t.Helper()
	switch {
	case want < 0 && got != nil:
		t.Errorf("%s utilization %.2f%%, want none (unlimited link)", what, *got)
	case want >= 0 && got == nil:
		t.Errorf("%s utilization missing, want %.2f%%", what, want)
	case want >= 0 && math.Abs(*got-want) > 1e-3:
		t.Errorf("%s utilization %.4f%%, want %.4f%%", what, *got, want)
	}
}

func TestSummarizeLinkSliverIsNotAPeak(t *testing.T) {
	// A boundary sample 50 ms after a tick: a burst in that sliver would
	// read as 1000 % for one interval.
	t0 := time.Unix(0, 0)
	pts := []linkPoint{
		{t: t0, rateBps: 1_000_000},
		{t: t0.Add(time.Second), c: linkem.Counters{DeliveredBytes: 50_000}, rateBps: 1_000_000},
		{t: t0.Add(1050 * time.Millisecond), c: linkem.Counters{DeliveredBytes: 112_500}, rateBps: 1_000_000},
	}
	s := summarizeLink(pts, t0, t0.Add(1050*time.Millisecond), 500*time.Millisecond)
	if *s.UtilizationPeakPct != 40 {
		t.Errorf("peak %.1f%%, want 40%% (the sliver is too short to count)", *s.UtilizationPeakPct)
	}
}

func TestSummarizeLinkDropsAndQueue(t *testing.T) {
	t0 := time.Unix(0, 0)
	c := func(q, hw int64, dq, dl, do uint64) linkem.Counters {
		return linkem.Counters{QueueBytes: q, QueueHighWaterBytes: hw, DroppedQueuePackets: dq, DroppedLossPackets: dl, DroppedOtherPackets: do}
	}
	pts := []linkPoint{
		{t: t0, c: c(0, 90_000, 5, 1, 0)}, // high water from the load, before the phase
		{t: t0.Add(time.Second), c: c(20_000, 90_000, 5, 3, 0)},
		{t: t0.Add(2 * time.Second), c: c(1_000, 60_000, 9, 4, 2)}, // hw cannot fall; stale sample
		{t: t0.Add(3 * time.Second), c: c(0, 120_000, 12, 4, 2)},   // the phase's own peak
		{t: t0.Add(4 * time.Second), c: c(0, 150_000, 30, 9, 9)},   // after the phase
	}
	s := summarizeLink(pts, t0, t0.Add(3*time.Second), 500*time.Millisecond)
	if s.DroppedQueuePackets != 7 || s.DroppedLossPackets != 3 || s.DroppedOtherPackets != 2 {
		t.Errorf("drops queue %d loss %d other %d, want 7 3 2", s.DroppedQueuePackets, s.DroppedLossPackets, s.DroppedOtherPackets)
	}
	if s.QueuePeakBytes != 120_000 {
		t.Errorf("queue peak %d, want 120000 (the high-water mark reached in the phase, not the load's nor the cooldown's)", s.QueuePeakBytes)
	}
}

func TestRateOfTrace(t *testing.T) {
	tr := &linkem.Trace{Opportunity: []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, PeriodMs: 10}
	if got := rateOf(linkem.Params{RateBps: 5, Trace: tr}); got != 12_000_000 {
		t.Errorf("trace rate %d, want 12 Mbit/s (one 1500-byte opportunity per ms)", got)
	}
	if got := rateOf(linkem.Params{RateBps: 9600}); got != 9600 {
		t.Errorf("rate %d", got)
	}
}
