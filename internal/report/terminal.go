package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"replab/internal/stats"
)

// PrintSummary writes the end-of-run table. For an aggregate of
// repetitions (Kind "repetitions") the tables hold means over the
// complete repetitions, with a row of confidence half-widths (±) under
// the headline ones, and the counts are sums over them.
func PrintSummary(w io.Writer, s *Summary) {
	agg := s.Kind == "repetitions"
	n := completeRepetitions(s)
	state := "complete"
	if !s.Complete {
		state = "INCOMPLETE: " + s.StopReason
	}
	fmt.Fprintf(w, "\nrun %s (%s, %s, %s): %s\n", s.Name, s.Engine, s.Scheme, s.Workload, state)
	if s.Search != nil {
		PrintSearch(w, s.Search)
		knee := s.Search.Knee()
		if knee == nil {
			return
		}
		if k := s.Search.KneeStep; k > 0 && knee == &s.Search.Steps[k-1] {
			fmt.Fprintf(w, "\nthe knee, step %d (%s):\n", k, knee.Dir)
		} else {
			fmt.Fprintf(w, "\nthe knee, a probe (%s):\n", knee.Dir)
		}
	}
	if s.LinkSearch != nil {
		if !printLinkSearchHead(w, s.LinkSearch) {
			return
		}
	}
	loop := fmt.Sprintf("closed loop, %d users", s.Users)
	if s.Mode == "open" {
		loop = fmt.Sprintf("open loop, target %.2f/s, %d connections", s.TargetRate, s.Users)
	}
	measured := fmt.Sprintf("measured %.0f s", s.MeasureSeconds)
	if agg && n > 0 {
		measured = fmt.Sprintf("measured %.0f s × %d repetitions", s.MeasureSeconds/float64(n), n)
	}
	if s.TransactionsTarget > 0 {
		if agg && n > 0 {
			measured += fmt.Sprintf(" (%d transactions each)", s.TransactionsTarget)
		} else if s.TransactionsDone < s.TransactionsTarget {
			measured += fmt.Sprintf(": the duration ended it after %d of [run] transactions = %d", s.TransactionsDone, s.TransactionsTarget)
		} else {
			measured += fmt.Sprintf(": [run] transactions = %d", s.TransactionsTarget)
		}
	}
	fmt.Fprintf(w, "  %s, %s\n", loop, measured)
	if agg {
		fmt.Fprintf(w, "  throughput  %.0f tpm (%.1f tps), mean of %d repetitions\n", s.TPM, s.TPS, n)
	} else {
		fmt.Fprintf(w, "  throughput  %.0f tpm (%.1f tps), %d transactions, %d errors, %d retries\n", s.TPM, s.TPS, s.Transactions, s.Errors, s.Retries)
	}
	printPages(w, s)
	if s.TPMCI != nil {
		fmt.Fprintf(w, "  over %d repetitions: tpm %.0f ± %.0f (%.0f%% confidence)\n", s.TPMCI.N, s.TPMCI.Mean, s.TPMCI.HalfWidth, 100*s.TPMCI.Level)
	}
	if agg {
		fmt.Fprintf(w, "  in all      %d transactions, %d errors, %d retries (sums over the repetitions)\n", s.Transactions, s.Errors, s.Retries)
		fmt.Fprintf(w, "  tables: means of the repetitions; ± rows: their %s confidence half-widths\n", levelText(s))
		if olderAggregate(s) {
			fmt.Fprintf(w, "  —: not recorded as a mean of the repetitions (an aggregate written before replab averaged every figure)\n")
		}
	}
	if s.MachineBound {
		fmt.Fprintf(w, "  warning: MACHINE-BOUND: %s: this result measures this machine, not the modelled system\n", machineWhy(s))
	}
	printLinkChecks(w, s)
	if s.Steady != nil && !s.Steady.Steady {
		fmt.Fprintf(w, "  warning: throughput was not steady in the measure phase: %s\n", s.Steady.Reason)
	}
	printConflicts(w, s.ReplicationConflicts)
	printConvergence(w, s.Convergence)
	printVerification(w, s.Verification)
	printFallbacks(w, s.SyncFallbacks)
	printConsistency(w, s)
	printStaleReads(w, s)
	printClients(w, s)
	if b := s.BehindScheduleMs; b != nil {
		fmt.Fprintf(w, "  schedule    behind p99 %s ms, max %s ms, %d skipped\n", shown(s, "behind_schedule_ms.p99", b.P99, "%.2f"),
			shown(s, "behind_schedule_ms.max", b.Max, "%.2f"), s.Skipped)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	heading := "commit latency ms"
	if s.Workload == "page-read" { // a "transaction" is one page read
		heading = "page time ms"
	}
	fmt.Fprintf(tw, "\n%s\tcount\tp50\tp95\tp99\tp99.9\tmax\t\n", heading)
	names := slices.Sorted(maps.Keys(s.Types))
	row := func(label, key, countKey string, count int64, p stats.Percentiles) {
		f := func(q string, v float64) string { return shown(s, key+"."+q, v, "%.2f") }
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", label, shown(s, countKey, float64(count), "%.0f"),
			f("p50", p.P50), f("p95", p.P95), f("p99", p.P99), f("p99_9", p.P999), f("max", p.Max))
	}
	if !agg || len(names) > 1 { // one type's figures are the "all" row's
		for _, n := range names {
			if t := s.Types[n]; t != nil {
				row(n, "types."+n+".latency_ms", "types."+n+".count", t.Count, t.LatencyMs)
			}
		}
	}
	switch {
	case agg:
		row("all (mean of repetitions)", "commit_latency_ms", "commit_latency_ms.count", s.CommitLatency.Count, s.CommitLatency)
		h := func(q string) string { return halfWidth(s, "commit_latency_ms."+q, "%.2f") }
		fmt.Fprintf(tw, "±\t%s\t%s\t%s\t%s\t%s\t%s\t\n", halfWidth(s, "commit_latency_ms.count", "%.0f"), h("p50"), h("p95"), h("p99"), h("p99_9"), h("max"))
	case len(names) == 0:
		row("all", "commit_latency_ms", "commit_latency_ms.count", s.CommitLatency.Count, s.CommitLatency)
	}
	if len(s.Replicas) > 0 {
		notVisible := "not visible"
		if agg {
			notVisible += " (sum)"
		}
		fmt.Fprintf(tw, "\nreplication lag ms\tsite\tp50\tp95\tp99\tmax\t%s\tresolution\t\n", notVisible)
		for _, n := range slices.Sorted(maps.Keys(s.Replicas)) {
			r := s.Replicas[n]
			if r == nil {
				continue
			}
			k := "replicas." + n + "."
			f := func(q string, v float64) string { return shown(s, k+"lag_ms."+q, v, "%.2f") }
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t\n", n, r.Site, f("p50", r.LagMs.P50), f("p95", r.LagMs.P95), f("p99", r.LagMs.P99),
				f("max", r.LagMs.Max), r.NotVisibleAtEnd, shown(s, k+"resolution_ms", r.ResolutionMs, "%.2f ms"))
			if agg {
				h := func(q string) string { return halfWidth(s, k+"lag_ms."+q, "%.2f") }
				fmt.Fprintf(tw, "±\t\t%s\t%s\t%s\t%s\t\t%s\t\n", h("p50"), h("p95"), h("p99"), h("max"), halfWidth(s, k+"resolution_ms", "%.2f ms"))
			}
		}
	}
	_ = tw.Flush()
	if note := LagSampleNote(s); note != "" {
		fmt.Fprintf(w, "  %s\n", note)
	}
	for _, line := range LagClockNotes(s) {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if line := catchUpNote(s); line != "" {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if few := fewLagSamples(s); few != "" {
		fmt.Fprintf(w, "  warning: %s\n", few)
	}
	printFaults(w, s)
	printHA(w, s)
	printMonitors(w, s)
}

// completeRepetitions counts an aggregate's complete repetitions.
func completeRepetitions(s *Summary) int {
	n := 0
	for _, r := range s.Repetitions {
		if r.Complete {
			n++
		}
	}
	if n == 0 && s.TPMCI != nil {
		n = s.TPMCI.N
	}
	return n
}

// levelText is the confidence level of an aggregate's intervals: "95%".
func levelText(s *Summary) string {
	l := 0.95
	if s.TPMCI != nil {
		l = s.TPMCI.Level
	}
	return fmt.Sprintf("%.0f%%", 100*l)
}

// shown prints figure key of s (value v) for the summary tables. In an
// aggregate of repetitions only a mean with its CI is shown: aggregates
// written before every figure had one copied some figures from their
// last repetition, and those print as "—".
func shown(s *Summary, key string, v float64, format string) string {
	if s.Kind == "repetitions" {
		c, ok := s.CI[key]
		if !ok {
			return "—"
		}
		v = c.Mean // the same, but older aggregates kept a repetition's value beside some CIs
	}
	return fmt.Sprintf(format, v)
}

// olderAggregate says whether s is an aggregate written before every
// figure of one was a mean with a CI.
func olderAggregate(s *Summary) bool {
	_, ok := s.CI["commit_latency_ms.p99_9"]
	return s.Kind == "repetitions" && len(s.CI) > 0 && !ok
}

// isShown says whether figure key of s is shown (see shown).
func isShown(s *Summary, key string) bool {
	_, ok := s.CI[key]
	return ok || s.Kind != "repetitions"
}

// halfWidth prints the confidence half-width of figure key ("" without
// one, or with a single repetition).
func halfWidth(s *Summary, key, format string) string {
	c, ok := s.CI[key]
	if !ok || !c.Bounded() {
		return ""
	}
	return fmt.Sprintf(format, c.HalfWidth)
}

// printMonitors writes the monitors' part of the end-of-run table: bytes
// and utilization per link direction, CPU and I/O wait per node and
// process role (busiest first, like the GoldenGate study's table by
// session type), bytes per transaction and each replica's verdict.
func printMonitors(w io.Writer, s *Summary) {
	agg := s.Kind == "repetitions"
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(s.Links) > 0 {
		fmt.Fprintln(tw, "\nlink\tbytes\tpackets\tdropped\tutil avg\tutil peak\tqueue peak B\t")
		for _, k := range slices.Sorted(maps.Keys(s.Links)) {
			l := s.Links[k]
			p := "links." + k + "."
			dropped := "—"
			if isShown(s, p+"dropped_queue_packets") && isShown(s, p+"dropped_loss_packets") && isShown(s, p+"dropped_other_packets") {
				dropped = strconv.FormatUint(l.DroppedQueuePackets+l.DroppedLossPackets+l.DroppedOtherPackets, 10)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", k, shown(s, p+"bytes", float64(l.Bytes), "%.0f"), shown(s, p+"packets", float64(l.Packets), "%.0f"),
				dropped, utilText(s, p+"utilization_avg_pct", l.UtilizationAvgPct), utilText(s, p+"utilization_peak_pct", l.UtilizationPeakPct),
				shown(s, p+"queue_peak_bytes", float64(l.QueuePeakBytes), "%.0f"))
			if agg {
				fmt.Fprintf(tw, "±\t%s\t%s\t\t%s\t%s\t%s\t\n", halfWidth(s, p+"bytes", "%.0f"), halfWidth(s, p+"packets", "%.0f"),
					halfWidth(s, p+"utilization_avg_pct", "%.1f%%"), halfWidth(s, p+"utilization_peak_pct", "%.1f%%"), halfWidth(s, p+"queue_peak_bytes", "%.0f"))
			}
		}
	}
	if len(s.Roles) > 0 {
		io := "io wait s"
		if !s.IOWaitMeasured {
			io = "io wait (not measured)"
		}
		fmt.Fprintf(tw, "\nwhere the time goes\trole\tprocs\tcpu s\tcores\t%s\tdisk read MiB\twritten MiB\trss peak MiB\t\n", io)
		for _, node := range slices.Sorted(maps.Keys(s.Roles)) {
			roles := s.Roles[node]
			names := slices.Sorted(maps.Keys(roles))
			sort.SliceStable(names, func(i, j int) bool { return roles[names[i]].CPUS > roles[names[j]].CPUS })
			for _, role := range names {
				rs := roles[role]
				if rs.CPUS == 0 && rs.IOWaitS == 0 && rs.DiskReadBytes == 0 && rs.DiskWriteBytes == 0 {
					continue // idle helpers
				}
				p := "roles." + node + "." + role + "."
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", node, role, shown(s, p+"processes", float64(rs.Processes), "%.0f"),
					shown(s, p+"cpu_s", rs.CPUS, "%.2f"), shown(s, p+"cpu_cores", rs.CPUCores, "%.2f"), shown(s, p+"io_wait_s", rs.IOWaitS, "%.2f"),
					shown(s, p+"disk_read_bytes", float64(rs.DiskReadBytes)/(1<<20), "%.1f"), shown(s, p+"disk_write_bytes", float64(rs.DiskWriteBytes)/(1<<20), "%.1f"),
					shown(s, p+"rss_peak_bytes", float64(rs.RSSPeakBytes)/(1<<20), "%.0f"))
			}
		}
	}
	_ = tw.Flush()
	if s.BytesPerTransaction > 0 {
		pm := ""
		if h := halfWidth(s, "bytes_per_transaction", "%.0f"); h != "" {
			pm = " ± " + h
		}
		fmt.Fprintf(w, "  on the wire %s%s bytes per transaction (every link direction)\n", shown(s, "bytes_per_transaction", s.BytesPerTransaction, "%.0f"), pm)
	}
	for _, n := range slices.Sorted(maps.Keys(s.Verdicts)) {
		v := s.Verdicts[n]
		if olderAggregate(s) {
			v += " (the last repetition's: an older aggregate)"
		}
		fmt.Fprintf(w, "  verdict     %s: %s\n", n, v)
	}
}

// utilText writes a utilization, or "-" for an unlimited link.
func utilText(s *Summary, key string, p *float64) string {
	if p == nil {
		return "-"
	}
	return shown(s, key, *p, "%.1f%%")
}

// printConflicts gives the conflicts replication found by itself.
func printConflicts(w io.Writer, c *ReplicationConflicts) {
	switch {
	case c == nil:
	case c.Error != "":
		fmt.Fprintf(w, "  conflicts   %s (%s)\n", c.Error, c.Counted)
	default:
		var per []string
		for _, n := range slices.Sorted(maps.Keys(c.Nodes)) {
			per = append(per, fmt.Sprintf("%s %d", n, c.Nodes[n]))
		}
		fmt.Fprintf(w, "  conflicts   %d found by replication (%.2f/s of load): %s; counted: %s\n", c.Count, c.PerS, strings.Join(per, ", "), c.Counted)
		if len(c.Restarted) > 0 {
			fmt.Fprintf(w, "    restarted, counted since: %s\n", strings.Join(c.Restarted, ", "))
		}
		if len(c.NotRead) > 0 {
			fmt.Fprintf(w, "    not read after the run: %s\n", strings.Join(c.NotRead, ", "))
		}
	}
}

// printConvergence says whether the copies agreed, loudly when not.
func printConvergence(w io.Writer, c *Convergence) {
	switch {
	case c == nil:
	case c.Error != "":
		fmt.Fprintf(w, "  copies      not compared: %s\n", c.Error)
	case c.Converged:
		fmt.Fprintf(w, "  copies      converged: %d tables the same at %d nodes\n", c.Tables, c.Nodes)
	default:
		fmt.Fprintf(w, "  warning: the copies DIVERGED: %d of %d tables differ between nodes\n", c.DivergedTables, c.Tables)
		for _, t := range slices.Sorted(maps.Keys(c.Diverged)) {
			fmt.Fprintf(w, "    %s: %s\n", t, c.Diverged[t])
		}
	}
}

// printVerification says whether every acknowledged commit was found at
// every node, loudly when not.
func printVerification(w io.Writer, v *Verification) {
	switch {
	case v == nil:
		return
	case v.Error != "":
		fmt.Fprintf(w, "  commits     not verified: %s\n", v.Error)
		return
	}
	nodes := slices.Sorted(maps.Keys(v.Nodes))
	unknown := ""
	if v.Unknown > 0 {
		var landed []string
		for _, n := range nodes {
			landed = append(landed, fmt.Sprintf("%s %d", n, v.Nodes[n].UnacknowledgedButPresent))
		}
		unknown = fmt.Sprintf("; %d never acknowledged, landed: %s", v.Unknown, strings.Join(landed, ", "))
	}
	switch {
	case v.Lost == 0:
		fmt.Fprintf(w, "  commits     verified: all %d acknowledged commits at %d nodes%s\n", v.Acked, len(nodes), unknown)
	case v.LostEverywhere == 0:
		fmt.Fprintf(w, "  warning: acknowledged commits missing at some nodes, each held at another (of %d)%s\n", v.Acked, unknown)
	default:
		fmt.Fprintf(w, "  warning: acknowledged commits LOST: %d at no node checked (of %d)%s\n", v.LostEverywhere, v.Acked, unknown)
	}
	for _, n := range nodes {
		nv := v.Nodes[n]
		if nv.Lost == 0 {
			continue
		}
		held := ""
		switch {
		case nv.HeldElsewhere == nv.Lost:
			held = ", all held at another node: behind, or no longer following"
		case nv.HeldElsewhere > 0:
			held = fmt.Sprintf(", %d of them held at another node", nv.HeldElsewhere)
		}
		fmt.Fprintf(w, "    %s: %d missing%s; first %s\n", n, nv.Lost, held, strings.Join(nv.LostKeys, ", "))
	}
	for _, n := range slices.Sorted(maps.Keys(v.Skipped)) {
		fmt.Fprintf(w, "    %s not checked: %s\n", n, v.Skipped[n])
	}
}

// printFallbacks says when a synchronous scheme ran asynchronously.
func printFallbacks(w io.Writer, f *SyncFallbacks) {
	if f == nil {
		return
	}
	if f.Count == 0 {
		fmt.Fprintf(w, "  sync        never fell back to asynchronous (polled every %.0f ms)\n", f.ResolutionMs)
		return
	}
	var ps []string
	for _, p := range f.Periods {
		end := "the end"
		if p.EndS != nil {
			end = fmt.Sprintf("%.1f s", *p.EndS)
		}
		ps = append(ps, fmt.Sprintf("%s from %.1f s to %s", p.Node, p.StartS, end))
	}
	fmt.Fprintf(w, "  warning: the synchronous scheme fell back to asynchronous %d times, %.1f s in all (%.0f %% of the measure phase)", f.Count, f.AsyncS, 100*f.AsyncFraction)
	if len(ps) > 0 {
		fmt.Fprintf(w, ": %s", strings.Join(ps, "; "))
	}
	fmt.Fprintln(w)
}
