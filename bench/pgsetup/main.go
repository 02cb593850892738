// Command pgsetup measures how long a PostgreSQL lab takes to come up
// across WAN links (examples/pg-quorum.toml, then a primary and two
// standbys behind links of one kind), from the lab's start until
// replication flows, broken down into the primary's start, each base
// backup (bytes and seconds, how its transfer ramped up) and each
// standby's start, against "1.2 × (3 s + the slowest base backup's bytes
// at its link's rate)". Figures, not pass/fail.
// Needs root and PostgreSQL.
//
//	go run ./bench/pgsetup --out bench/results/pgsetup.json
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/lab"
)

func main() {
	out := flag.String("out", "bench/results/pgsetup.json", "JSON file to write")
	only := flag.String("only", "", "comma-separated step ids to run (default all; -list shows them)")
	list := flag.Bool("list", false, "list the steps and exit")
	flag.StringVar(&samplesDir, "samples", "", "directory to write each setup's link samples to (CSV: bytes and drops towards each standby every 5 ms)")
	flag.Parse()
	if *list {
		benchkit.PrintSteps((&bench{}).steps(), 12)
		return
	}
	os.Exit(run(*out, *only))
}

// samplesDir is the -samples flag.
var samplesDir string

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// step is one bounded measurement.
type step = benchkit.Step

type bench struct {
	r *Report
}

func (b *bench) steps() []step {
	var s []step
	for _, t := range topologies {
		title := fmt.Sprintf("primary + standbys, %s (%s), %d fresh labs", t.describe(), t.why, t.reps)
		s = append(s, step{ID: t.id, Title: title, Limit: 3 * time.Minute, Run: func(ctx context.Context) error { return b.setups(ctx, t) }})
	}
	s = append(s, step{ID: "diagnose", Title: "not run by default: pg_basebackup by hand across the issue's links, one change at a time, and towards every standby at once",
		Limit: 3 * time.Minute, Run: b.diagnose})
	return s
}

// defaultSteps are run when -only is not given.
var defaultSteps = []string{"pg-quorum", "wan-100mbit", "wan-1gbit", "lan-100mbit"}

// postgresBin finds the newest installed postgres binary (the engine's).
func postgresBin() string {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	sort.Strings(found) // one major version here; the environment only
	if len(found) == 0 {
		return "postgres"
	}
	return found[len(found)-1]
}

func run(out, only string) int {
	if err := lab.Preflight(); err != nil {
		logf("pgsetup: %v", err)
		return 2
	}
	// First Ctrl-C (or SIGTERM) cancels the running step, which stops the
	// servers and removes the lab; a second one ends the process at once.
	ctx, stop := benchkit.SignalContext("pgsetup", logf)
	defer stop()

	start := time.Now()
	b := &bench{r: &Report{Environment: environment(ctx, start, postgresBin())}}
	steps, err := benchkit.SelectSteps(b.steps(), only, defaultSteps)
	if err != nil {
		logf("pgsetup: %v", err)
		return 2
	}
	benchkit.RunSteps(ctx, b.r, steps, benchkit.StartCPU, logf)
	return benchkit.Finish(ctx, b.r, "pgsetup", out, start, endEnvironment, func(w io.Writer) { writeSummary(w, b.r) }, logf)
}

// closeLab closes l and reports a failure on stderr (the figures stand).
func closeLab(l *lab.Lab) {
	if err := l.Close(); err != nil {
		logf("      warning: close lab %s: %v", l.Spec.Lab.Name, err)
	}
}
