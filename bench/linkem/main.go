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
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/lab"
)

func main() {
	out := flag.String("out", "bench/results/linkem.json", "JSON file to write")
	only := flag.String("only", "", "comma-separated step ids to run (default all; -list shows them)")
	list := flag.Bool("list", false, "list the steps and exit")
	cpuProfile := flag.String("cpuprofile", "", "write a Go CPU profile of the run (the emulator runs in this process) to this file")
	flag.Parse()
	if *list {
		benchkit.PrintSteps((&bench{}).steps(), 16)
		return
	}
	os.Exit(run(*out, *only, *cpuProfile))
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// step is one bounded measurement.
type step = benchkit.Step

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
	ctx, stop := benchkit.SignalContext("linkem", logf)
	defer stop()

	if cpuProfile != "" {
		stopProfile, err := benchkit.StartCPUProfile(cpuProfile)
		if err != nil {
			logf("linkem: %v", err)
			return 2
		}
		defer stopProfile()
	}
	start := time.Now()
	b := &bench{r: &Report{Environment: environment(ctx, start)}}
	steps, err := benchkit.SelectSteps(b.steps(), only, nil)
	if err != nil {
		logf("linkem: %v", err)
		return 2
	}
	benchkit.RunSteps(ctx, b.r, steps, startCPU, logf)
	return benchkit.Finish(ctx, b.r, "linkem", out, start, endEnvironment, func(w io.Writer) { writeSummary(w, b.r) }, logf)
}

func (b *bench) steps() []step {
	var s []step
	s = append(s,
		step{ID: "veth", Title: "veth ceiling: iperf3 cubic 5 s over a plain veth pair", Limit: time.Minute, Run: b.veth},
		step{ID: "emu", Title: "emulator throughput: iperf3 cubic 5 s over an unlimited emulated link", Limit: time.Minute, Run: b.emuThroughput},
		step{ID: "rtt-idle", Title: "RTT idle: 25 ms each way, 1gbit, 500 probes at 10 ms", Limit: time.Minute, Run: b.rttIdle},
		step{ID: "rtt-loaded", Title: "RTT loaded: 25 ms each way, 1gbit link carrying bulk TCP, 500 probes at 10 ms", Limit: 90 * time.Second, Run: b.rttLoaded},
		step{ID: "10gbit", Title: fmt.Sprintf("10gbit: 25 ms each way, %d cubic streams, goodput and the RTT probes meanwhile", tenGigStreams), Limit: 90 * time.Second, Run: b.tenGig},
	)
	for _, mbit := range goodputRates {
		s = append(s, step{ID: fmt.Sprintf("goodput-%dmbit", mbit), Title: fmt.Sprintf("goodput at %dmbit: 10 ms each way, cubic, %s after %s warmup", mbit, goodputWindow, goodputWarmup),
			Limit: time.Minute, Run: func(ctx context.Context) error { return b.goodput(ctx, mbit) }})
	}
	s = append(s,
		step{ID: "loss-random", Title: fmt.Sprintf("loss 1%% random: %d UDP packets", randomLossPackets), Limit: time.Minute, Run: b.randomLoss},
		step{ID: "loss-ge", Title: fmt.Sprintf("loss gemodel 1%% 10%% 100%% 0%%: %d UDP packets", geLossPackets), Limit: time.Minute, Run: b.geLoss},
		step{ID: "reno", Title: fmt.Sprintf("TCP reno at 1%% loss, 50 ms RTT: %s after %s warmup, against Mathis", renoWindow, renoWarmup), Limit: time.Minute, Run: b.reno},
	)
	for _, max := range bufferSizes {
		s = append(s, step{ID: "buffer-" + strings.ToLower(showBytes(max)), Title: fmt.Sprintf("TCP buffers max %s: 200 ms RTT, 100mbit, %s after %s warmup", showBytes(max), bufferWindow, bufferWarmup),
			Limit: time.Minute, Run: func(ctx context.Context) error { return b.buffer(ctx, max) }})
	}
	return s
}
