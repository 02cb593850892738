package main

import (
	"io"

	"replab/bench/internal/benchkit"
)

// Report is the JSON file: the machine, then every figure in measuring order.
type Report = benchkit.Report[Environment]

// Figure is one measured number, named with its unit, with what was
// configured and what the issue asks for.
type Figure = benchkit.Figure

// summary lays out the summary table.
var summary = benchkit.Summary{
	ConfiguredKeys: []string{"topology", "repetitions"},
	CPUHeading:     "\nCPU per step (setup times stretch when other work shares the machine):",
	IDWidth:        10,
}

// writeSummary prints one line per figure: measured, configured, target.
func writeSummary(w io.Writer, r *Report) { r.WriteSummary(w, summary) }
