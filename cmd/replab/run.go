package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"replab/internal/report"
	"replab/internal/runner"
	"replab/internal/workload"
	"replab/internal/workload/dmlstream"
	"replab/internal/workload/kvinsert"
	"replab/internal/workload/kvregister"
	"replab/internal/workload/listappend"
	"replab/internal/workload/orderentry"
	"replab/internal/workload/pageread"
	"replab/internal/workload/personnel"
	"replab/internal/workload/rwregister"
	"replab/internal/workload/script"
)

// workloads is every workload this binary can run.
func workloads() *workload.Registry {
	return workload.NewRegistry(personnel.Factory, kvinsert.Factory, kvregister.Factory, script.Factory, pageread.Factory, orderentry.Factory, dmlstream.Factory,
		listappend.Factory, rwregister.Factory)
}

func cmdRun(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("run", "replab run FILE [--out DIR]",
		`Builds the lab and the engine's scheme, creates and loads the workload's data,
runs warmup -> measure -> cooldown, waits for every replica to catch up, tears
everything down and prints a summary. Results (summary.json, series CSV,
HdrHistogram logs, the spec and the environment) go to DIR, by default
results/<timestamp>-<lab name>/. Ctrl-C stops early; what was measured is
still written, marked incomplete.

A spec with [target] instead of a lab measures servers that already exist
(docs/target.md): nothing is built, no root is needed, the topology is
checked against what the servers say, and replab's tables live in a schema
of their own, created only with create_schema = true and dropped at the end.`)
	dir := fs.String("out", "", "results directory (default results/<timestamp>-<lab name>)")
	state := fs.String("state", "", "directory for lab state and control sockets (default /run/replab)")
	metrics := fs.String("metrics", "", "serve live metrics for Prometheus at host:port/metrics while the run lasts (overrides [run] metrics; docs/metrics.md)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("run: give exactly one spec file (e.g. examples/pg-personnel.toml)")
	}
	s, _, err := loadChecked(pos[0])
	if err != nil {
		return err
	}
	sum, path, err := runner.Run(ctx, s, runner.Options{
		Out: *dir, StateRoot: *state, Log: out, Version: version, Metrics: *metrics,
		Engines: engines(), Workloads: workloads(),
		Live: term.IsTerminal(int(os.Stdout.Fd())),
	})
	if sum != nil && (sum.Transactions > 0 || sum.Search != nil) {
		report.PrintSummary(out, sum)
	}
	if path != "" {
		fmt.Fprintf(out, "\nresults: %s\n", path)
	}
	return err
}
