package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"replab/internal/engine"
)

// clockTicks is USER_HZ, the unit of /proc/*/stat times (100 on Linux).
const clockTicks = 100

// procTimes reads utime, stime, cutime and cstime of a process, in
// seconds. cutime/cstime hold the children it has reaped: a postmaster's
// finished backends.
func procTimes(pid string) (self, children float64, err error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("parse /proc/%s/stat", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("parse /proc/%s/stat: %d fields", pid, len(f))
	}
	v := make([]float64, 4)
	for k := range v {
		n, err := strconv.ParseInt(f[11+k], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse /proc/%s/stat: %w", pid, err)
		}
		v[k] = float64(n) / clockTicks
	}
	return v[0] + v[1], v[2] + v[3], nil
}

// selfCPU is this process's user + system time from /proc/self/stat, in
// seconds (10 ms resolution).
func selfCPU() float64 {
	s, _, _ := procTimes("self")
	return s
}

// nodeCPU is the CPU time one PostgreSQL node has used so far, in seconds:
// the postmaster, the backends it has reaped, and every live child.
func nodeCPU(ctx context.Context, c engine.Cluster, node string) float64 {
	ps, err := c.Processes(ctx)
	if err != nil {
		return 0
	}
	var total float64
	for _, p := range ps {
		if p.Node != node {
			continue
		}
		self, reaped, err := procTimes(strconv.Itoa(p.PID))
		if err != nil {
			continue // exited meanwhile: counted in the postmaster's reaped time
		}
		total += self
		if p.Role == "postmaster" {
			total += reaped
		}
	}
	return total
}

// cpuUse is how busy this process and the whole machine were over a
// measurement.
type cpuUse struct {
	ProcessCores float64 `json:"bench_process_cores"`   // this process (driver, lag watcher, link emulator)
	MachineBusy  float64 `json:"machine_busy_fraction"` // all cores, every process
	OthersCores  float64 `json:"other_processes_cores"` // every process but this one (servers, pgbench)
}

type cpuMeter struct {
	proc        float64
	wall        time.Time
	busy, total uint64
}

func startCPU() cpuMeter {
	m := cpuMeter{proc: selfCPU(), wall: time.Now()}
	m.busy, m.total = machineTicks()
	return m
}

func (m cpuMeter) read() cpuUse {
	wall := time.Since(m.wall).Seconds()
	busy, total := machineTicks()
	u := cpuUse{}
	if wall > 0 {
		u.ProcessCores = round((selfCPU()-m.proc)/wall, 2)
	}
	if total > m.total {
		u.MachineBusy = round(float64(busy-m.busy)/float64(total-m.total), 3)
		u.OthersCores = round(max(u.MachineBusy*float64(runtime.NumCPU())-u.ProcessCores, 0), 2)
	}
	return u
}

// machineTicks reads the aggregate line of /proc/stat: busy and total ticks.
func machineTicks() (busy, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, s := range f[1:] {
		if i >= 8 { // guest time is already counted in user
			break
		}
		v, _ := strconv.ParseUint(s, 10, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

// Throughput on a 2-core machine depends on every other process: before
// each run the bench waits (a bounded time) for the machine to calm down.
const (
	quietCores  = 0.3 // other processes' use, in cores, that counts as quiet
	quietWindow = 500 * time.Millisecond
	quietMax    = 2 * time.Second
)

// quietWait records how the wait for a quiet machine went.
type quietWait struct {
	WaitedSeconds float64 `json:"waited_s"`
	OthersCores   float64 `json:"other_processes_cores"` // in the last window before starting
	Quiet         bool    `json:"quiet"`
}

// waitQuiet waits until processes other than this one use less than
// quietCores over a window, or quietMax has passed. The lab's servers are
// idle between runs, so what remains is other work on the machine.
func waitQuiet(ctx context.Context) (quietWait, error) {
	start := time.Now()
	for {
		m := startCPU()
		if err := sleep(ctx, quietWindow); err != nil {
			return quietWait{}, err
		}
		u := m.read()
		q := quietWait{WaitedSeconds: round(time.Since(start).Seconds(), 1), OthersCores: u.OthersCores, Quiet: u.OthersCores < quietCores}
		if q.Quiet || time.Since(start) >= quietMax {
			if !q.Quiet {
				logf("      warning: other processes still use %.2f cores after %s: the next run shares the machine", u.OthersCores, quietMax)
			}
			return q, nil
		}
	}
}
