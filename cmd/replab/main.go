// Command replab builds WAN labs of network namespaces joined by emulated
// links, and measures database replication across them. This file maps
// the command line onto internal packages; it holds no logic of its own.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"replab/internal/pipeline"
)

// version is set at build time (-ldflags "-X main.version=…").
var version = "dev"

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, out io.Writer) error
}

func commands() []command {
	return []command{
		{"run", "run a workload on a lab and measure it: replab run FILE [--out DIR]", cmdRun},
		{"report", "render DIR/report.html from a results directory: replab report DIR", cmdReport},
		{"compare", "results side by side, with ratios and significance: replab compare DIR_A DIR_B… [--html OUT]", cmdCompare},
		{"check", "check a run's history for isolation anomalies: replab check RESULTS_DIR [--jepsen-edn FILE]", cmdCheck},
		{"lab", "build, inspect and remove labs (lab up|down|status|check)", cmdLab},
		{"iotest", "measure each node's storage with fio: replab iotest FILE [--quick] [--node NAME]", cmdIotest},
		{"exec", "run a command inside a site: replab exec SITE -- CMD ARGS…", cmdExec},
		{"link", "show or change running links: link show | link set A->B key=value…", cmdLink},
		{"fault", "break a link, a node or a site now, healed after --for: fault link A<->B down | fault node N kill | fault site S isolate", cmdFault},
		{"capture", "record a running link direction to a pcap file: capture A->B [--for 30s] [-o FILE]", cmdCapture},
		{"agent", "watch a replica's lag on its host for target mode: replab agent --dsn DSN --token-file FILE", cmdAgent},
		{"presets", "list the link presets usable in specs", cmdPresets},
		{"validate", "check a spec file and print it resolved", cmdValidate},
		{"version", "print replab's version", cmdVersion},
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `replab — a laboratory for database replication over wide-area networks

Usage: replab COMMAND [ARGS]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, `
Run "replab COMMAND --help" for a command's options. Docs: docs/run.md, docs/lab.md, docs/spec.md,
docs/postgres.md, docs/metrics.md, docs/iotest.md.
`)
}

func main() {
	if pipeline.IsStage() {
		// A pipeline stage started by a lab in a site (issue 16).
		os.Exit(pipeline.StageMain())
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(os.Stdout)
		return 0
	}
	if args[0] == "__enter" {
		return cmdEnter(args[1:])
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(ctx, args[1:], os.Stdout)
			var ee exitError
			switch {
			case err == nil:
				return 0
			case errors.As(err, &ee):
				return ee.code
			case errors.Is(err, errHelp):
				return 0
			default:
				fmt.Fprintln(os.Stderr, "replab:", err)
				return 1
			}
		}
	}
	fmt.Fprintf(os.Stderr, "replab: unknown command %q\n\n", args[0])
	usage(os.Stderr)
	return 2
}

// exitError carries an exit status without printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

var errHelp = errors.New("help shown")

func cmdVersion(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("version", "replab version", "Prints replab's version (the git commit it was built from).")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(out, "replab", version)
	return nil
}
