package main

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cpuUse is how busy this process and the whole machine were over a
// measurement: the emulator needs spare CPU to deliver on time.
type cpuUse struct {
	ProcessCores float64 `json:"bench_process_cores"`   // this process: the emulator and in-process probes
	MachineBusy  float64 `json:"machine_busy_fraction"` // all cores, every process (other work on the machine too)
	OthersCores  float64 `json:"other_processes_cores"` // every process but this one (iperf3 and the kernel's own work included)
}

type cpuMeter struct {
	proc        float64
	wall        time.Time
	busy, total uint64
}

func startCPU() cpuMeter {
	m := cpuMeter{proc: processCPUSeconds(), wall: time.Now()}
	m.busy, m.total = machineTicks()
	return m
}

func (m cpuMeter) read() cpuUse {
	wall := time.Since(m.wall).Seconds()
	busy, total := machineTicks()
	u := cpuUse{}
	if wall > 0 {
		u.ProcessCores = round((processCPUSeconds()-m.proc)/wall, 2)
	}
	if total > m.total {
		u.MachineBusy = round(float64(busy-m.busy)/float64(total-m.total), 3)
		u.OthersCores = round(max(u.MachineBusy*float64(runtime.NumCPU())-u.ProcessCores, 0), 2)
	}
	return u
}

// processCPUSeconds is the CPU time this process has used.
func processCPUSeconds() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
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

// Timing figures are only meaningful on an otherwise idle machine; before
// them, the bench waits (a bounded time) for other processes to calm down.
const (
	quietCores  = 0.25 // other processes' use, in cores, that counts as quiet
	quietWindow = 500 * time.Millisecond
	quietMax    = 20 * time.Second
)

// quietWait records how the wait for a quiet machine went.
type quietWait struct {
	WaitedSeconds float64 `json:"waited_s"`
	OthersCores   float64 `json:"other_processes_cores"` // in the last window before starting
	Quiet         bool    `json:"quiet"`
}

// waitQuiet waits until other processes use less than quietCores over a
// window, or quietMax has passed.
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
				logf("      warning: other processes still use %.2f cores after %s: timing figures include their interference", u.OthersCores, quietMax)
			} else if q.WaitedSeconds > 1 {
				logf("      waited %.1f s for other processes to calm down", q.WaitedSeconds)
			}
			return q, nil
		}
	}
}
