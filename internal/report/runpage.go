package report

// The report page of a single run (repspage.go: repetitions of a run;
// sweeppage.go: a sweep).

import (
	"fmt"
	"strconv"
	"strings"

	"replab/internal/monitor"
	"replab/internal/stats"
	"replab/internal/units"
)

// runFacts are the words under a run's heading.
func runFacts(s *Summary, env *Environment) []string {
	var f []string
	eng := s.Engine
	if env != nil && env.EngineVersion != "" {
		eng += " " + env.EngineVersion
	}
	f = append(f, eng, s.Scheme+" replication", "workload "+s.Workload)
	switch {
	case s.Mode == "open":
		f = append(f, fmt.Sprintf("open loop, target %s/s over %d connections", fmtNum(s.TargetRate), s.Users))
	case s.Users > 0:
		f = append(f, fmt.Sprintf("closed loop, %d users", s.Users))
	}
	if s.MeasureSeconds > 0 {
		f = append(f, "measured "+fmtNum(s.MeasureSeconds)+" s")
	}
	if !s.Started.IsZero() {
		f = append(f, "started "+s.Started.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if s.SpecFile != "" {
		f = append(f, "spec "+s.SpecFile)
	}
	return f
}

func envLine(e *Environment) string {
	if e == nil {
		return ""
	}
	var f []string
	if e.ReplabVersion != "" {
		f = append(f, "replab "+e.ReplabVersion)
	}
	if e.Kernel != "" {
		f = append(f, "Linux "+e.Kernel)
	}
	cpu := e.CPUModel
	if e.CPUs > 0 {
		cpu = strings.TrimSpace(fmt.Sprintf("%s, %d CPUs", cpu, e.CPUs))
	}
	if cpu != "" {
		f = append(f, cpu)
	}
	if e.MemoryBytes > 0 {
		f = append(f, units.Bytes(float64(e.MemoryBytes))+" memory")
	}
	if e.GoVersion != "" {
		f = append(f, e.GoVersion)
	}
	if e.Hostname != "" {
		f = append(f, "host "+e.Hostname)
	}
	return strings.Join(f, " · ")
}

func stateOf(complete bool, reason string) (string, bool) {
	if complete {
		return "complete", true
	}
	if reason == "" {
		return "incomplete", false
	}
	return "incomplete: " + reason, false
}

// worstReplica is the replica with the highest lag p99.
func worstReplica(s *Summary) (string, *Replica) {
	var name string
	var worst *Replica
	for _, n := range sortedKeys(s.Replicas) {
		if r := s.Replicas[n]; r != nil && (worst == nil || r.LagMs.P99 > worst.LagMs.P99) {
			name, worst = n, r
		}
	}
	return name, worst
}

func runCards(s *Summary) []card {
	cs := []card{{Label: "Throughput", Value: group(s.TPM), Unit: "tpm",
		Note: fmt.Sprintf("%s tps · %s transactions", fmtNum(s.TPS), group(float64(s.Transactions)))}}
	if s.TPMCI != nil && s.TPMCI.N >= 2 {
		cs[0].Note = ciText(s.TPMCI)
	}
	latency := "Commit latency p99"
	if s.Workload == "page-read" {
		latency = "Page time p99"
	}
	cs = append(cs, card{Label: latency, Value: ms(s.CommitLatency.P99), Unit: "ms",
		Note: "p50 " + ms(s.CommitLatency.P50) + " ms · max " + ms(s.CommitLatency.Max) + " ms"})
	reps := sortedKeys(s.Replicas)
	if len(reps) <= 3 {
		for _, n := range reps {
			r := s.Replicas[n]
			label := "Lag p99 at " + n
			if r.Site != "" {
				label += " (" + r.Site + ")"
			}
			cs = append(cs, card{Label: label, Value: ms(r.LagMs.P99), Unit: "ms", Note: "p50 " + ms(r.LagMs.P50) + " ms · max " + ms(r.LagMs.Max) + " ms"})
		}
	} else if n, r := worstReplica(s); r != nil {
		cs = append(cs, card{Label: "Worst lag p99", Value: ms(r.LagMs.P99), Unit: "ms", Note: "at " + n + " of " + strconv.Itoa(len(reps)) + " replicas"})
	}
	if s.BytesPerTransaction > 0 {
		cs = append(cs, card{Label: "On the wire", Value: group(s.BytesPerTransaction), Unit: "B / transaction", Note: "all link directions, measure phase"})
	}
	if p := s.Pages; p != nil {
		note := fmt.Sprintf("%s · %s slow of %s", bytesPerS(p.ReadBytesPerS), group(float64(p.Slow.SlowPages)), group(float64(p.Slow.Pages)))
		cs = append(cs, card{Label: "Pages read", Value: fmtNum(p.PagesPerS), Unit: "pages/s", Note: note})
	}
	if s.Errors > 0 {
		cs = append(cs, card{Label: "Errors", Value: group(float64(s.Errors)), Note: group(float64(s.Retries)) + " retries"})
	}
	return cs
}

func throughputTable(s *Summary) htmlTable {
	t := htmlTable{Caption: "Throughput"}
	row := func(k, v string) { t.Rows = append(t.Rows, []tcell{txt(k), num(v)}) }
	tpm := group(s.TPM)
	if c := ciText(s.TPMCI); c != "" {
		tpm += " " + c
	}
	row("transactions per minute", tpm)
	row("transactions per second", fmtNum(s.TPS))
	row("transactions", group(float64(s.Transactions)))
	row("rows changed", group(float64(s.RowsChanged)))
	row("errors", group(float64(s.Errors)))
	row("retries", group(float64(s.Retries)))
	if s.BytesPerTransaction > 0 {
		row("bytes on the wire per transaction", group(s.BytesPerTransaction))
	}
	if s.BehindScheduleMs != nil {
		row("behind schedule p99 / max (ms)", ms(s.BehindScheduleMs.P99)+" / "+ms(s.BehindScheduleMs.Max))
		row("skipped (every user busy)", group(float64(s.Skipped)))
	}
	if st := s.Steady; st != nil {
		v := "yes: no significant trend or drift"
		if !st.Steady {
			v = "no: " + st.Reason
		} else if st.Reason != "" {
			v = st.Reason
		}
		row("steady in the measure phase", v)
		t.Rows[len(t.Rows)-1][1].Title = steadyTitle(st)
	}
	return t
}

// fig is a table cell for figure key of s, whose value is v, written by
// f. For an aggregate of repetitions it is the figure's mean over them
// with its confidence interval on hover, and with pm also in the cell;
// "—" when the aggregate has no CI for it (older aggregates copied some
// figures from their last repetition).
func fig(s *Summary, key string, v float64, f func(float64) string, pm bool) tcell {
	if s.Kind != "repetitions" {
		return num(f(v))
	}
	c, ok := s.CI[key]
	if !ok {
		return tcell{Text: "—", Class: "n", Title: "not recorded as a mean of the repetitions (an older aggregate)"}
	}
	cell := num(f(c.Mean))
	if c.Bounded() {
		cell.Title = fmt.Sprintf("mean of %d repetitions ± %s (%.0f %% confidence)", c.N, f(c.HalfWidth), 100*c.Level)
		if pm {
			cell.Text += " ± " + f(c.HalfWidth)
		}
	}
	return cell
}

// meansCaption adds to an aggregate's table caption what its figures are.
func meansCaption(s *Summary, caption string) string {
	if s.Kind != "repetitions" {
		return caption
	}
	return fmt.Sprintf("%s: means of %d repetitions (hover a figure for its confidence interval)", caption, completeRepetitions(s))
}

func latencyTable(s *Summary) (htmlTable, bool) {
	caption := "Commit latency (ms)"
	if s.Workload == "page-read" {
		caption = "Time per page (ms)"
	}
	t := htmlTable{Caption: meansCaption(s, caption), Head: []tcell{txt("transaction type"), numHead("count"), numHead("mean"),
		numHead("p50"), numHead("p90"), numHead("p95"), numHead("p99"), numHead("p99.9"), numHead("max")}}
	count := func(v float64) string { return group(v) }
	row := func(name, key string, p stats.Percentiles) {
		f := func(q string, v float64) tcell { return fig(s, key+"."+q, v, ms, false) }
		t.Rows = append(t.Rows, []tcell{txt(name), fig(s, key+".count", float64(p.Count), count, false), f("mean", p.Mean), f("p50", p.P50),
			f("p90", p.P90), f("p95", p.P95), f("p99", p.P99), f("p99_9", p.P999), f("max", p.Max)})
	}
	for _, n := range sortedKeys(s.Types) {
		if tr := s.Types[n]; tr != nil {
			row(n, "types."+n+".latency_ms", tr.LatencyMs)
		}
	}
	if len(s.Types) != 1 && s.CommitLatency.Count > 0 {
		name := "all"
		if s.Kind == "repetitions" {
			name = "all (mean of repetitions)"
		}
		row(name, "commit_latency_ms", s.CommitLatency)
	}
	return t, len(t.Rows) > 0
}

func lagTable(s *Summary) (htmlTable, bool) {
	caption := "Replication lag: commit → visible at the replica (ms)"
	if note := LagSampleNote(s); note != "" {
		caption += "; " + note
	}
	notVisible := "transactions committed in the measure phase never seen at the replica"
	if s.Kind == "repetitions" {
		notVisible += ", summed over the repetitions"
	}
	t := htmlTable{Caption: meansCaption(s, caption), Head: []tcell{txt("replica"), txt("site"),
		numHead("p50"), numHead("p95"), numHead("p99"), numHead("p99.9"), numHead("max"),
		{Text: "not visible at end", Class: "n", Title: notVisible},
		{Text: "resolution", Class: "n", Title: "the lag watcher's poll interval: each lag is at most this (plus one poll) above the true one"},
		{Text: "engine replay lag p50", Class: "n", Title: "the engine's own estimate, sampled each second"},
		{Text: "bytes behind max", Class: "n", Title: "the engine's backlog for this replica"}}}
	hasVerdict := len(s.Verdicts) > 0
	if hasVerdict {
		t.Head = append(t.Head, txt("verdict"))
	}
	for _, n := range sortedKeys(s.Replicas) {
		r := s.Replicas[n]
		if r == nil {
			continue
		}
		nv := num(group(float64(r.NotVisibleAtEnd)))
		if r.NotVisibleAtEnd > 0 {
			nv.Class = "n bad"
		}
		k := "replicas." + n + "."
		eng, behind := num("—"), num("—")
		if r.EngineReplayLagMs != nil {
			eng = fig(s, k+"engine_replay_lag_ms.p50", r.EngineReplayLagMs.P50, ms, false)
		}
		if r.EngineBytesBehind > 0 {
			behind = fig(s, k+"engine_bytes_behind_max", float64(r.EngineBytesBehind), units.Bytes, false)
		}
		f := func(q string, v float64) tcell { return fig(s, k+"lag_ms."+q, v, ms, false) }
		row := []tcell{txt(n), txt(r.Site), f("p50", r.LagMs.P50), f("p95", r.LagMs.P95), f("p99", r.LagMs.P99), f("p99_9", r.LagMs.P999),
			f("max", r.LagMs.Max), nv, fig(s, k+"resolution_ms", r.ResolutionMs, func(v float64) string { return ms(v) + " ms" }, false), eng, behind}
		if hasVerdict {
			row = append(row, tcell{Text: s.Verdicts[n], Class: "wrap"})
		}
		t.Rows = append(t.Rows, row)
	}
	return t, len(t.Rows) > 0
}

func linksTable(s *Summary) (htmlTable, bool) {
	t := htmlTable{Caption: meansCaption(s, "Links over the measure phase"), Head: []tcell{txt("direction"), numHead("bytes"), numHead("packets"),
		numHead("throughput"), numHead("rate"), numHead("utilization avg"), numHead("peak"), numHead("dropped"), numHead("queue peak")}}
	for _, d := range sortedKeys(s.Links) {
		l := s.Links[d]
		k := "links." + d + "."
		util, peak, rate := num("unlimited"), num(""), "unlimited"
		if l.UtilizationAvgPct != nil {
			util = fig(s, k+"utilization_avg_pct", *l.UtilizationAvgPct, pct, true)
		}
		if l.UtilizationPeakPct != nil {
			peak = fig(s, k+"utilization_peak_pct", *l.UtilizationPeakPct, pct, false)
		}
		if l.RateBps > 0 {
			rate = units.Bits(float64(l.RateBps))
		}
		t.Rows = append(t.Rows, []tcell{txt(d), fig(s, k+"bytes", float64(l.Bytes), units.Bytes, true), fig(s, k+"packets", float64(l.Packets), group, false),
			fig(s, k+"throughput_avg_bps", l.ThroughputAvgBps, units.Bits, false), num(rate), util, peak, droppedCell(s, k, l),
			fig(s, k+"queue_peak_bytes", float64(l.QueuePeakBytes), units.Bytes, false)})
	}
	return t, len(t.Rows) > 0
}

// droppedCell is a link's dropped packets, by cause on hover; for an
// aggregate of repetitions the sum of the causes' means.
func droppedCell(s *Summary, k string, l monitor.LinkSummary) tcell {
	causes := []struct {
		key string
		v   uint64
	}{{"dropped_queue_packets", l.DroppedQueuePackets}, {"dropped_loss_packets", l.DroppedLossPackets}, {"dropped_other_packets", l.DroppedOtherPackets}}
	var total float64
	var text [3]string
	for i, c := range causes {
		cell := fig(s, k+c.key, float64(c.v), group, false)
		if cell.Text == "—" {
			return cell
		}
		v := float64(c.v)
		if ci, ok := s.CI[k+c.key]; ok && s.Kind == "repetitions" {
			v = ci.Mean
		}
		total += v
		text[i] = cell.Text
	}
	dc := num(group(total))
	dc.Title = fmt.Sprintf("queue %s, loss %s, other %s", text[0], text[1], text[2])
	return dc
}

func rolesTable(r *Results) (htmlTable, bool) {
	x := r.Summary
	t := htmlTable{Caption: meansCaption(x, "CPU and I/O wait by process role (measure phase)"), Head: []tcell{txt("node"), txt("role"), numHead("CPU s"),
		numHead("user s"), numHead("system s"), numHead("I/O wait s"), numHead("avg cores"), numHead("RSS peak"), numHead("processes")}}
	idle := 0
	for _, node := range sortedKeys(x.Roles) {
		for _, role := range sortedKeys(x.Roles[node]) {
			f := x.Roles[node][role]
			if f.CPUS+f.IOWaitS < 0.005 { // prints as 0.00 everywhere
				idle++
				continue
			}
			k := "roles." + node + "." + role + "."
			t.Rows = append(t.Rows, []tcell{txt(node), txt(role), fig(x, k+"cpu_s", f.CPUS, ms, true), fig(x, k+"cpu_user_s", f.CPUUserS, ms, false),
				fig(x, k+"cpu_sys_s", f.CPUSysS, ms, false), fig(x, k+"io_wait_s", f.IOWaitS, ms, false), fig(x, k+"cpu_cores", f.CPUCores, ms, false),
				fig(x, k+"rss_peak_bytes", float64(f.RSSPeakBytes), units.Bytes, false), fig(x, k+"processes", float64(f.Processes), fmtNum, false)})
		}
	}
	if idle > 0 {
		t.Note = fmt.Sprintf("%d roles that used no measurable CPU or I/O wait are not listed.", idle)
	}
	return t, len(t.Rows) > 0
}

func envTable(s *Summary, e *Environment) htmlTable {
	var t htmlTable
	row := func(k, v string) {
		if v != "" {
			t.Rows = append(t.Rows, []tcell{txt(k), txt(v)})
		}
	}
	if e != nil {
		row("replab", e.ReplabVersion)
		row("engine version", e.EngineVersion)
		row("kernel", e.Kernel)
		row("CPU", strings.TrimSpace(fmt.Sprintf("%s × %d", e.CPUModel, e.CPUs)))
		if e.MemoryBytes > 0 {
			row("memory", units.Bytes(float64(e.MemoryBytes)))
		}
		row("Go", e.GoVersion)
		row("host", e.Hostname)
		if !e.Time.IsZero() {
			row("recorded", e.Time.UTC().Format("2006-01-02 15:04:05 UTC"))
		}
	}
	if s != nil {
		if s.SetupS > 0 {
			row("setup (lab, engine, schema, load)", fmtNum(s.SetupS)+" s")
		}
		if s.Load != nil {
			row("initial load", fmt.Sprintf("%s rows in %s s (%s rows/s)", group(float64(s.Load.Rows)), fmtNum(s.Load.Seconds), group(s.Load.RowsPerS)))
		}
	}
	return t
}

// runPage is the report of one measurement.
func runPage(r *Results) *page {
	s := r.Summary
	p := &page{Kind: "run", Heading: s.Name, Title: "replab: " + s.Name, Env: envLine(r.Env), Source: r.Dir, Problems: r.Problems,
		Banner: machineBanner(s)}
	p.State, p.StateOK = stateOf(s.Complete, s.StopReason)
	p.Facts = runFacts(s, r.Env)
	p.Cards = runCards(s)

	head := section{ID: "headline", Title: "Headline figures",
		Intro: "Measure phase only: warmup and cooldown are excluded."}
	if s.Steady != nil && !s.Steady.Steady {
		head.Notes = append(head.Notes, "Throughput was not steady during the measure phase: "+s.Steady.Reason+".")
	}
	head.Tables = append(head.Tables, throughputTable(s))
	if t, ok := latencyTable(s); ok {
		head.Tables = append(head.Tables, t)
	}
	if t, ok := lagTable(s); ok {
		head.Tables = append(head.Tables, t)
	}
	p.Sections = append(p.Sections, head)
	if sec, ok := pagesSection(r); ok {
		p.Sections = append(p.Sections, sec)
	}
	if sec, ok := faultsSection(r); ok {
		p.Sections = append(p.Sections, sec)
	}
	if sec, ok := consistencySection(r, &p.Missing); ok {
		p.Sections = append(p.Sections, sec)
	}
	p.Sections = append(p.Sections, runDetail(r, &p.Missing)...)
	p.Sections = append(p.Sections, section{ID: "environment", Title: "Environment", Tables: []htmlTable{envTable(s, r.Env)}})
	return p
}

// runDetail is a measurement's charts and the tables beside them.
func runDetail(r *Results, missing *[]string) []section {
	s := r.Summary
	var secs []section
	perf := section{ID: "throughput", Title: "Throughput and commit latency"}
	addFigure(&perf, missing, throughputFig(r))
	if len(r.NodeRoles) > 0 {
		addFigure(&perf, missing, nodeRolesChart("node-roles", r))
	}
	addFigure(&perf, missing, latencyTimeChart("latency-time", r))
	addFigure(&perf, missing, latencyCDFChart("latency-cdf", r.Hists))
	if len(perf.Figures) > 0 {
		secs = append(secs, perf)
	}

	if s != nil && len(s.Replicas) > 0 {
		lag := section{ID: "replication", Title: "Replication lag",
			Intro: "The time from a transaction's commit at its source to the moment it is visible at each replica, measured per transaction on one clock."}
		sites := map[string]string{}
		for n, rep := range s.Replicas {
			if rep != nil {
				sites[n] = rep.Site
			}
		}
		addFigure(&lag, missing, lagTimeChart("lag-time", r))
		if t, ok := staleTable(s); ok {
			lag.Tables = append(lag.Tables, t)
			addFigure(&lag, missing, staleChart("stale-time", r))
		}
		addFigure(&lag, missing, lagCDFChart("lag-cdf", r.Hists, sites))
		addFigure(&lag, missing, replicationChart("repl-bytes", r))
		if len(lag.Figures) > 0 {
			secs = append(secs, lag)
		}
	}

	net := section{ID: "network", Title: "Network",
		Intro: "What the emulated links carried, per direction: IP packets delivered (headers included) and their share of the configured rate."}
	if t, ok := linksTable(s); ok {
		net.Tables = append(net.Tables, t)
	}
	if t, ok := linkFactsTable(s); ok {
		net.Tables = append(net.Tables, t)
	}
	if t, ok := linkClassTable(s); ok {
		net.Tables = append(net.Tables, t)
	}
	addFigure(&net, missing, linkUtilChart("link-util", r))
	if len(net.Tables)+len(net.Figures) > 0 {
		secs = append(secs, net)
	}

	cpu := section{ID: "cpu", Title: "Where the time goes: CPU and I/O wait",
		Intro: "CPU seconds in user and kernel mode, and time spent waiting for block I/O (kernel delay accounting), summed over each role's processes."}
	if t, ok := rolesTable(r); ok {
		cpu.Tables = append(cpu.Tables, t)
	}
	addFigure(&cpu, missing, rolesChart("roles", r))
	if len(cpu.Tables)+len(cpu.Figures) > 0 {
		secs = append(secs, cpu)
	}
	return secs
}

func throughputFig(r *Results) chart {
	return throughputChart("throughput", []*Results{r}, []string{r.Name()})
}
