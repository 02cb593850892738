package report

// Stale reads (issue 32) in the results: summary.json's stale_reads,
// stale_reads.csv, the terminal's block, and the HTML report's table and
// chart beside the replication lag.

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"replab/internal/check"
)

// StaleReadsFile lists every stale read of a run (check.StaleRead).
const StaleReadsFile = "stale_reads.csv"

// StaleReads is summary.json's stale_reads: per node that served reads in
// the measure phase, what they saw of the writes acknowledged before them
// (check.StaleReads), and at replicas what the lag predicts. In an
// aggregate of repetitions the counts are sums, the shares, rates,
// distributions and predictions means with their CIs in ci
// ("stale_reads.nodes.s1.stale_share", "stale_reads.nodes.s1.predicted.share").
type StaleReads struct {
	// Nodes by name; Roles says what each is ("source", "replica").
	Nodes map[string]*check.NodeStale `json:"nodes"`
	Roles map[string]string           `json:"roles"`
	// LagSampleEvery is the lag sample the predictions rest on (1: every
	// transaction tracked).
	LagSampleEvery int `json:"lag_sample_every,omitempty"`
	// Unlisted counts stale reads left out of stale_reads.csv.
	Unlisted int `json:"unlisted,omitempty"`
	// Error says why nothing could be computed ("" when it was).
	Error string `json:"error,omitempty"`
}

// StaleRow is one line of stale_reads.csv.
type StaleRow struct {
	T           float64 // the second the read began in, as in series.csv
	Node        string
	Index       float64
	Process     float64
	Key         float64
	StalenessMs float64
	Own         bool
}

// WriteStaleReads writes stale_reads.csv: every stale read, in the order
// its transaction completed.
func (d *Dir) WriteStaleReads(reads []check.StaleRead) error {
	var b strings.Builder
	b.WriteString("t_s,node,index,process,key,staleness_ms,own_write\n")
	for _, r := range reads {
		own := 0
		if r.Own {
			own = 1
		}
		fmt.Fprintf(&b, "%d,%s,%d,%d,%d,%.3f,%d\n", r.Second, r.Node, r.Index, r.Process, r.Key, float64(r.StalenessNs)/1e6, own)
	}
	return os.WriteFile(d.File(StaleReadsFile), []byte(b.String()), 0o644)
}

func parseStale(t *table, row []string) StaleRow {
	return StaleRow{T: t.num(row, "t_s"), Node: t.str(row, "node"), Index: t.num(row, "index"), Process: t.num(row, "process"),
		Key: t.num(row, "key"), StalenessMs: t.num(row, "staleness_ms"), Own: t.num(row, "own_write") == 1}
}

// staleNodes are the nodes with reads, replicas first, then by name.
func (s *StaleReads) staleNodes() []string {
	var reps, others []string
	for _, n := range sortedKeys(s.Nodes) {
		if s.Roles[n] == "replica" {
			reps = append(reps, n)
		} else {
			others = append(others, n)
		}
	}
	return append(reps, others...)
}

// sharePct is a share as a percentage with 3 significant decimals.
func sharePct(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 0.0001:
		return fmt.Sprintf("%.4f", 100*v)
	case v < 0.01:
		return fmt.Sprintf("%.3f", 100*v)
	}
	return fmt.Sprintf("%.2f", 100*v)
}

// agreement says how the measured and predicted stale shares of a node
// compare: in a run, within the prediction's tolerance; in an aggregate,
// within 10 % or inside each other's 95 % interval.
func agreement(s *Summary, node string, ns *check.NodeStale) string {
	p := ns.Predicted
	if p == nil {
		return ""
	}
	if s.Kind == "repetitions" {
		m, okm := s.CI["stale_reads.nodes."+node+".stale_share"]
		q, okq := s.CI["stale_reads.nodes."+node+".predicted.share"]
		if !okm || !okq {
			return ""
		}
		rel := math.Abs(m.Mean-q.Mean) <= check.AgreeRelative*q.Mean
		overlap := m.Bounded() && q.Bounded() && m.Mean-m.HalfWidth <= q.Mean+q.HalfWidth && q.Mean-q.HalfWidth <= m.Mean+m.HalfWidth
		switch {
		case rel:
			return "agree (within 10 %)"
		case overlap:
			return "agree (95 % intervals overlap)"
		}
		return "disagree"
	}
	if p.Agree {
		return "agree"
	}
	return "disagree"
}

// printStaleReads is the terminal's block: per node, reads, stale share,
// session violations, staleness, and beside it what the lag predicts.
func printStaleReads(w io.Writer, s *Summary) {
	st := s.StaleReads
	if st == nil {
		return
	}
	if st.Error != "" {
		fmt.Fprintf(w, "  stale reads not computed: %s\n", st.Error)
		return
	}
	if len(st.Nodes) == 0 {
		return
	}
	agg := s.Kind == "repetitions"
	head := "stale reads (a read that missed a write acknowledged before it began)"
	if agg {
		head += "; counts summed, shares means of the repetitions ± their 95 % half-widths"
	}
	fmt.Fprintf(w, "\n  %s\n", head)
	fmt.Fprintf(w, "  %10s  %-7s  %9s  %8s  %-14s  %-14s  %9s  %9s  %9s  %9s\n", "node", "role", "reads", "stale", "stale %", "predicted %", "RYW/10k", "MR/10k", "stale p50", "stale max")
	for _, n := range st.staleNodes() {
		ns := st.Nodes[n]
		key := "stale_reads.nodes." + n
		share := sharePct(ns.StaleShare) + pmPct(s, key+".stale_share")
		pred := "—"
		if ns.Predicted != nil {
			pred = sharePct(ns.Predicted.Share) + pmPct(s, key+".predicted.share")
		}
		fmt.Fprintf(w, "  %10s  %-7s  %9s  %8s  %-14s  %-14s  %9.1f  %9.1f  %9s  %9s\n", n, st.Roles[n], group(float64(ns.Reads)), group(float64(ns.Stale)),
			share, pred, ns.RYWPer10k, ns.MonotonicPer10k, msOrDash(ns.StalenessMs.P50, ns.Stale), msOrDash(ns.StalenessMs.Max, ns.Stale))
	}
	for _, n := range st.staleNodes() {
		ns := st.Nodes[n]
		p := ns.Predicted
		if p == nil {
			continue
		}
		fmt.Fprintf(w, "  %s: measured %s %% of reads stale, the lag predicts %s %% (%s %% from the ack): %s; safe window %s ms for %.1f %% of reads (lag p99.9 %s ms)\n",
			n, sharePct(ns.StaleShare), sharePct(p.Share), sharePct(p.ShareFromAck), agreement(s, n, ns), ms(p.SafeWindowMs), 100*p.SafeShare, ms(p.LagP999Ms))
	}
	if st.LagSampleEvery > 1 {
		fmt.Fprintf(w, "  (the predictions rest on every %d-th transaction's lag: lag_sample = 1 tracks every one)\n", st.LagSampleEvery)
	}
}

func pmPct(s *Summary, key string) string {
	if s.Kind != "repetitions" {
		return ""
	}
	if c, ok := s.CI[key]; ok && c.Bounded() && c.HalfWidth > 0 {
		return " ± " + sharePct(c.HalfWidth)
	}
	return ""
}

func msOrDash(v float64, n int64) string {
	if n == 0 {
		return "—"
	}
	return ms(v)
}

// staleTable is the report's predicted-vs-measured table.
func staleTable(s *Summary) (htmlTable, bool) {
	st := s.StaleReads
	if st == nil || len(st.Nodes) == 0 {
		return htmlTable{}, false
	}
	t := htmlTable{Caption: meansCaption(s, "Stale reads: measured and predicted from the lag"),
		Head: []tcell{txt("node"), txt("role"), numHead("reads"), numHead("after a write"), numHead("stale"), numHead("stale %"),
			numHead("predicted %"), numHead("from the ack %"), txt("agreement"), numHead("RYW / 10k reads"), numHead("monotonic / 10k reads"),
			numHead("staleness p50 ms"), numHead("p99"), numHead("max"), numHead("safe window ms")}}
	for _, n := range st.staleNodes() {
		ns := st.Nodes[n]
		k := "stale_reads.nodes." + n + "."
		row := []tcell{txt(n), txt(st.Roles[n]), num(group(float64(ns.Reads))), num(group(float64(ns.AfterWrite))), num(group(float64(ns.Stale))),
			fig(s, k+"stale_share", ns.StaleShare, sharePct, true)}
		if p := ns.Predicted; p != nil {
			row = append(row, fig(s, k+"predicted.share", p.Share, sharePct, true), fig(s, k+"predicted.share_from_ack", p.ShareFromAck, sharePct, false), txt(agreement(s, n, ns)))
		} else {
			row = append(row, num("—"), num("—"), txt(""))
		}
		row = append(row, fig(s, k+"ryw_per_10k", ns.RYWPer10k, oneDec, false), fig(s, k+"monotonic_per_10k", ns.MonotonicPer10k, oneDec, false))
		if ns.Stale > 0 {
			row = append(row, fig(s, k+"staleness_ms.p50", ns.StalenessMs.P50, ms, false), fig(s, k+"staleness_ms.p99", ns.StalenessMs.P99, ms, false),
				fig(s, k+"staleness_ms.max", ns.StalenessMs.Max, ms, false))
		} else {
			row = append(row, num("—"), num("—"), num("—"))
		}
		if p := ns.Predicted; p != nil {
			row = append(row, fig(s, k+"predicted.safe_window_ms", p.SafeWindowMs, ms, false))
		} else {
			row = append(row, num("—"))
		}
		t.Rows = append(t.Rows, row)
	}
	t.Note = "A read is stale when it missed a write acknowledged before it began; staleness is how long after the oldest write it missed was acknowledged. " +
		"Predicted: the mean over the reads of P(lag > gap), the gap from the COMMIT of the key's last acknowledged write (where the lag starts) to the read; " +
		"“from the ack” takes the gap from the acknowledgement. The safe window is the delay after an acknowledgement after which 99.9 % of reads see the write, as the lag predicts it. docs/metrics.md."
	return t, true
}

func oneDec(v float64) string { return fmt.Sprintf("%.1f", v) }

// staleChart: stale reads per second at each node, on the run's timeline,
// beside the lag chart.
func staleChart(id string, r *Results) chart {
	st := r.Summary.StaleReads
	if st == nil || len(st.Nodes) == 0 {
		return chart{missing: "stale reads over time: none computed"}
	}
	rows := r.Stale
	if rows == nil {
		if _, err := os.Stat(r.file(StaleReadsFile)); err != nil {
			return chart{missing: "stale reads over time: no " + StaleReadsFile}
		}
	}
	lc := &lineChart{ID: id, Title: "Stale reads over time", X: freeAxis("time since the run started (s)"),
		Y: freeAxis("stale reads per second (in the second they began)"), XBands: phaseBands(r.Series)}
	lc.X.Min, lc.Y.Min = 0, 0
	last := 0.0
	for _, s := range r.Series {
		last = max(last, s.T)
	}
	perSec := map[string]map[float64]float64{}
	for _, row := range rows {
		if perSec[row.Node] == nil {
			perSec[row.Node] = map[float64]float64{}
		}
		perSec[row.Node][row.T]++
		last = max(last, row.T)
	}
	for i, n := range st.staleNodes() {
		l := line{Name: n, Colour: colour(i)}
		for t := 1.0; t <= last; t++ {
			l.Pts = append(l.Pts, point{t - 0.5, perSec[n][t]})
		}
		lc.Lines = append(lc.Lines, l)
	}
	lc.Note = fmt.Sprintf("%s stale reads listed in %s, each in the second its transaction began (the same seconds as the lag chart above).", group(float64(len(rows))), StaleReadsFile)
	addFaultMarks(lc, r, false)
	return chart{fig: lc.figure()}
}

// printClients is the terminal's block of [[client]] groups: each one's
// place, throughput, commit latency (overall and per type) and stale
// reads.
func printClients(w io.Writer, s *Summary) {
	if len(s.Clients) == 0 {
		return
	}
	fmt.Fprintf(w, "\n  %-10s  %-10s  %5s  %8s  %9s  %9s  %-30s  %s\n", "client", "site", "users", "tps", "p50 ms", "p99 ms", "per type p50 ms", "stale reads")
	for _, n := range sortedKeys(s.Clients) {
		c := s.Clients[n]
		var types []string
		for _, t := range sortedKeys(c.Types) {
			types = append(types, fmt.Sprintf("%s %s", t, ms(c.Types[t].P50)))
		}
		stale := "—"
		if sr := c.StaleReads; sr != nil && sr.Reads > 0 {
			stale = fmt.Sprintf("%s of %s reads (%s %%), RYW %.1f/10k", group(float64(sr.Stale)), group(float64(sr.Reads)), sharePct(sr.StaleShare), sr.RYWPer10k)
		}
		fmt.Fprintf(w, "  %-10s  %-10s  %5d  %8.1f  %9s  %9s  %-30s  %s\n", n, c.Site, c.Users, c.TPS, ms(c.CommitLatency.P50), ms(c.CommitLatency.P99), strings.Join(types, ", "), stale)
	}
}
