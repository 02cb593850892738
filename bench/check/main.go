// Command check measures the history checker (internal/check): how many
// transactions a second check.Check gets through on a 100,000-transaction
// list-append history (16 users with overlapping transactions, keys
// rotated so lists stay short, 1 % failed and 0.2 % unknown), and its peak
// memory; then the same with 1 % of reads stale, so the cycle search has
// work. Figures, not pass/fail; the target is 100,000 transactions
// in ≤ 10 s and ≤ 2 GiB. Needs no root.
//
//	go run ./bench/check --out bench/results/check.json
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/check"
	"replab/internal/check/checkgen"
	"replab/internal/history"
)

// Environment describes the machine and the code a run measured.
type Environment struct {
	benchkit.Machine
	GOGC         string `json:"gogc"`
	LoadAvgStart string `json:"loadavg_start"` // /proc/loadavg: other work on the machine skews figures
	LoadAvgEnd   string `json:"loadavg_end"`
}

// Report is check.json.
type Report = benchkit.Report[Environment]

func main() {
	out := flag.String("out", "bench/results/check.json", "JSON file to write")
	txns := flag.Int("txns", 100_000, "transactions in each history")
	seed := flag.Uint64("seed", 1, "the histories' seed")
	reps := flag.Int("reps", 3, "times each history is checked (the best and all times are reported)")
	cpuProfile := flag.String("cpuprofile", "", "write a Go CPU profile of the checks to this file")
	flag.Parse()
	if *txns < 1 || *reps < 1 {
		logf("check: -txns and -reps must be positive")
		os.Exit(2)
	}
	os.Exit(run(*out, *txns, *seed, *reps, *cpuProfile))
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func run(out string, txns int, seed uint64, reps int, cpuProfile string) int {
	ctx, stop := benchkit.SignalContext("check", logf)
	defer stop()
	if cpuProfile != "" {
		stopProfile, err := benchkit.StartCPUProfile(cpuProfile)
		if err != nil {
			logf("check: %v", err)
			return 2
		}
		defer stopProfile()
	}
	start := time.Now()
	r := &Report{Environment: Environment{Machine: benchkit.CaptureMachine(ctx, start),
		GOGC: os.Getenv("GOGC"), LoadAvgStart: benchkit.ReadTrim("/proc/loadavg")}}
	steps := []benchkit.Step{
		{ID: "valid", Title: fmt.Sprintf("check.Check on a %d-transaction list-append history (strictly serializable), best of %d", txns, reps),
			Limit: 10 * time.Minute, Run: func(ctx context.Context) error { return measure(ctx, r, "check", txns, seed, 0, reps) }},
		{ID: "stale", Title: fmt.Sprintf("the same with 1 %% of reads stale (anomalies to search), best of %d", reps),
			Limit: 10 * time.Minute, Run: func(ctx context.Context) error { return measure(ctx, r, "check_stale", txns, seed, 0.01, reps) }},
	}
	benchkit.RunSteps(ctx, r, steps, benchkit.StartCPU, logf)
	return benchkit.Finish(ctx, r, "check", out, start, func(e *Environment) {
		e.LoadAvgEnd = benchkit.ReadTrim("/proc/loadavg")
		e.GOMAXPROCS = runtime.GOMAXPROCS(0)
	}, func(w io.Writer) {
		r.WriteSummary(w, benchkit.Summary{ConfiguredKeys: []string{"txns", "stale_read_fraction"},
			CPUHeading: "CPU per step:", IDWidth: 6})
	}, logf)
}

// measure generates a history, then checks it reps times, each after a
// wait for a quiet machine, and adds the figures named prefix_*.
func measure(ctx context.Context, r *Report, prefix string, txns int, seed uint64, stale float64, reps int) error {
	ops := checkgen.ListAppend(checkgen.Options{Txns: txns, Seed: seed, StaleFraction: stale})
	mops, elems := 0, 0
	for _, op := range ops {
		mops += len(op.Value)
		for _, m := range op.Value {
			elems += len(m.List)
		}
	}
	runtime.GC()
	debug.FreeOSMemory()
	base := rssBytes("VmRSS")
	var secs, cpus []float64
	var peak, alloc uint64
	var res *check.Result
	for range reps {
		if _, err := benchkit.WaitQuiet(ctx, benchkit.Quiet{Cores: 0.5, Window: time.Second, Max: 20 * time.Second,
			Warning: "measuring anyway", Logf: logf}); err != nil {
			return err
		}
		runtime.GC()
		debug.FreeOSMemory()
		resetPeak()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		t0, c0 := time.Now(), benchkit.SelfCPU()
		var err error
		res, err = check.Check(ops, check.Options{})
		d := time.Since(t0)
		cpus = append(cpus, benchkit.Round(benchkit.SelfCPU()-c0, 2))
		if err != nil {
			return err
		}
		runtime.ReadMemStats(&ms1)
		secs = append(secs, d.Seconds())
		peak = max(peak, rssBytes("VmHWM"))
		alloc = ms1.TotalAlloc - ms0.TotalAlloc
		logf("      %s: %d transactions in %.2f s (%.0f/s), peak RSS %d MiB, %v", prefix, res.TransactionsChecked, d.Seconds(),
			float64(res.TransactionsChecked)/d.Seconds(), peak>>20, res.Anomalies)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
	best := secs[0]
	for _, s := range secs {
		best = min(best, s)
	}
	conf := map[string]any{"txns": txns, "stale_read_fraction": stale, "micro_operations": mops, "list_elements_read": elems,
		"processes": 16, "seed": seed, "checks": reps}
	rate := float64(res.TransactionsChecked) / best
	all := make([]float64, len(secs))
	for i, s := range secs {
		all[i] = benchkit.Round(s, 3)
	}
	r.Add(benchkit.Figure{Name: prefix + "_txn_per_s", Value: benchkit.Round(rate, 0), Configured: conf,
		Target: "≥ 10,000 (100,000 transactions in ≤ 10 s)", TargetMin: benchkit.Ptr(10_000.0),
		Note: "wall time of the fastest check; cpu_seconds_all is the process's CPU time (the garbage collector runs on the other core), which a busy machine disturbs less",
		Details: map[string]any{"transactions_checked": res.TransactionsChecked, "seconds_best": benchkit.Round(best, 3), "seconds_all": all, "cpu_seconds_all": cpus,
			"anomalies": res.Anomalies, "complete": res.Complete, "strongest_satisfied": res.StrongestSatisfied}})
	r.Add(benchkit.Figure{Name: prefix + "_peak_rss_bytes", Value: float64(peak), Configured: conf,
		Target: "≤ 2 GiB", TargetMax: benchkit.Ptr(float64(2 << 30)),
		Note: "the process's peak RSS (VmHWM, reset before each check) while checking: the history in memory plus the checker",
		Details: map[string]any{"rss_before_check_bytes": base, "allocated_bytes_per_check": alloc,
			"history_ops": len(ops), "history_bytes_estimate": historyBytes(ops)}})
	return nil
}

// historyBytes is roughly what the history takes in memory.
func historyBytes(ops []history.Op) int {
	n := 0
	for _, op := range ops {
		n += 160 + len(op.Value)*56
		for _, m := range op.Value {
			n += 8 * cap(m.List)
		}
	}
	return n
}

// resetPeak resets the process's VmHWM to its current RSS.
func resetPeak() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// rssBytes reads a field of /proc/self/status (in kB) as bytes.
func rssBytes(field string) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n << 10
		}
	}
	return 0
}
