package main

import (
	"time"

	"golang.org/x/sys/unix"

	"replab/bench/internal/benchkit"
)

// startCPU starts a meter of how busy this process and the whole machine
// are: the emulator needs spare CPU to deliver on time.
func startCPU() benchkit.CPUMeter { return benchkit.StartCPUWith(processCPUSeconds) }

// processCPUSeconds is the CPU time this process has used.
func processCPUSeconds() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// Timing figures are only meaningful on an otherwise idle machine; before
// them, the bench waits (a bounded time) for other processes to calm down.
var quiet = benchkit.Quiet{
	Cores:      0.25,
	Window:     500 * time.Millisecond,
	Max:        20 * time.Second,
	Warning:    "timing figures include their interference",
	LogWait:    true,
	Logf:       logf,
	ProcessCPU: processCPUSeconds,
}
