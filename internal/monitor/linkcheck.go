package monitor

import (
	"fmt"
	"math"
	"time"

	"replab/internal/linkem"
	"replab/internal/linkem/emu"
	"replab/internal/stats"
	"replab/internal/units"
)

// The link fact check: what a direction was configured to do next to
// what it delivered over the measure phase (issue 34). docs/metrics.md
// states each tolerance and why.
const (
	// LatenessToleranceUs is the largest lateness p99 of a faithful
	// direction: the status warning's threshold (emu.FaithfulP99Us).
	LatenessToleranceUs = emu.FaithfulP99Us
	// LossCheckLevel is the confidence of the interval the configured
	// loss must fall in. The summary shows the 95 % interval; the check
	// uses 99.9 %, so that an honest link is flagged once in a thousand
	// directions, not once in twenty (a run has several).
	LossCheckLevel = 0.999
	// LossReportLevel is the level of loss_ci95_*.
	LossReportLevel = 0.95
	// RateSlack is how much longer than the monitor measured an interval
	// may really have been: the monitor stamps a sample, then reads the
	// counters, and a sampling thread delayed up to 10 ms at either end
	// (a loaded 2-core machine) moves up to 20 ms of deliveries into the
	// interval.
	RateSlack = 20 * time.Millisecond
	// RateSlackBytes is the deliveries' granularity at an interval's two
	// ends: a delivery is counted whole, one MTU-sized packet each.
	RateSlackBytes = 2 * linkem.DefaultMTU
)

// ClassBytes are delivered bytes by traffic class (linkem.Class).
type ClassBytes struct {
	Replication uint64 `json:"replication"`
	Client      uint64 `json:"client"`
	Storage     uint64 `json:"storage"`
	Other       uint64 `json:"other"`
}

func classBytes(c [linkem.NumClasses]uint64) ClassBytes {
	return ClassBytes{Replication: c[linkem.ClassReplication], Client: c[linkem.ClassClient],
		Storage: c[linkem.ClassStorage], Other: c[linkem.ClassOther]}
}

// LinkCheck is one direction's verdict: each *_ok is false when the
// direction strayed past its tolerance, and Flags says how, one sentence
// each; Unchecked names what could not be checked, and why.
type LinkCheck struct {
	DelayOK   bool     `json:"delay_ok"`
	LossOK    bool     `json:"loss_ok"`
	RateOK    bool     `json:"rate_ok"`
	Flags     []string `json:"flags,omitempty"`
	Unchecked []string `json:"unchecked,omitempty"`
}

// OK says the direction passed every check.
func (c LinkCheck) OK() bool { return c.DelayOK && c.LossOK && c.RateOK }

// checkInput is what the checks need beyond the summary's figures.
type checkInput struct {
	lossChanged  bool    // the configured loss changed during the phase
	lossDE       float64 // the loss models' design effect (linkem.Params.LossDesignEffect)
	trace        bool    // trace-driven rate
	rateExcess   float64 // the worst interval's delivered bits over its allowance (≤ 1 passes); 0 = none measured
	rateExcessAt float64 // that interval's delivered bits per second
	rateAt       int64   // and its configured rate
}

// lossInterval is the Wilson interval of k lost in n that reached the
// loss draw, at level, for loss models with design effect de (the
// effective number of independent draws is n/de).
func lossInterval(k, n uint64, de, level float64) (lo, hi float64) {
	if de < 1 || math.IsNaN(de) {
		de = 1
	}
	if math.IsInf(de, 1) {
		return 0, 1
	}
	return stats.Wilson(float64(k)/de, float64(n)/de, level)
}

// check judges s (whose figures are filled in) and returns its verdict.
func check(s LinkSummary, in checkInput) LinkCheck {
	c := LinkCheck{DelayOK: true, LossOK: true, RateOK: true}
	if s.LatenessCount > 0 && s.LatenessP99Us > LatenessToleranceUs {
		c.DelayOK = false
		c.Flags = append(c.Flags, fmt.Sprintf("delay: configured %s ms, delivered p99 %s ms (the emulator's lateness p99 %.2f ms > %.0f ms): "+
			"packets arrived later than the link says; the emulator was short of CPU, and the run measures this machine as much as the link",
			fmtMs(s.DelayMs), fmtMs(s.DelayP99Ms), s.LatenessP99Us/1e3, LatenessToleranceUs/1e3))
	}
	n := s.LossDrawnPackets
	switch {
	case in.lossChanged:
		c.Unchecked = append(c.Unchecked, "loss: the configured loss changed during the phase")
	case n == 0:
	default:
		lo, hi := lossInterval(s.DroppedLossPackets, n, in.lossDE, LossCheckLevel)
		cfg := s.LossConfiguredPct / 100
		if cfg < lo || cfg > hi {
			c.LossOK = false
			c.Flags = append(c.Flags, fmt.Sprintf("loss: configured %s %%, delivered %s %% (%d of %d packets; %.1f %% interval %s–%s %%): "+
				"the loss models did not lose what they were set to", fmtLossPct(s.LossConfiguredPct), fmtLossPct(s.LossDeliveredPct),
				s.DroppedLossPackets, n, LossCheckLevel*100, fmtLossPct(lo*100), fmtLossPct(hi*100)))
		}
	}
	switch {
	case in.trace:
		c.Unchecked = append(c.Unchecked, "rate: trace-driven; a second may carry more than the trace's mean")
	case in.rateExcess > 1:
		c.RateOK = false
		c.Flags = append(c.Flags, fmt.Sprintf("rate: configured %s, a second delivered %s (+%.1f %%): "+
			"the link carried more than its rate; its utilization and queueing are understated",
			fmtBps(float64(in.rateAt)), fmtBps(in.rateExcessAt), (in.rateExcessAt/float64(in.rateAt)-1)*100))
	}
	return c
}

// rateAllowance is the most bits an interval of dt at rateBps may
// deliver without flagging: see RateSlack and RateSlackBytes.
func rateAllowance(dt time.Duration, rateBps int64) float64 {
	return float64(rateBps)*(dt+RateSlack).Seconds() + RateSlackBytes*8
}

func fmtMs(v float64) string { return units.Trim(v, 3) }

func fmtLossPct(v float64) string { return units.Trim(v, 3) }

func fmtBps(v float64) string { return units.BitsPrec(v, 3) }
