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
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"replab/internal/lab"
	"replab/internal/spec"
)

func main() {
	out := flag.String("out", "bench/results/pgsetup.json", "JSON file to write")
	only := flag.String("only", "", "comma-separated step ids to run (default all; -list shows them)")
	list := flag.Bool("list", false, "list the steps and exit")
	flag.Parse()
	if *list {
		for _, s := range (&bench{}).steps() {
			fmt.Printf("%-12s %s\n", s.id, s.title)
		}
		return
	}
	os.Exit(run(*out, *only))
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
		s = append(s, step{lc.id, title, 2 * time.Minute, func(ctx context.Context) error { return b.setups(ctx, lc) }})
	}
	s = append(s, step{"diagnose", "not run by default: pg_basebackup by hand across the issue's link: as the engine runs it, --no-sync, server-side LZ4, two at once",
		2 * time.Minute, b.diagnose})
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
		logf("pgsetup: %v: cleaning up (interrupt again to abort without cleaning up)", s)
		cancel(fmt.Errorf("interrupted by %v", s))
	}()
	defer func() {
		signal.Stop(sigc)
		close(sigc)
	}()

	start := time.Now()
	b := &bench{r: &Report{Environment: environment(ctx, start, postgresBin())}}
	steps, err := selectSteps(b.steps(), only)
	if err != nil {
		logf("pgsetup: %v", err)
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
		logf("pgsetup: interrupted; nothing written to %s", out)
		return 130
	}
	b.r.Environment.LoadAvgEnd = readTrim("/proc/loadavg")
	b.r.Environment.GOMAXPROCS = runtime.GOMAXPROCS(0)
	b.r.Seconds = round(time.Since(start).Seconds(), 1)
	if err := writeJSON(out, b.r); err != nil {
		logf("pgsetup: %v", err)
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

// closeLab closes l and reports a failure on stderr (the figures stand).
func closeLab(l *lab.Lab) {
	if err := l.Close(); err != nil {
		logf("      warning: close lab %s: %v", l.Spec.Lab.Name, err)
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
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

// startLab is lab.Up made robust for repeated benchmarks: a failed start
// (including lab.Up's own panic while cleaning up after a failure) is
// reported, its leftovers removed with lab.Down, and the start tried once
// more.
func startLab(ctx context.Context, s *spec.Spec) (*lab.Lab, error) {
	name := s.Lab.Name
	for attempt := 1; ; attempt++ {
		l, err := upRecovered(ctx, s)
		if err == nil || attempt == 2 || ctx.Err() != nil {
			return l, err
		}
		logf("      warning: start lab %s: %v; removing its leftovers and trying once more", name, err)
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, derr := lab.Down(dctx, lab.DefaultStateRoot, name); derr != nil {
			logf("      warning: lab down %s: %v", name, derr)
		}
		cancel()
	}
}

func upRecovered(ctx context.Context, s *spec.Spec) (l *lab.Lab, err error) {
	defer func() {
		if r := recover(); r != nil {
			l, err = nil, fmt.Errorf("lab.Up panicked while cleaning up after a failed start (its deferred Close runs on the nil *Lab it returns): %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return lab.Up(ctx, s, lab.Options{NoControl: true})
}
