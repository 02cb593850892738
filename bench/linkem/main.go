// Command linkem measures the link emulator on this machine and writes every
// figure, with its unit, configured value and the target, to one JSON
// file: throughput against a plain veth pair, RTT accuracy idle and loaded,
// goodput against the configured rate, random and Gilbert-Elliott loss, TCP
// reno against the Mathis formula, and the effect of TCP buffer sizes.
// Figures, not pass/fail. Needs root and iperf3.
//
//	go run ./bench/linkem --out bench/results/linkem.json
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"replab/internal/lab"
)

func main() {
	out := flag.String("out", "bench/results/linkem.json", "JSON file to write")
	only := flag.String("only", "", "comma-separated step ids to run (default all; -list shows them)")
	list := flag.Bool("list", false, "list the steps and exit")
	cpuProfile := flag.String("cpuprofile", "", "write a Go CPU profile of the run (the emulator runs in this process) to this file")
	flag.Parse()
	if *list {
		for _, s := range (&bench{}).steps() {
			fmt.Printf("%-16s %s\n", s.id, s.title)
		}
		return
	}
	os.Exit(run(*out, *only, *cpuProfile))
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// step is one bounded measurement.
type step struct {
	id    string // for -only
	title string
	limit time.Duration
	run   func(ctx context.Context) error
}

// bench carries the report and what later steps need from earlier ones.
type bench struct {
	r          *Report
	vethBps    float64 // the ceiling, for emu_to_veth_ratio
	floorRTTMs float64 // mean RTT the probes measure over plain veth
}

func run(out, only, cpuProfile string) int {
	if err := lab.Preflight(); err != nil {
		logf("linkem: %v", err)
		return 2
	}
	if err := requireIperf(); err != nil {
		logf("linkem: %v", err)
		return 2
	}
	// First Ctrl-C (or SIGTERM) cancels the running step, which cleans up;
	// a second one ends the process at once (default signal behaviour).
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
		logf("linkem: %v: cleaning up (interrupt again to abort without cleaning up)", s)
		cancel(fmt.Errorf("interrupted by %v", s))
	}()
	defer func() {
		signal.Stop(sigc)
		close(sigc)
	}()

	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			logf("linkem: %v", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			logf("linkem: cpu profile: %v", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	b := &bench{r: &Report{Environment: environment(ctx, start)}}
	steps, err := selectSteps(b.steps(), only)
	if err != nil {
		logf("linkem: %v", err)
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
		logf("linkem: interrupted; nothing written to %s", out)
		return 130
	}
	b.r.Environment.LoadAvgEnd = readTrim("/proc/loadavg")
	b.r.Environment.GOMAXPROCS = runtime.GOMAXPROCS(0)
	b.r.Seconds = round(time.Since(start).Seconds(), 1)
	if err := writeJSON(out, b.r); err != nil {
		logf("linkem: %v", err)
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

// writeJSON writes the report atomically (temporary file, then rename).
func writeJSON(path string, r *Report) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(fmt.Errorf("write report: %w", err), os.Remove(tmp))
	}
	return nil
}

func (b *bench) steps() []step {
	var s []step
	s = append(s,
		step{"veth", "veth ceiling: iperf3 cubic 5 s over a plain veth pair", time.Minute, b.veth},
		step{"emu", "emulator throughput: iperf3 cubic 5 s over an unlimited emulated link", time.Minute, b.emuThroughput},
		step{"rtt-idle", "RTT idle: 25 ms each way, 1gbit, 500 probes at 10 ms", time.Minute, b.rttIdle},
		step{"rtt-loaded", "RTT loaded: 25 ms each way, 1gbit link carrying bulk TCP, 500 probes at 10 ms", 90 * time.Second, b.rttLoaded},
	)
	for _, mbit := range goodputRates {
		s = append(s, step{fmt.Sprintf("goodput-%dmbit", mbit), fmt.Sprintf("goodput at %dmbit: 10 ms each way, cubic, %s after %s warmup", mbit, goodputWindow, goodputWarmup),
			time.Minute, func(ctx context.Context) error { return b.goodput(ctx, mbit) }})
	}
	s = append(s,
		step{"loss-random", fmt.Sprintf("loss 1%% random: %d UDP packets", randomLossPackets), time.Minute, b.randomLoss},
		step{"loss-ge", fmt.Sprintf("loss gemodel 1%% 10%% 100%% 0%%: %d UDP packets", geLossPackets), time.Minute, b.geLoss},
		step{"reno", fmt.Sprintf("TCP reno at 1%% loss, 50 ms RTT: %s after %s warmup, against Mathis", renoWindow, renoWarmup), time.Minute, b.reno},
	)
	for _, max := range bufferSizes {
		s = append(s, step{"buffer-" + strings.ToLower(showBytes(max)), fmt.Sprintf("TCP buffers max %s: 200 ms RTT, 100mbit, %s after %s warmup", showBytes(max), bufferWindow, bufferWarmup),
			time.Minute, func(ctx context.Context) error { return b.buffer(ctx, max) }})
	}
	return s
}

// selectSteps keeps the steps named in only (comma-separated ids), in
// their normal order; all of them when only is empty.
func selectSteps(all []step, only string) ([]step, error) {
	if only == "" {
		return all, nil
	}
	want := strings.Split(only, ",")
	var ids []string
	for _, s := range all {
		ids = append(ids, s.id)
	}
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
