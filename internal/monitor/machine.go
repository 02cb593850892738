package monitor

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The machine as a whole: every lab's figures are partly this machine's,
// since every site, the emulator and the driver share its cores. Each
// sample reads the machine's CPU counters (/proc/stat) and replab's own
// (/proc/self/stat), so that the measure phase says how busy the machine
// was, who kept it busy — the nodes, replab itself, anything else — and
// whether it, rather than a site's budget or a link, was the limit.

// MachineFile is machine.csv: one row per sample interval.
const MachineFile = "machine.csv"

// MachineHeader is machine.csv's header:
//
//	t_s           seconds since Config.Epoch, at the interval's end
//	busy_cores    cores busy over the interval (not idle, not waiting for I/O)
//	steal_cores   cores the hypervisor gave to other guests
//	replab_cores  cores replab's own process used: driver, emulator, monitors
const MachineHeader = "t_s,busy_cores,steal_cores,replab_cores"

// Machine-bound thresholds: a second is busy from BusyFull of every core;
// a result is machine-bound when more than BoundShare of the measured
// seconds were busy, or the hypervisor took more than StealBound of the
// cores on average.
const (
	BusyFull   = 0.95
	BoundShare = 0.10
	StealBound = 0.05
)

// MachineSummary is the machine over the measure phase.
type MachineSummary struct {
	Cores int `json:"cores"`
	// Seconds is how long the samples cover the measure phase;
	// BusySeconds how much of it fell in sample intervals (about a second
	// each) with every core at least BusyFull busy.
	Seconds      float64 `json:"seconds"`
	BusySeconds  float64 `json:"busy_seconds"`
	BusyMeanPct  float64 `json:"busy_mean_pct"` // of all cores
	BusyP95Pct   float64 `json:"busy_p95_pct"`
	StealMeanPct float64 `json:"steal_mean_pct"`
	StealMaxPct  float64 `json:"steal_max_pct"`
	// Who used the cores, on average: the nodes' processes (what the
	// roles count), replab's own process, and everything else on the
	// machine (busy less both).
	ServerCores float64 `json:"servers_cores"`
	ReplabCores float64 `json:"replab_cores"`
	OtherCores  float64 `json:"other_cores"`
	// Bound: the machine, not a site's budget or a link, was the limit;
	// Why says what was seen.
	Bound bool   `json:"bound"`
	Why   string `json:"why,omitempty"`
}

// cpuTicks are the machine's CPU counters (all cores, in clock ticks) and
// this process's.
type cpuTicks struct {
	total, idle, steal uint64 // idle counts I/O wait too
	self               uint64 // utime + stime of this process
	ok                 bool
}

// machinePoint is one sample's counters.
type machinePoint struct {
	t time.Time
	c cpuTicks
}

// readCPUTicks reads root/stat's cpu line and root/self/stat; ok is false
// when the machine's line cannot be read.
func readCPUTicks(root string) cpuTicks {
	var c cpuTicks
	f, err := os.Open(filepath.Join(root, "stat"))
	if err != nil {
		return c
	}
	sc := bufio.NewScanner(f)
	if sc.Scan() {
		c = parseCPULine(sc.Text())
	}
	f.Close()
	if b, err := os.ReadFile(filepath.Join(root, "self", "stat")); err == nil {
		if st, err := ParseStat(b); err == nil {
			c.self = st.UTime + st.STime
		}
	}
	return c
}

// parseCPULine reads /proc/stat's aggregate line: "cpu user nice system
// idle iowait irq softirq steal guest guest_nice" (guest time is already
// in user and nice).
func parseCPULine(line string) cpuTicks {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuTicks{}
	}
	var v [8]uint64
	for i := 1; i < len(f) && i <= 8; i++ {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return cpuTicks{}
		}
		v[i-1] = n
	}
	var c cpuTicks
	for _, n := range v {
		c.total += n
	}
	c.idle, c.steal, c.ok = v[3]+v[4], v[7], true
	return c
}

// machineInterval is what happened between two samples.
type machineInterval struct {
	end          time.Time
	seconds      float64
	busy, steal  float64 // shares of all cores
	replabCores  float64
	withinWindow bool
}

func intervalOf(a, b machinePoint, cores int, hz uint64) (machineInterval, bool) {
	dt := b.t.Sub(a.t).Seconds()
	if !a.c.ok || !b.c.ok || dt <= 0 || b.c.total <= a.c.total {
		return machineInterval{}, false
	}
	total := float64(b.c.total - a.c.total)
	iv := machineInterval{end: b.t, seconds: dt,
		busy:  1 - float64(b.c.idle-a.c.idle)/total,
		steal: float64(b.c.steal-a.c.steal) / total}
	if hz > 0 && b.c.self >= a.c.self {
		iv.replabCores = float64(b.c.self-a.c.self) / float64(hz) / dt
	}
	iv.busy, iv.steal = clamp01(iv.busy), clamp01(iv.steal)
	return iv, true
}

func clamp01(x float64) float64 { return min(max(x, 0), 1) }

// summarizeMachine judges the measure phase [start, end] from the samples
// and the nodes' CPU (serverCores, from the roles).
func summarizeMachine(pts []machinePoint, start, end time.Time, cores int, hz uint64, serverCores float64) *MachineSummary {
	if cores <= 0 {
		return nil
	}
	// Each interval counts for the part of it inside the phase: the phase's
	// bounds need not fall on samples (a run marks them when it knows them).
	s := &MachineSummary{Cores: cores, ServerCores: round3(serverCores)}
	var secs, busySecs, busy, steal, replab float64
	type weighted struct{ busy, w float64 }
	var ws []weighted
	for i := 1; i < len(pts); i++ {
		from, to := pts[i-1].t, pts[i].t
		if from.Before(start) {
			from = start
		}
		if to.After(end) {
			to = end
		}
		w := to.Sub(from).Seconds()
		if w <= 0 {
			continue
		}
		iv, ok := intervalOf(pts[i-1], pts[i], cores, hz)
		if !ok {
			continue
		}
		secs += w
		busy += iv.busy * w
		steal += iv.steal * w
		replab += iv.replabCores * w
		ws = append(ws, weighted{iv.busy, w})
		s.StealMaxPct = max(s.StealMaxPct, 100*iv.steal)
		if iv.busy >= BusyFull {
			busySecs += w
		}
	}
	if secs <= 0 {
		return nil
	}
	// The 95th percentile of busy time: the busy share that 95 % of the
	// phase's seconds stayed at or under.
	sort.Slice(ws, func(i, j int) bool { return ws[i].busy < ws[j].busy })
	var acc float64
	for _, x := range ws {
		acc += x.w
		s.BusyP95Pct = 100 * x.busy
		if acc >= 0.95*secs {
			break
		}
	}
	s.Seconds, s.BusySeconds = round1(secs), round1(busySecs)
	s.BusyMeanPct = round3(100 * busy / secs)
	s.BusyP95Pct = round3(s.BusyP95Pct)
	s.StealMeanPct = round3(100 * steal / secs)
	s.StealMaxPct = round3(s.StealMaxPct)
	s.ReplabCores = round3(replab / secs)
	s.OtherCores = round3(max(busy/secs*float64(cores)-s.ReplabCores-s.ServerCores, 0))
	var why []string
	if busySecs/secs > BoundShare {
		why = append(why, fmt.Sprintf("every core was at least %.0f %% busy for %.1f of %.1f measured seconds", 100*BusyFull, busySecs, secs))
	}
	if s.StealMeanPct > 100*StealBound {
		why = append(why, fmt.Sprintf("the hypervisor took %.1f %% of the cores", s.StealMeanPct))
	}
	if len(why) > 0 {
		s.Bound = true
		s.Why = strings.Join(why, "; ") + fmt.Sprintf(" (the nodes used %.2f cores, replab %.2f, other work %.2f, of %d)", s.ServerCores, s.ReplabCores, s.OtherCores, cores)
	}
	return s
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

func round1(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }
