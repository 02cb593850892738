package monitor

import (
	"fmt"
	"time"

	"replab/internal/engine"
	"replab/internal/units"
)

// Verdict thresholds. A replica's verdict is the first rule that holds, in
// this order:
//
//  0. "stopped": the engine said the replica's replication had stopped on
//     an error (ReplicaSummary.StoppedError) in at least half of the
//     phase's samples: it applies nothing, whatever its resources.
//  1. "cpu-bound": one of its apply processes (a role the engine marks
//     Apply: PostgreSQL's walreceiver, startup, logical apply…) used at least
//     CPUBoundShare of a core over the measure phase (of the site's CPU
//     limit when that is below one core), or the site has a CPU limit and
//     the node's processes together used at least CPUBoundShare of it.
//     The CERN GoldenGate study added apply processes when they reached
//     90–100 % CPU.
//  2. "io-bound": one of its apply processes spent at least IOBoundShare of
//     the phase waiting for block I/O (needs delay accounting).
//  3. "network: link saturated": its backlog grows (ReplicaSummary.LagGrows)
//     and a direction on the path from its upstream peaked at
//     SaturatedPeakPct or more of the configured rate.
//  4. "network: window-limited": its backlog grows, every rate-limited
//     direction on that path averaged below WindowLimitedMaxAvgPct, and the
//     configured round trip is at least WindowLimitedMinRTT: TCP cannot
//     keep enough bytes in flight (window / RTT), so the sender waits for
//     acknowledgements while the link idles.
//  5. "falling behind": its backlog grows and none of the above explains it.
//  6. "keeping up": otherwise.
//
// "unknown" is given when there is no measure phase or fewer than three
// replication samples. Every verdict but "keeping up" and "unknown" carries
// its evidence in parentheses; the kind is the text before " (".
const (
	CPUBoundShare          = 0.90
	IOBoundShare           = 0.50
	SaturatedPeakPct       = 90.0
	WindowLimitedMaxAvgPct = 50.0
	WindowLimitedMinRTT    = 10 * time.Millisecond
)

// Verdict kinds.
const (
	VerdictStopped       = "stopped"
	VerdictCPU           = "cpu-bound"
	VerdictIO            = "io-bound"
	VerdictSaturated     = "network: link saturated"
	VerdictWindowLimited = "network: window-limited"
	VerdictFallingBehind = "falling behind"
	VerdictKeepingUp     = "keeping up"
	VerdictUnknown       = "unknown"
)

// pathDir is one direction on the path from an upstream to a replica.
type pathDir struct {
	name string // "a->b"
	link LinkSummary
}

// verdictInput is everything one replica's verdict looks at.
type verdictInput struct {
	measureS  float64
	siteCores float64 // the site's CPU limit in cores; 0 = none
	nodeCores float64 // cores the node's processes used together
	apply     map[string]RoleSummary
	ioWait    bool            // I/O wait was measured
	replica   *ReplicaSummary // nil: the engine reported nothing for it
	path      []pathDir       // directions from its upstream(s) toward it
	rtt       time.Duration   // configured round trip to its upstream (the longest)
}

func verdict(in verdictInput) string {
	if in.measureS <= 0 {
		return VerdictUnknown + " (no measure phase)"
	}
	if r := in.replica; r != nil && r.StoppedError != "" && r.StoppedSamples*2 >= max(r.Samples, 1) {
		return fmt.Sprintf("%s (replication stopped in %d of %d samples: %s)", VerdictStopped, r.StoppedSamples, r.Samples, r.StoppedError)
	}
	limit := in.siteCores // what one process can use
	if limit <= 0 || limit > 1 {
		limit = 1
	}
	// Per process: a role with two workers needs two cores to be bound.
	perProc := func(v float64, rs RoleSummary) float64 { return v / in.measureS / float64(max(rs.Processes, 1)) }
	role, cores := "", 0.0
	for r, rs := range in.apply {
		if c := perProc(rs.CPUS, rs); c > cores || (c == cores && r < role) {
			role, cores = r, c
		}
	}
	if role != "" && cores >= CPUBoundShare*limit {
		if limit < 1 {
			return fmt.Sprintf("%s (%s %.0f%% of the site's %.2g-core limit)", VerdictCPU, role, cores/limit*100, limit)
		}
		return fmt.Sprintf("%s (%s %.0f%% of a core)", VerdictCPU, role, cores*100)
	}
	if in.siteCores > 0 && in.nodeCores >= CPUBoundShare*in.siteCores {
		return fmt.Sprintf("%s (the node's processes %.0f%% of the site's %.2g-core limit)", VerdictCPU, in.nodeCores/in.siteCores*100, in.siteCores)
	}
	if in.ioWait {
		role, share := "", 0.0
		for r, rs := range in.apply {
			if s := perProc(rs.IOWaitS, rs); s > share || (s == share && r < role) {
				role, share = r, s
			}
		}
		if role != "" && share >= IOBoundShare {
			return fmt.Sprintf("%s (%s waited for I/O %.0f%% of the time)", VerdictIO, role, share*100)
		}
	}
	if in.replica == nil || in.replica.Samples < 3 {
		return VerdictUnknown + " (too few replication samples)"
	}
	if !in.replica.LagGrows {
		return VerdictKeepingUp
	}
	var peakDir *pathDir
	limited, maxAvg := false, 0.0
	for i := range in.path {
		d := &in.path[i]
		if d.link.UtilizationPeakPct == nil {
			continue
		}
		limited = true
		maxAvg = max(maxAvg, *d.link.UtilizationAvgPct)
		if peakDir == nil || *d.link.UtilizationPeakPct > *peakDir.link.UtilizationPeakPct {
			peakDir = d
		}
	}
	if peakDir != nil && *peakDir.link.UtilizationPeakPct >= SaturatedPeakPct {
		return fmt.Sprintf("%s (%s %.0f%%)", VerdictSaturated, peakDir.name, *peakDir.link.UtilizationPeakPct)
	}
	if len(in.path) > 0 && in.rtt >= WindowLimitedMinRTT && (!limited || maxAvg < WindowLimitedMaxAvgPct) {
		// The direction out of the upstream carries the stream; what it
		// delivers per round trip is what TCP kept in flight.
		d := in.path[0]
		inFlight := d.link.ThroughputAvgBps / 8 * in.rtt.Seconds()
		use := units.Bits(d.link.ThroughputAvgBps)
		if d.link.UtilizationAvgPct != nil {
			use = fmt.Sprintf("%s%% of %s", fmtPct(*d.link.UtilizationAvgPct), units.Bits(float64(d.link.RateBps)))
		}
		return fmt.Sprintf("%s (%s %s, RTT %.0f ms: ≈ %s in flight)", VerdictWindowLimited, d.name, use,
			float64(in.rtt)/1e6, units.Bytes(inFlight))
	}
	grew := units.Bytes(in.replica.BacklogGrowth)
	if u := in.replica.BacklogUnit; u != engine.UnitBytes && u != "" {
		grew = fmt.Sprintf("%.0f %s", in.replica.BacklogGrowth, u)
	}
	return fmt.Sprintf("%s (backlog grew %s over the phase; no CPU, I/O or network bound found)", VerdictFallingBehind, grew)
}

// fmtPct writes a percentage with two significant digits below 10.
func fmtPct(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.2g", v)
	}
	return fmt.Sprintf("%.0f", v)
}
