package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"replab/bench/internal/benchkit"
)

// Report is the JSON file: the machine, then every figure in measuring
// order. Its steps say how long each step took and how busy the machine
// was: other work on the machine delays the emulator.
type Report = benchkit.Report[Environment]

// Figure is one measured number (or list), named with its unit, with what
// was configured and what the issue asks for.
type Figure = benchkit.Figure

// summary lays out the summary table.
var summary = benchkit.Summary{
	// The keys that tell the links apart, in a fixed order.
	ConfiguredKeys: []string{"rate", "rate_mbit", "rtt_ms", "loss", "congestion"},
	CPUHeading:     "\nCPU per step (other work on the machine delays the emulator):",
	IDWidth:        16,
	ShowValue:      showValue,
}

// writeSummary prints one line per figure: measured, configured, target;
// then a table per buffer-size figure.
func writeSummary(w io.Writer, r *Report) {
	s := summary
	s.Extra = func(w io.Writer) { writeBufferTables(w, r) }
	r.WriteSummary(w, s)
}

// writeBufferTables prints the rows of each buffer-size figure.
func writeBufferTables(w io.Writer, r *Report) {
	for _, f := range r.Figures {
		if rows, ok := f.Value.([]bufferRow); ok {
			fmt.Fprintf(w, "\n%s (%s):\n", f.Name, benchkit.ShowConfigured(f.Configured, summary.ConfiguredKeys))
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "buffer max bytes\tgoodput Mbit/s\twindow/RTT Mbit/s\tkernel RTT ms\t")
			for _, row := range rows {
				fmt.Fprintf(tw, "%d\t%.2f\t%.2f\t%.1f\t\n", row.MaxBytes, row.GoodputMbps, row.WindowOverRTTMbps, row.KernelRTTMs)
			}
			_ = tw.Flush()
		}
	}
}

// showValue shows buffer rows as size:goodput pairs, numbers trimmed.
func showValue(v any) string {
	switch x := v.(type) {
	case float64:
		return benchkit.TrimFloat(x)
	case []bufferRow:
		parts := make([]string, len(x))
		for i, r := range x {
			parts[i] = fmt.Sprintf("%s:%s", showBytes(r.MaxBytes), benchkit.TrimFloat(benchkit.Round(r.GoodputMbps, 1)))
		}
		return strings.Join(parts, " ")
	}
	return fmt.Sprint(v)
}

func showBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
