package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/engine"
)

// nodeCPU is the CPU time one node has used so far, in seconds: for
// PostgreSQL the postmaster, the backends it has reaped, and every live
// child; for an engine whose roles are threads of one process (MariaDB),
// that process once.
func nodeCPU(ctx context.Context, c engine.Cluster, node string) float64 {
	// A backend the postmaster reaps while the children are read is in
	// neither sum (its /proc entry gone, the postmaster's reaped time read
	// before it): the read is taken again until the reaped time did not
	// move meanwhile. Backends exit together when a client does, and one
	// run's server CPU per transaction once came out a tenth of the
	// others'.
	var total float64
	for range 20 {
		var stable bool
		if total, stable = nodeCPUOnce(ctx, c, node); stable {
			break
		}
	}
	return total
}

// nodeCPUOnce is one read of nodeCPU; stable is false when a child was
// reaped during it.
func nodeCPUOnce(ctx context.Context, c engine.Cluster, node string) (total float64, stable bool) {
	ps, err := c.Processes(ctx)
	if err != nil {
		return 0, true
	}
	seen := map[int]bool{}
	postmaster, reaped0 := "", 0.0
	for _, p := range ps {
		if p.Node != node || seen[p.PID] {
			continue
		}
		seen[p.PID] = true
		self, reaped, err := benchkit.ProcTimes(strconv.Itoa(p.PID))
		if err != nil {
			continue // exited meanwhile: counted in the postmaster's reaped time
		}
		total += self
		if p.Role == "postmaster" {
			total += reaped
			postmaster, reaped0 = strconv.Itoa(p.PID), reaped
		}
	}
	if postmaster == "" {
		return total, true
	}
	_, reaped1, err := benchkit.ProcTimes(postmaster)
	return total, err == nil && reaped1 == reaped0
}

// Throughput on a 2-core machine depends on every other process: before
// each run the bench waits (a bounded time) for the machine to calm down.
// The lab's servers are idle between runs, so what remains is other work
// on the machine.
var quiet = benchkit.Quiet{
	Cores:   0.3,
	Window:  500 * time.Millisecond,
	Max:     2 * time.Second,
	Warning: "the next run shares the machine",
	Logf:    logf,
}

// selfSys is this process's system time (stime, /proc/self/stat field
// 15) in seconds: the kernel's share of its CPU, its system calls above
// all.
func selfSys() float64 { return statSys("/proc/self/stat") }

// statSys reads stime from a /proc/PID/stat file, in seconds.
func statSys(path string) float64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	n, _ := strconv.ParseInt(f[12], 10, 64)
	return float64(n) / benchkit.ClockTicks
}

// procSys is a process's system time (stime) in seconds.
func procSys(pid string) float64 { return statSys("/proc/" + pid + "/stat") }
