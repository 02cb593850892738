package monitor

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
)

func pct(v float64) *float64 { return &v }

// link is a direction over the phase at avg and peak utilization of rate.
func link(rate int64, avg, peak float64) LinkSummary {
	return LinkSummary{RateBps: rate, ThroughputAvgBps: avg / 100 * float64(rate), UtilizationAvgPct: pct(avg), UtilizationPeakPct: pct(peak)}
}

func TestVerdict(t *testing.T) {
	growing := &ReplicaSummary{Samples: 30, LagGrows: true, BacklogUnit: engine.UnitBytes, BacklogGrowth: 5 << 20}
	steady := &ReplicaSummary{Samples: 30}
	busy := func(role string, cores float64) map[string]RoleSummary {
		return map[string]RoleSummary{role: {CPUS: cores * 30, Processes: 1}, "walreceiver": {CPUS: 0.3, Processes: 1}}
	}
	waiting := func(role string, share float64) map[string]RoleSummary {
		return map[string]RoleSummary{role: {CPUS: 3, IOWaitS: share * 30, Processes: 1}}
	}
	wan := []pathDir{{name: "primary->eu", link: link(10_000_000, 97, 99.5)}}
	idleWAN := []pathDir{{name: "primary->eu", link: link(100_000_000, 2, 4)}}
	cases := []struct {
		name string
		in   verdictInput
		want string
	}{
		{"replication stopped on an error: stopped, before any resource",
			verdictInput{apply: busy("startup", 0.95), replica: &ReplicaSummary{Samples: 30, LagGrows: true, StoppedSamples: 28,
				StoppedError: "from g2: Duplicate entry '9' for key 'PRIMARY'"}},
			"stopped (replication stopped in 28 of 30 samples: from g2: Duplicate entry '9' for key 'PRIMARY')"},
		{"stopped in a few samples only (restarted since): judged on the rest",
			verdictInput{apply: busy("startup", 0.2), replica: &ReplicaSummary{Samples: 30, StoppedSamples: 3, StoppedError: "x"}},
			"keeping up"},
		{"replay saturates a core: cpu-bound, whatever the link",
			verdictInput{apply: busy("startup", 0.95), replica: growing, path: wan, rtt: 80 * time.Millisecond},
			"cpu-bound (startup 95% of a core)"},
		{"just under the CPU threshold and keeping up",
			verdictInput{apply: busy("startup", 0.89), replica: steady},
			"keeping up"},
		{"two apply workers at 0.6 cores each are not one saturated core",
			verdictInput{apply: map[string]RoleSummary{"pglogical-apply": {CPUS: 36, Processes: 2}}, replica: steady},
			"keeping up"},
		{"a site limited to half a core: 0.46 cores is bound",
			verdictInput{apply: busy("logical-apply", 0.46), siteCores: 0.5, replica: steady},
			"cpu-bound (logical-apply 92% of the site's 0.5-core limit)"},
		{"a site limited to 0.2 cores, used up by the node's processes together",
			verdictInput{apply: map[string]RoleSummary{"startup": {CPUS: 2.4, Processes: 1}, "walreceiver": {CPUS: 2.7, Processes: 1}},
				siteCores: 0.2, nodeCores: 0.19, replica: growing, path: wan, rtt: 80 * time.Millisecond},
			"cpu-bound (the node's processes 95% of the site's 0.2-core limit)"},
		{"a CPU limit of 2 cores, half used: not bound",
			verdictInput{apply: busy("startup", 0.5), siteCores: 2, nodeCores: 1, replica: steady},
			"keeping up"},
		{"backends busy at the replica do not count (not an apply role)",
			verdictInput{apply: nil, replica: steady},
			"keeping up"},
		{"apply waits for I/O most of the time: io-bound",
			verdictInput{apply: waiting("startup", 0.7), ioWait: true, replica: growing},
			"io-bound (startup waited for I/O 70% of the time)"},
		{"I/O wait not measured: no io verdict",
			verdictInput{apply: waiting("startup", 0.7), ioWait: false, replica: steady},
			"keeping up"},
		{"saturated link and a growing backlog",
			verdictInput{apply: busy("startup", 0.2), replica: growing, path: wan, rtt: 80 * time.Millisecond},
			"network: link saturated (primary->eu 100%)"},
		{"saturated link but the replica keeps up",
			verdictInput{apply: busy("startup", 0.2), replica: steady, path: wan, rtt: 80 * time.Millisecond},
			"keeping up"},
		{"the busiest direction of a two-hop path names the bottleneck",
			verdictInput{replica: growing, rtt: 60 * time.Millisecond, path: []pathDir{
				{name: "primary->eu", link: link(100_000_000, 30, 40)},
				{name: "eu->asia", link: link(2_000_000, 88, 93)}}},
			"network: link saturated (eu->asia 93%)"},
		{"idle link, long RTT, growing backlog: window-limited",
			verdictInput{apply: busy("startup", 0.1), replica: growing, path: idleWAN, rtt: 200 * time.Millisecond},
			"network: window-limited (primary->eu 2% of 100 Mbit/s, RTT 200 ms: ≈ 48.8 KiB in flight)"},
		{"unlimited link, long RTT, growing backlog: window-limited",
			verdictInput{replica: growing, path: []pathDir{{name: "a->b", link: LinkSummary{ThroughputAvgBps: 2_000_000}}}, rtt: 655 * time.Millisecond},
			"network: window-limited (a->b 2 Mbit/s, RTT 655 ms: ≈ 159.9 KiB in flight)"},
		{"idle link, short RTT, growing backlog: no bound found",
			verdictInput{replica: growing, path: idleWAN, rtt: 2 * time.Millisecond},
			"falling behind (backlog grew 5 MiB over the phase; no CPU, I/O or network bound found)"},
		{"busy but not saturated link (70%) with a long RTT: not window-limited",
			verdictInput{replica: growing, path: []pathDir{{name: "a->b", link: link(10_000_000, 70, 85)}}, rtt: 100 * time.Millisecond},
			"falling behind (backlog grew 5 MiB over the phase; no CPU, I/O or network bound found)"},
		{"replica in the same site as its upstream: no network verdict",
			verdictInput{replica: growing},
			"falling behind (backlog grew 5 MiB over the phase; no CPU, I/O or network bound found)"},
		{"no replication samples",
			verdictInput{replica: nil, path: wan},
			"unknown (too few replication samples)"},
		{"no measure phase",
			verdictInput{measureS: -1, replica: steady},
			"unknown (no measure phase)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.in.measureS == 0 {
				c.in.measureS = 30
			}
			if got := verdict(c.in); got != c.want {
				t.Errorf("verdict\n got  %q\n want %q", got, c.want)
			}
		})
	}
}

func TestVerdictKindsPrefixTheirVerdicts(t *testing.T) {
	for _, k := range []string{VerdictStopped, VerdictCPU, VerdictIO, VerdictSaturated, VerdictWindowLimited, VerdictFallingBehind, VerdictKeepingUp, VerdictUnknown} {
		if strings.Contains(k, " (") {
			t.Errorf("kind %q contains the evidence separator", k)
		}
	}
}

func TestLagTrend(t *testing.T) {
	x := make([]float64, 30)
	for i := range x {
		x[i] = float64(i)
	}
	line := func(f func(i int) float64) []float64 {
		y := make([]float64, len(x))
		for i := range y {
			y[i] = f(i)
		}
		return y
	}
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name      string
		y         []float64
		wantGrows bool
	}{
		{"steady large backlog with noise (bytes in flight at high throughput)",
			line(func(int) float64 { return 1e6 + r.NormFloat64()*2e5 }), false},
		{"falls behind 100 KiB/s with noise",
			line(func(i int) float64 { return 5e5 + float64(i)*100*1024 + r.NormFloat64()*1e5 }), true},
		{"falls behind since warmup: large level, steady growth",
			line(func(i int) float64 { return 60e6 + float64(i)*1e6 }), true},
		{"grows, but by less than LagGrowthMinBytes",
			line(func(i int) float64 { return float64(i) * 1000 }), false},
		{"catches up: shrinking",
			line(func(i int) float64 { return 3e7 - float64(i)*1e6 }), false},
		{"idle: all zero", make([]float64, len(x)), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			slope, tstat := lagTrend(x, c.y)
			growth := slope * 30
			grows := growth >= LagGrowthMinBytes && tstat >= LagGrowthMinT
			if grows != c.wantGrows {
				t.Errorf("growth %.0f B, t %.2f: grows = %v, want %v", growth, tstat, grows, c.wantGrows)
			}
		})
	}
	if s, tt := lagTrend([]float64{0, 1}, []float64{0, 1e9}); s != 0 || tt != 0 {
		t.Errorf("two points: slope %v t %v, want 0 0 (too few to tell)", s, tt)
	}
	if _, tt := lagTrend(x, line(func(i int) float64 { return float64(i) * 1e6 })); !math.IsInf(tt, 1) {
		t.Errorf("perfect line: t %v, want +Inf", tt)
	}
}

func TestSummarizeReplication(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var pts []replPoint
	for s := 0; s <= 10; s++ {
		pts = append(pts, replPoint{t: at(s), rows: []engine.ReplicaState{
			// m2 is fed by two masters; its backlog from m1 grows 1 MB/s.
			{Node: "m2", From: "m1", Kind: "pglogical", Backlog: int64(s) * 1e6, BacklogUnit: engine.UnitBytes, ReplayLagMs: -1},
			{Node: "m2", From: "m3", Kind: "pglogical", Backlog: 1000, BacklogUnit: engine.UnitBytes, ReplayLagMs: 40, Error: stoppedAt(s)},
			{Node: "s1", From: "m1", Kind: "physical", Backlog: 5000, BacklogUnit: engine.UnitBytes, ReplayLagMs: float64(s), SyncState: syncAt(s)},
		}})
	}
	got := summarizeReplication(pts, at(2), at(8), 0)
	m2, s1 := got["m2"], got["s1"]
	if m2.From != "m1,m3" || m2.Kind != "pglogical" || m2.Samples != 7 || m2.BytesBehindMax != 8e6+1000 || !m2.LagGrows {
		t.Errorf("m2 %+v: want both upstreams summed over the 7 samples in [2 s, 8 s], growing", m2)
	}
	if math.Abs(m2.BytesBehindGrowth-6e6) > 1 {
		t.Errorf("m2 growth %.0f, want 6e6 (1 MB/s over 6 s)", m2.BytesBehindGrowth)
	}
	if m2.ReplayLagMs == nil || m2.ReplayLagMs.Count != 7 || math.Abs(m2.ReplayLagMs.Max-40) > 0.1 {
		t.Errorf("m2 replay lag %+v: want only the stream that had one", m2.ReplayLagMs)
	}
	if s1.LagGrows || s1.BytesBehindMean != 5000 || s1.ReplayLagMs.P50 < 4.9 || s1.ReplayLagMs.P50 > 5.1 {
		t.Errorf("s1 %+v (replay lag %+v)", s1, s1.ReplayLagMs)
	}
	// s1 fell back to asynchronous for samples 4 and 5: in [2 s, 8 s] 2 of
	// 7 samples, one change there and one back.
	if s1.SyncStates["async-fallback"] != 2 || s1.SyncStates["semi-sync"] != 5 || s1.SyncStateChanges != 2 || m2.SyncStates != nil {
		t.Errorf("s1 sync states %v, %d changes; m2 %v", s1.SyncStates, s1.SyncStateChanges, m2.SyncStates)
	}
}

// stoppedAt is the stream's error at second s: stopped from 6 s on (after
// a first error at 1 s, before the phase, that cleared).
func stoppedAt(s int) string {
	switch {
	case s == 1:
		return "an earlier error"
	case s >= 6:
		return "Duplicate entry '9' for key 'PRIMARY'"
	}
	return ""
}

func TestSummarizeReplicationStopped(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var pts []replPoint
	for s := 0; s <= 10; s++ {
		pts = append(pts, replPoint{t: at(s), rows: []engine.ReplicaState{
			{Node: "m2", From: "m3", Kind: "binlog", BacklogUnit: engine.UnitTransactions, ReplayLagMs: -1, Error: stoppedAt(s)},
			{Node: "m3", From: "m2", Kind: "binlog", BacklogUnit: engine.UnitTransactions, ReplayLagMs: -1},
		}})
	}
	got := summarizeReplication(pts, at(2), at(8), 0)
	if m2 := got["m2"]; m2.StoppedSamples != 3 || m2.StoppedError != "from m3: Duplicate entry '9' for key 'PRIMARY'" {
		t.Errorf("m2 stopped in %d samples on %q: want 3 (6, 7, 8 s) on the error with its upstream", m2.StoppedSamples, m2.StoppedError)
	}
	if m3 := got["m3"]; m3.StoppedSamples != 0 || m3.StoppedError != "" {
		t.Errorf("m3 %+v: never stopped", m3)
	}
}

// A slow workload's backlog in transactions: 60 a minute across a serial
// line, the replica falling behind by about 21 a minute (the DIMHRS
// environment 2 at 9.6 kbit/s). 50 transactions never come; a tenth of
// those committed does.
func TestSlowBacklogGrowthCounts(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var pts []replPoint
	for s := 0; s <= 60; s++ {
		pts = append(pts, replPoint{t: at(s), rows: []engine.ReplicaState{
			{Node: "r", From: "p", Kind: "binlog", Backlog: int64(s*21/60) + int64(s%2), BacklogUnit: engine.UnitTransactions, ReplayLagMs: -1},
		}})
	}
	cases := []struct {
		committed int64
		want      bool
	}{
		{0, false},   // unknown: 50 transactions, never reached
		{60, true},   // 60 committed: 6 count
		{1e6, false}, // a fast workload: 50 still
		{10, true},   // at least 3
	}
	for _, c := range cases {
		if got := summarizeReplication(pts, at(0), at(60), c.committed)["r"]; got.LagGrows != c.want {
			t.Errorf("committed %d: growth %.1f, lag_grows %v, want %v", c.committed, got.BacklogGrowth, got.LagGrows, c.want)
		}
	}
}

func syncAt(s int) string {
	if s == 4 || s == 5 {
		return "async-fallback"
	}
	return "semi-sync"
}
