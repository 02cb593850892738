package benchkit

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// ClockTicks is USER_HZ, the unit of /proc/*/stat times (100 on Linux).
const ClockTicks = 100

// ProcTimes reads utime, stime, cutime and cstime of a process, in
// seconds. cutime/cstime hold the children it has reaped: a postmaster's
// finished backends.
func ProcTimes(pid string) (self, children float64, err error) {
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
		v[k] = float64(n) / ClockTicks
	}
	return v[0] + v[1], v[2] + v[3], nil
}

// SelfCPU is this process's user + system time from /proc/self/stat, in
// seconds (10 ms resolution).
func SelfCPU() float64 {
	s, _, _ := ProcTimes("self")
	return s
}

// CPUUse is how busy this process and the whole machine were over a
// measurement.
type CPUUse struct {
	ProcessCores float64 `json:"bench_process_cores"`   // this process
	MachineBusy  float64 `json:"machine_busy_fraction"` // all cores, every process
	OthersCores  float64 `json:"other_processes_cores"` // every process but this one
}

// CPUMeter measures CPUUse from its start until Read.
type CPUMeter struct {
	procCPU     func() float64
	proc        float64
	wall        time.Time
	busy, total uint64
}

// StartCPU starts a meter that reads this process's CPU time with SelfCPU.
func StartCPU() CPUMeter { return StartCPUWith(SelfCPU) }

// StartCPUWith starts a meter that reads this process's CPU time, in
// seconds, with procCPU.
func StartCPUWith(procCPU func() float64) CPUMeter {
	m := CPUMeter{procCPU: procCPU, proc: procCPU(), wall: time.Now()}
	m.busy, m.total = MachineTicks()
	return m
}

// Read returns the CPU use since the meter started.
func (m CPUMeter) Read() CPUUse {
	wall := time.Since(m.wall).Seconds()
	busy, total := MachineTicks()
	u := CPUUse{}
	if wall > 0 {
		u.ProcessCores = Round((m.procCPU()-m.proc)/wall, 2)
	}
	if total > m.total {
		u.MachineBusy = Round(float64(busy-m.busy)/float64(total-m.total), 3)
		u.OthersCores = Round(max(u.MachineBusy*float64(runtime.NumCPU())-u.ProcessCores, 0), 2)
	}
	return u
}

// MachineTicks reads the aggregate line of /proc/stat: busy and total ticks.
func MachineTicks() (busy, total uint64) {
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

// Quiet says when WaitQuiet considers the machine quiet and what it logs.
type Quiet struct {
	Cores  float64       // other processes' use, in cores, that counts as quiet
	Window time.Duration // each measurement's length
	Max    time.Duration // longest wait
	// Warning is logged when the machine is still busy after Max; it ends
	// the line "other processes still use N cores after Max: ".
	Warning string
	// LogWait logs how long the wait took when it took over a second.
	LogWait bool
	Logf    func(format string, args ...any)
	// ProcessCPU reads this process's CPU time; nil means SelfCPU.
	ProcessCPU func() float64
}

// QuietWait records how the wait for a quiet machine went.
type QuietWait struct {
	WaitedSeconds float64 `json:"waited_s"`
	OthersCores   float64 `json:"other_processes_cores"` // in the last window before starting
	Quiet         bool    `json:"quiet"`
}

// WaitQuiet waits until processes other than this one use less than
// q.Cores over a window, or q.Max has passed.
func WaitQuiet(ctx context.Context, q Quiet) (QuietWait, error) {
	procCPU := q.ProcessCPU
	if procCPU == nil {
		procCPU = SelfCPU
	}
	start := time.Now()
	for {
		meter := StartCPUWith(procCPU)
		if err := Sleep(ctx, q.Window); err != nil {
			return QuietWait{}, err
		}
		u := meter.Read()
		w := QuietWait{WaitedSeconds: Round(time.Since(start).Seconds(), 1), OthersCores: u.OthersCores, Quiet: u.OthersCores < q.Cores}
		if w.Quiet || time.Since(start) >= q.Max {
			if !w.Quiet {
				q.Logf("      warning: other processes still use %.2f cores after %s: %s", u.OthersCores, q.Max, q.Warning)
			} else if q.LogWait && w.WaitedSeconds > 1 {
				q.Logf("      waited %.1f s for other processes to calm down", w.WaitedSeconds)
			}
			return w, nil
		}
	}
}

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
