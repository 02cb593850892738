package main

import (
	"context"
	"runtime"
	"strings"
	"time"

	"replab/bench/internal/benchkit"
)

// Environment describes the machine and the code a run measured.
type Environment struct {
	benchkit.Machine
	PostgresServer string `json:"postgres_version"`
	PgbenchVersion string `json:"pgbench_version"`
	LoadAvgStart   string `json:"loadavg_start"` // /proc/loadavg: other work on the machine skews figures
	LoadAvgEnd     string `json:"loadavg_end"`
}

func environment(ctx context.Context, start time.Time, pgbench string) Environment {
	return Environment{
		Machine:        benchkit.CaptureMachine(ctx, start),
		PgbenchVersion: benchkit.FirstLine(benchkit.Command(ctx, pgbench, "--version")),
		LoadAvgStart:   benchkit.ReadTrim("/proc/loadavg"),
		PostgresServer: benchkit.FirstLine(benchkit.Command(ctx, strings.TrimSuffix(pgbench, "pgbench")+"postgres", "--version")),
	}
}

// endEnvironment records what the environment holds at the end of a run.
func endEnvironment(e *Environment) {
	e.LoadAvgEnd = benchkit.ReadTrim("/proc/loadavg")
	e.GOMAXPROCS = runtime.GOMAXPROCS(0)
}
