package monitor

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"replab/internal/linkem"
	"replab/internal/linkem/emu"
)

func TestLinkCheck(t *testing.T) {
	ok := LinkSummary{DelayMs: 25, LatenessCount: 1000, LatenessP99Us: 90, DelayP99Ms: 25.09,
		LossConfiguredPct: 1, LossDrawnPackets: 100_000, DroppedLossPackets: 1000, LossDeliveredPct: 1}
	tests := []struct {
		name      string
		s         func(s *LinkSummary)
		in        checkInput
		delay     bool
		loss      bool
		rate      bool
		flag      string // a flag that must be there ("" = none at all)
		unchecked string
	}{
		{name: "a faithful link has no flags", delay: true, loss: true, rate: true},
		{name: "lateness p99 over 1 ms strays", s: func(s *LinkSummary) { s.LatenessP99Us, s.DelayP99Ms = 1152, 26.152 },
			loss: true, rate: true, flag: "delay: configured 25 ms, delivered p99 26.152 ms"},
		{name: "lateness p99 at 1 ms passes", s: func(s *LinkSummary) { s.LatenessP99Us = 1000 }, delay: true, loss: true, rate: true},
		{name: "no deliveries: no delay verdict", s: func(s *LinkSummary) { s.LatenessCount, s.LatenessP99Us = 0, 5000 }, delay: true, loss: true, rate: true},
		{name: "1.3 % lost of 100000 at 1 % strays", s: func(s *LinkSummary) { s.DroppedLossPackets, s.LossDeliveredPct = 1300, 1.3 },
			delay: true, rate: true, flag: "loss: configured 1 %, delivered 1.3 %"},
		{name: "1.08 % lost of 100000 at 1 % passes at 99.9 %", s: func(s *LinkSummary) { s.DroppedLossPackets = 1080 },
			delay: true, loss: true, rate: true},
		{name: "loss where none is configured strays", s: func(s *LinkSummary) { s.LossConfiguredPct, s.DroppedLossPackets = 0, 5 },
			delay: true, rate: true, flag: "loss: configured 0 %"},
		{name: "Gilbert-Elliott bursts widen the interval", s: func(s *LinkSummary) { s.DroppedLossPackets = 1300 },
			in: checkInput{lossDE: 99}, delay: true, loss: true, rate: true},
		{name: "a loss changed by a fault is not checked", s: func(s *LinkSummary) { s.DroppedLossPackets = 5000 },
			in: checkInput{lossChanged: true}, delay: true, loss: true, rate: true, unchecked: "loss: the configured loss changed"},
		{name: "a second over the rate's allowance strays", in: checkInput{rateExcess: 1.03, rateExcessAt: 10.5e6, rateAt: 10e6},
			delay: true, loss: true, flag: "rate: configured 10 Mbit/s, a second delivered 10.5 Mbit/s (+5.0 %)"},
		{name: "inside the allowance passes", in: checkInput{rateExcess: 0.999, rateExcessAt: 10.1e6, rateAt: 10e6},
			delay: true, loss: true, rate: true},
		{name: "a trace's rate is not checked", in: checkInput{trace: true, rateExcess: 3, rateExcessAt: 30e6, rateAt: 10e6},
			delay: true, loss: true, rate: true, unchecked: "rate: trace-driven"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			if tt.s != nil {
				tt.s(&s)
			}
			c := check(s, tt.in)
			if c.DelayOK != tt.delay || c.LossOK != tt.loss || c.RateOK != tt.rate {
				t.Errorf("delay/loss/rate ok = %v/%v/%v; want %v/%v/%v (flags %q)", c.DelayOK, c.LossOK, c.RateOK, tt.delay, tt.loss, tt.rate, c.Flags)
			}
			if tt.flag == "" && len(c.Flags) > 0 {
				t.Errorf("flags %q; want none", c.Flags)
			}
			if tt.flag != "" && (len(c.Flags) != 1 || !strings.Contains(c.Flags[0], tt.flag)) {
				t.Errorf("flags %q; want one containing %q", c.Flags, tt.flag)
			}
			if tt.unchecked != "" && (len(c.Unchecked) != 1 || !strings.Contains(c.Unchecked[0], tt.unchecked)) {
				t.Errorf("unchecked %q; want one containing %q", c.Unchecked, tt.unchecked)
			}
		})
	}
}

func TestRateAllowance(t *testing.T) {
	// 10 Mbit/s over 1 s: 1.02 s of the rate and two 1500-byte packets.
	if got, want := rateAllowance(time.Second, 10_000_000), 10_200_000.0+24_000; got != want {
		t.Errorf("rateAllowance = %v; want %v", got, want)
	}
}

// factSeries builds one sample a second; sec[i] is what second i+1
// added: bytes delivered (all of class cls[i]), offered packets, packets
// lost, and deliveries of the given lateness.
type factSec struct {
	bytes             uint64
	cls               linkem.Class
	offered, lost     uint64
	deliveries        uint64
	latenessUs        int
	loss              float64
	rate              int64
	queueDropsOffered uint64
}

func factSeries(t0 time.Time, delay time.Duration, secs []factSec) []linkPoint {
	var c linkem.Counters
	var prev, cur emu.LateHist
	first := secs[0]
	pts := []linkPoint{{t: t0, rateBps: first.rate, delay: delay, loss: first.loss, lossDE: 1}}
	for i, s := range secs {
		c.DeliveredBytes += s.bytes
		c.DeliveredPackets += s.bytes / 1000
		c.ClassBytes[s.cls] += s.bytes
		c.OfferedPackets += s.offered + s.queueDropsOffered
		c.DroppedQueuePackets += s.queueDropsOffered
		c.DroppedLossPackets += s.lost
		for range s.deliveries {
			cur[lateBucketOf(s.latenessUs)]++
		}
		pts = append(pts, linkPoint{t: t0.Add(time.Duration(i+1) * time.Second), c: c, rateBps: s.rate, delay: delay,
			loss: s.loss, lossDE: 1, late: lateDiff(&prev, &cur)})
		prev = cur
	}
	return pts
}

// lateBucketOf finds the bucket whose range holds us (emu's own index is
// unexported).
func lateBucketOf(us int) int {
	for i := range emu.LateBuckets {
		if float64(us) < emu.LateBucketUpperUs(i) {
			return i
		}
	}
	return emu.LateBuckets - 1
}

func TestSummarizeLinkFacts(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const mbit = 1_000_000
	// Warm-up second 1 is late and lossy, seconds 2–3 are the phase,
	// second 4 (cool-down) is late again: none of it may leak in.
	secs := []factSec{
		{bytes: 125_000, cls: linkem.ClassClient, offered: 1000, lost: 500, deliveries: 100, latenessUs: 5000, loss: 0.01, rate: mbit},
		{bytes: 100_000, cls: linkem.ClassReplication, offered: 1000, lost: 10, deliveries: 120, latenessUs: 20, loss: 0.01, rate: mbit},
		{bytes: 50_000, cls: linkem.ClassStorage, offered: 1000, lost: 10, deliveries: 100, latenessUs: 40, loss: 0.01, rate: mbit, queueDropsOffered: 7},
		{bytes: 125_000, cls: linkem.ClassOther, offered: 1000, lost: 500, deliveries: 100, latenessUs: 5000, loss: 0.01, rate: mbit},
	}
	s := summarizeLink(factSeries(t0, 25*time.Millisecond, secs), t0.Add(time.Second), t0.Add(3*time.Second), 500*time.Millisecond)
	want := LinkSummary{
		Bytes: 150_000, Packets: 150, DroppedQueuePackets: 7, DroppedLossPackets: 20, ThroughputAvgBps: 600_000,
		RateBps: mbit, QueuePeakBytes: 0, DelayMs: 25,
		LatenessCount: 220, LatenessP50Us: 22, LatenessP99Us: 44, DelayP50Ms: 25.022, DelayP99Ms: 25.044,
		OfferedPackets: 2007, LossDrawnPackets: 2000, LossConfiguredPct: 1, LossDeliveredPct: 1,
		RatePeakSecondBps: 800_000,
		BytesByClass:      ClassBytes{Replication: 100_000, Storage: 50_000},
		Check:             &LinkCheck{DelayOK: true, LossOK: true, RateOK: true},
	}
	// Bounds of the 95 % interval: checked apart (floating point).
	if s.LossCI95LowPct >= 1 || s.LossCI95HighPct <= 1 || s.LossCI95LowPct < 0.5 || s.LossCI95HighPct > 1.6 {
		t.Errorf("loss 95 %% interval [%v, %v] %%; want around 1 %%", s.LossCI95LowPct, s.LossCI95HighPct)
	}
	s.LossCI95LowPct, s.LossCI95HighPct = 0, 0
	s.UtilizationAvgPct, s.UtilizationPeakPct = nil, nil
	if !equalSummary(s, want) {
		t.Errorf("summary\n got %+v\nwant %+v", s, want)
	}

	t.Run("a late and over-rate phase is flagged", func(t *testing.T) {
		bad := []factSec{
			{bytes: 100_000, offered: 100, deliveries: 100, latenessUs: 20, rate: mbit},
			{bytes: 140_000, offered: 100, deliveries: 100, latenessUs: 2000, rate: mbit},
		}
		s := summarizeLink(factSeries(t0, 0, bad), t0, t0.Add(2*time.Second), 500*time.Millisecond)
		if s.Check.DelayOK || s.Check.RateOK || !s.Check.LossOK || len(s.Check.Flags) != 2 {
			t.Errorf("check %+v; want delay and rate flagged", s.Check)
		}
		if s.RatePeakSecondBps != 1_120_000 {
			t.Errorf("rate peak second %v; want 1120000", s.RatePeakSecondBps)
		}
	})
}

func equalSummary(a, b LinkSummary) bool {
	ac, bc := a.Check, b.Check
	if ac == nil || bc == nil {
		return ac == bc && reflect.DeepEqual(a, b)
	}
	a.Check, b.Check = nil, nil
	return reflect.DeepEqual(a, b) && ac.OK() == bc.OK() && len(ac.Flags) == len(bc.Flags) && len(ac.Unchecked) == len(bc.Unchecked)
}

// TestLossCheckPassesHonestModels runs linkem's own loss models (pure, on
// a virtual clock) and checks that their delivered loss passes: the
// tolerance holds for independent loss and for Gilbert-Elliott bursts,
// whose correlation the design effect accounts for.
func TestLossCheckPassesHonestModels(t *testing.T) {
	tests := []struct {
		name string
		p    linkem.Params
	}{
		{"1 % independent", linkem.Params{Loss: 0.01}},
		{"Gilbert-Elliott bursts of 4, 1 % mean", linkem.Params{GE: &linkem.GilbertElliott{P: 0.0025, R: 0.25, LossBad: 1}}},
		{"Gilbert-Elliott long bursts, 5 % mean", linkem.Params{GE: &linkem.GilbertElliott{P: 0.001, R: 0.02, LossBad: 1}}},
	}
	const packets, seeds = 20_000, 20
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flagged := 0
			for seed := range int64(seeds) {
				p := tt.p
				p.Seed = seed + 1
				d := linkem.NewDirection(p)
				for i := range packets {
					d.Offer(int64(i)*1000, 100)
				}
				c := d.Counters()
				s := LinkSummary{LossConfiguredPct: p.MeanLoss() * 100, LossDrawnPackets: c.OfferedPackets, DroppedLossPackets: c.DroppedLossPackets}
				if chk := check(s, checkInput{lossDE: p.LossDesignEffect()}); !chk.LossOK {
					flagged++
					t.Logf("seed %d: %s", seed+1, chk.Flags[0])
				}
			}
			if flagged > 0 {
				t.Errorf("%d of %d honest runs flagged", flagged, seeds)
			}
		})
	}
}
