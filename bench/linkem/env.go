package main

import (
	"context"
	"runtime"
	"time"

	"replab/bench/internal/benchkit"
)

// Environment describes the machine and the code a run measured. Its
// GOMAXPROCS is taken at the end: the emulator raises it when a lab starts.
type Environment struct {
	benchkit.Machine
	IperfVersion  string `json:"iperf3_version"`
	LoadAvgStart  string `json:"loadavg_start"` // /proc/loadavg: other work on the machine skews figures
	LoadAvgEnd    string `json:"loadavg_end"`
	RootCongCtl   string `json:"root_tcp_congestion_control"`
	AllowedCongCt string `json:"root_tcp_allowed_congestion_control"`
}

func environment(ctx context.Context, start time.Time) Environment {
	return Environment{
		Machine:       benchkit.CaptureMachine(ctx, start),
		IperfVersion:  benchkit.FirstLine(benchkit.Command(ctx, "iperf3", "--version")),
		LoadAvgStart:  benchkit.ReadTrim("/proc/loadavg"),
		RootCongCtl:   benchkit.ReadTrim("/proc/sys/net/ipv4/tcp_congestion_control"),
		AllowedCongCt: benchkit.ReadTrim("/proc/sys/net/ipv4/tcp_allowed_congestion_control"),
	}
}

// endEnvironment records what the environment holds at the end of a run.
func endEnvironment(e *Environment) {
	e.LoadAvgEnd = benchkit.ReadTrim("/proc/loadavg")
	e.GOMAXPROCS = runtime.GOMAXPROCS(0)
}
