package main

import (
	"context"
	"runtime"
	"time"

	"replab/bench/internal/benchkit"
)

// Environment describes the machine and the code a run measured.
type Environment struct {
	benchkit.Machine
	PostgresServer string `json:"postgres_version"`
	RootCongCtl    string `json:"root_tcp_congestion_control"` // new namespaces inherit it
	LoadAvgStart   string `json:"loadavg_start"`               // /proc/loadavg: other work on the machine skews figures
	LoadAvgEnd     string `json:"loadavg_end"`
}

func environment(ctx context.Context, start time.Time, pgBin string) Environment {
	return Environment{
		Machine:        benchkit.CaptureMachine(ctx, start),
		PostgresServer: benchkit.FirstLine(benchkit.Command(ctx, pgBin, "--version")),
		RootCongCtl:    benchkit.ReadTrim("/proc/sys/net/ipv4/tcp_congestion_control"),
		LoadAvgStart:   benchkit.ReadTrim("/proc/loadavg"),
	}
}

// endEnvironment records what the environment holds at the end of a run.
func endEnvironment(e *Environment) {
	e.LoadAvgEnd = benchkit.ReadTrim("/proc/loadavg")
	e.GOMAXPROCS = runtime.GOMAXPROCS(0)
}
