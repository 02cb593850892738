package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"replab/internal/report"
)

func cmdReport(_ context.Context, args []string, out io.Writer) error {
	fs := newFlags("report", "replab report DIR",
		`Renders DIR/report.html from the results directory DIR alone (a run, repeated
runs or a sweep): headline tables and SVG charts of throughput, latency, lag,
links and CPU. The page is self-contained: it fetches nothing, needs no script,
and prints well. A sweep's points and a repeated run's repetitions get their
own reports, linked from the main one.`)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("report: give exactly one results directory (e.g. results/20260101-120000-quickstart)")
	}
	r, err := report.ReadResults(pos[0])
	if err != nil {
		return err
	}
	for _, p := range r.Problems {
		fmt.Fprintf(os.Stderr, "replab report: warning: %s\n", p)
	}
	paths, err := report.WriteReport(r)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, paths[0])
	if n := len(paths) - 1; n > 0 {
		fmt.Fprintf(out, "(and %d report(s) of its points or repetitions, linked from it)\n", n)
	}
	return nil
}

func cmdCompare(_ context.Context, args []string, out io.Writer) error {
	fs := newFlags("compare", "replab compare DIR_A DIR_B… [--html OUT] [--level 0.95]",
		`Prints the headline figures of results directories side by side: tpm, commit
latency p50/p99, lag p50/p99 per replica and bytes per transaction, each with
its ratio to the first directory (A) and whether the difference is significant.
A difference can be tested when both sides were repeated (Welch's t-test on
the repetitions); a single run says "n=1: not testable".`)
	htmlOut := fs.String("html", "", "also write the comparison as a self-contained HTML page to this file")
	level := fs.Float64("level", 0.95, "confidence level of the significance test")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return fmt.Errorf("compare: give at least two results directories (the first is the baseline)")
	}
	var rs []*report.Results
	for _, d := range pos {
		r, err := report.ReadResults(d)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	c, err := report.Compare(rs, *level)
	if err != nil {
		return err
	}
	report.PrintCompare(out, c)
	if *htmlOut != "" {
		f, err := os.Create(*htmlOut)
		if err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		if err := report.WriteCompareHTML(f, c); err != nil {
			f.Close()
			return fmt.Errorf("compare: write %s: %w", *htmlOut, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("compare: write %s: %w", *htmlOut, err)
		}
		fmt.Fprintf(out, "\n%s\n", *htmlOut)
	}
	return nil
}
