// Command driver measures replab's workload driver and lag probe against
// real PostgreSQL servers in a lab: the driver's throughput and CPU per
// transaction against pgbench on the same single-row UPDATE, and what the
// lag probe costs (its extra statement and its 1 ms watcher) and achieves
// (its poll interval). Figures, not pass/fail. Needs root and PostgreSQL.
//
//	go run ./bench/driver --out bench/results/driver.json
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"replab/internal/lab"
)

func main() {
	out := flag.String("out", "bench/results/driver.json", "JSON file to write")
	only := flag.String("only", "", "comma-separated step ids to run (default all; -list shows them)")
	list := flag.Bool("list", false, "list the steps and exit")
	cpuProfile := flag.String("cpuprofile", "", "write a Go CPU profile of the run (the driver, the lag watcher and the link emulator run in this process) to this file")
	users := flag.String("users", "8,1", "comma-separated user counts for the compare step")
	client := flag.String("client-site", "db", `site pgbench and the driver run in for the comparison: "db" (the server's own site, no emulator in the path) or "client" (across an unshaped emulated link)`)
	flag.Parse()
	if *list {
		for _, s := range (&bench{}).steps() {
			fmt.Printf("%-10s %s\n", s.id, s.title)
		}
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
type step struct {
	id    string
	title string
	limit time.Duration
	run   func(ctx context.Context) error
}

// bench carries the report and the run's settings.
type bench struct {
	r          *Report
	pgbench    string
	clientSite string
}

func (b *bench) steps() []step {
	return []step{
		{"compare", fmt.Sprintf("driver vs pgbench: UPDATE by key, %v users, %d s runs alternating pgbench/replab ×%d", compareUsers, compareSeconds, comparePairs),
			3 * time.Minute, b.compare},
		{"lag", fmt.Sprintf("lag probe: %d users, primary + standby %s away, off/statement/probe ×%d, %s + %s each", lagUsers, lagDelay, lagReps, lagWarmup, lagMeasure),
			3 * time.Minute, b.lagOverhead},
		{"diagnose", "not run by default: where the driver's CPU goes (pgbench, driver, driver at GOMAXPROCS = CPUs, bare pgx 3 round trips, bare pgx pipelined)",
			4 * time.Minute, b.diagnose},
	}
}

// defaultSteps are run when -only is not given.
var defaultSteps = []string{"compare", "lag"}

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
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	go func() {
		s, ok := <-sigc
		if !ok {
			return
		}
		signal.Stop(sigc)
		logf("driver: %v: cleaning up (interrupt again to abort without cleaning up)", s)
		cancel(fmt.Errorf("interrupted by %v", s))
	}()
	defer func() {
		signal.Stop(sigc)
		close(sigc)
	}()

	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			logf("driver: %v", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			logf("driver: cpu profile: %v", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	b := &bench{r: &Report{Environment: environment(ctx, start, pgbench)}, pgbench: pgbench, clientSite: clientSite}
	steps, err := selectSteps(b.steps(), only)
	if err != nil {
		logf("driver: %v", err)
		return 2
	}
	for i, s := range steps {
		if ctx.Err() != nil {
			break
		}
		logf("[%d/%d] %s …", i+1, len(steps), s.title)
		t0, meter := time.Now(), startCPU()
		sctx, cancelStep := context.WithTimeoutCause(ctx, s.limit, fmt.Errorf("step took longer than its limit %s", s.limit))
		err := s.run(sctx)
		cancelStep()
		b.r.Steps = append(b.r.Steps, StepInfo{ID: s.id, Title: s.title, Seconds: round(time.Since(t0).Seconds(), 1),
			CPU: meter.read(), OK: err == nil})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			logf("      FAILED after %s: %v", time.Since(t0).Round(100*time.Millisecond), err)
			b.r.Errors = append(b.r.Errors, StepError{Step: s.title, Error: err.Error()})
			continue
		}
		logf("      done in %s", time.Since(t0).Round(100*time.Millisecond))
	}
	if ctx.Err() != nil {
		logf("driver: interrupted; nothing written to %s", out)
		return 130
	}
	b.r.Environment.LoadAvgEnd = readTrim("/proc/loadavg")
	b.r.Environment.GOMAXPROCS = runtime.GOMAXPROCS(0)
	b.r.Seconds = round(time.Since(start).Seconds(), 1)
	if err := writeJSON(out, b.r); err != nil {
		logf("driver: %v", err)
		return 1
	}
	fmt.Println()
	b.r.WriteSummary(os.Stdout)
	fmt.Printf("\nwrote %s in %s\n", out, time.Since(start).Round(time.Second))
	if len(b.r.Errors) > 0 {
		return 1
	}
	return 0
}

// selectSteps keeps the steps named in only (comma-separated ids), in
// their normal order; all of them when only is empty.
func selectSteps(all []step, only string) ([]step, error) {
	if only == "" {
		only = strings.Join(defaultSteps, ",")
	}
	var ids []string
	for _, s := range all {
		ids = append(ids, s.id)
	}
	want := strings.Split(only, ",")
	for _, w := range want {
		if !slices.Contains(ids, w) {
			return nil, fmt.Errorf("no step %q (steps: %s)", w, strings.Join(ids, ", "))
		}
	}
	var out []step
	for _, s := range all {
		if slices.Contains(want, s.id) {
			out = append(out, s)
		}
	}
	return out, nil
}
