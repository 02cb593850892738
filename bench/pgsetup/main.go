// Command pgsetup measures how long replab takes to set up PostgreSQL
// across WAN links: a primary and two standbys behind 80 ms round trips,
// from the engine's start until replication flows, broken down into the
// primary's start, each base backup (bytes and seconds, how its transfer
// ramped up) and each standby's start, against "3 s plus the base
// backups' transfer time at the link rate". Figures, not pass/fail.
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
	flag.Parse()
	if *list {
		benchkit.PrintSteps((&bench{}).steps(), 12)
		return
	}
	os.Exit(run(*out, *only))
}

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
	for _, lc := range linkConfs {
		title := fmt.Sprintf("primary + %d standbys across %s links, %d fresh labs", len(standbys), lc.describe(), lc.reps)
		if lc.headline {
			title += " (the issue's)"
		}
		s = append(s, step{ID: lc.id, Title: title, Limit: 2 * time.Minute, Run: func(ctx context.Context) error { return b.setups(ctx, lc) }})
	}
	s = append(s, step{ID: "diagnose", Title: "not run by default: pg_basebackup by hand across the issue's link: as the engine runs it, --no-sync, server-side LZ4, two at once",
		Limit: 2 * time.Minute, Run: b.diagnose})
	return s
}

// defaultSteps are run when -only is not given.
var defaultSteps = []string{"wan-100mbit", "wan-1gbit", "lan-100mbit"}

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
