package main

import (
	"time"

	"replab/bench/internal/benchkit"
)

// Setup time on a 2-core machine depends on every other process: before
// each setup the bench waits (a bounded time) for the machine to calm down.
var quiet = benchkit.Quiet{
	Cores:   0.3,
	Window:  500 * time.Millisecond,
	Max:     2 * time.Second,
	Warning: "the next setup shares the machine",
	Logf:    logf,
}
