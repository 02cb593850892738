// Command driver measures replab's workload driver and lag probe against
// real PostgreSQL servers in a lab: the driver's throughput and CPU per
// transaction against pgbench on the same single-row UPDATE, and what the
// lag probe costs (its extra statement and its 1 ms watcher) and achieves
// (its poll interval). Figures, not pass/fail. Needs root and PostgreSQL.
//
//	go run ./bench/driver --out bench/results/driver.json
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/lab"
)

func main() {
	out := flag.String("out", "bench/results/driver.json", "JSON file to write")
	only := flag.String("only", "", "comma-separated step ids to run (default all; -list shows them)")
	list := flag.Bool("list", false, "list the steps and exit")
	cpuProfile := flag.String("cpuprofile", "", "write a Go CPU profile of the run (the driver, the lag watcher and the link emulator run in this process) to this file")
	users := flag.String("users", "8,1", "comma-separated user counts for the compare step")
	client := flag.String("client-site", "db", `site pgbench and the driver run in for the comparison: "db" (the server's own site, no emulator in the path) or "client" (across an unshaped emulated link)`)
	variants := flag.String("pipelined-variants", "", `comma-separated extra runs for the pipelined step, after each pair, on pgbench's server: "driver" (driver.Run alone), "pipe" (the engine's Pipe alone), "replab-procs" (replab run with GOMAXPROCS = users + 2)`)
	rounds := flag.Int("pipelined-rounds", pipeRounds, "rounds of the pipelined step per client count (each tool once a round)")
	flag.Parse()
	if *rounds < 1 {
		logf("driver: -pipelined-rounds: want at least 1, got %d", *rounds)
		os.Exit(2)
	}
	pipeRounds = *rounds
	for _, v := range strings.Split(*variants, ",") {
		switch v = strings.TrimSpace(v); v {
		case "":
		case "driver", "pipe", "replab-procs":
			pipeVariants = append(pipeVariants, v)
		default:
			logf("driver: -pipelined-variants: want driver, pipe or replab-procs, got %q", v)
			os.Exit(2)
		}
	}
	if *list {
		benchkit.PrintSteps((&bench{}).steps(), 10)
		return
	}
	compareUsers = nil
	for _, f := range strings.Split(*users, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			logf("driver: -users: want positive whole numbers, got %q", f)
			os.Exit(2)
		}
		compareUsers = append(compareUsers, n)
	}
	if *client != "db" && *client != "client" {
		logf("driver: -client-site must be db or client")
		os.Exit(2)
	}
	os.Exit(run(*out, *only, *client, *cpuProfile))
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// step is one bounded measurement.
type step = benchkit.Step

// bench carries the report and the run's settings.
type bench struct {
	r          *Report
	pgbench    string
	clientSite string
}

func (b *bench) steps() []step {
	return []step{
		{ID: "compare", Title: fmt.Sprintf("driver vs pgbench: UPDATE by key, %v users, %d s runs alternating pgbench/replab ×%d", compareUsers, compareSeconds, comparePairs),
			Limit: 3 * time.Minute, Run: b.compare},
		{ID: "pipelined", Title: fmt.Sprintf("replab run vs pipelined pgbench: personnel's UPDATE, one node, synchronous_commit = off, %v users, rounds of pgbench and replab (and pgbench without BEGIN/END at %d users) ×%d", pipeUserCounts, pipeImplicitUsers, pipeRounds),
			Limit: 30 * time.Minute, Run: b.pipelined},
		{ID: "scripts", Title: fmt.Sprintf("script workload vs pgbench: the built-in scripts %v, %d users, %d s runs alternating pgbench/replab ×%d", builtinScripts, scriptsUsers, scriptsSeconds, scriptsPairs),
			Limit: 6 * time.Minute, Run: b.scripts},
		{ID: "lag", Title: fmt.Sprintf("lag probe: %d users, primary + standby %s away, auto ×%d (3 every), %s + %s each, on and off in 2 s slices", lagUsers, lagDelay, lagReps, lagWarmup, lagMeasure),
			Limit: 8 * time.Minute, Run: b.lagOverhead},
		{ID: "lag-mariadb", Title: fmt.Sprintf("lag probe on MariaDB: %d users, primary + async GTID replica %s away, auto ×%d (3 every), %s + %s each, on and off in 2 s slices", lagUsers, lagDelay, lagReps, lagWarmup, lagMeasure),
			Limit: 8 * time.Minute, Run: b.lagOverheadMariaDB},
		{ID: "lag-all", Title: fmt.Sprintf("lag of every transaction by position: %d users, primary + standby %s away, ×%d, %s + %s each, on and off in 2 s slices", lagUsers, lagDelay, lagAllReps, lagWarmup, lagMeasure),
			Limit: 8 * time.Minute, Run: b.lagAllOverhead},
		{ID: "history", Title: fmt.Sprintf("history recording: %d users, the lag step's lab and UPDATE, ×%d, %s + %s each, on and off in 2 s slices", lagUsers, historyReps, lagWarmup, lagMeasure),
			Limit: 8 * time.Minute, Run: b.historyOverhead},
		{ID: "diagnose", Title: "not run by default: where the driver's CPU goes (pgbench, driver, driver at GOMAXPROCS = CPUs, bare pgx 3 round trips, bare pgx pipelined)",
			Limit: 4 * time.Minute, Run: b.diagnose},
	}
}

// defaultSteps are run when -only is not given.
var defaultSteps = []string{"compare", "pipelined", "scripts", "lag", "lag-mariadb", "lag-all", "history"}

func run(out, only, clientSite, cpuProfile string) int {
	if err := lab.Preflight(); err != nil {
		logf("driver: %v", err)
		return 2
	}
	pgbench, err := findPgbench()
	if err != nil {
		logf("driver: %v", err)
		return 2
	}
	// First Ctrl-C (or SIGTERM) cancels the running step, which cleans up
	// (pgbench is killed, servers stopped, labs removed); a second one ends
	// the process at once.
	ctx, stop := benchkit.SignalContext("driver", logf)
	defer stop()

	if cpuProfile != "" {
		stopProfile, err := benchkit.StartCPUProfile(cpuProfile)
		if err != nil {
			logf("driver: %v", err)
			return 2
		}
		defer stopProfile()
	}
	start := time.Now()
	b := &bench{r: &Report{Environment: environment(ctx, start, pgbench)}, pgbench: pgbench, clientSite: clientSite}
	steps, err := benchkit.SelectSteps(b.steps(), only, defaultSteps)
	if err != nil {
		logf("driver: %v", err)
		return 2
	}
	benchkit.RunSteps(ctx, b.r, steps, benchkit.StartCPU, logf)
	return benchkit.Finish(ctx, b.r, "driver", out, start, endEnvironment, func(w io.Writer) { writeSummary(w, b.r) }, logf)
}
