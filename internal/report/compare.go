package report

// replab compare: results directories side by side, each figure's ratio to
// the first (the baseline), and whether the difference is more than chance.

import (
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/HdrHistogram/hdrhistogram-go"

	"replab/internal/pagestats"
	"replab/internal/stats"
)

// Comparison is several results directories against the first.
type Comparison struct {
	Level  float64
	Runs   []*Results
	Labels []string // A, B, C…
	Rows   []CompareRow
}

// CompareRow is one figure across the directories.
type CompareRow struct {
	Metric string
	Values []Estimate    // one per directory
	Diffs  []*stats.Diff // vs the first; nil for it, and where not tested
	// Verdicts say, for each directory after the first, whether its
	// difference from the first is significant, or why it was not tested.
	Verdicts []string
}

// Estimate is one directory's value of a figure: a single run's, or the
// mean over repetitions with its confidence half-width.
type Estimate struct {
	OK        bool
	Value     float64
	HalfWidth float64
	N         int
	samples   []float64
	ci        *stats.CI // from summary.json's "ci" when the repetitions are not on disk
}

// compareMetric reads one figure from a summary.
type compareMetric struct {
	name  string
	ciKey string // key in summary.json's "ci"
	get   func(*Summary) (float64, bool)
}

// ciScale converts a figure of summary.json's "ci" to the unit compare
// shows it in: a share as a percentage.
func ciScale(key string) float64 {
	if key == "pages.slow.slow_share" {
		return 100
	}
	return 1
}

func compareMetrics(runs []*Results) []compareMetric {
	ms := []compareMetric{
		{"tpm", "tpm", func(s *Summary) (float64, bool) { return s.TPM, true }},
		{"commit p50 ms", "commit_latency_ms.p50", func(s *Summary) (float64, bool) {
			return s.CommitLatency.P50, s.CommitLatency.Count > 0 || s.CommitLatency.P50 > 0
		}},
		{"commit p99 ms", "commit_latency_ms.p99", func(s *Summary) (float64, bool) {
			return s.CommitLatency.P99, s.CommitLatency.Count > 0 || s.CommitLatency.P99 > 0
		}},
	}
	seen := map[string]bool{}
	var reps []string
	bytes := false
	for _, r := range runs {
		for _, n := range sortedKeys(r.Summary.Replicas) {
			if !seen[n] {
				seen[n] = true
				reps = append(reps, n)
			}
		}
		bytes = bytes || r.Summary.BytesPerTransaction > 0
		for _, rr := range r.Reps {
			bytes = bytes || (rr.Summary != nil && rr.Summary.BytesPerTransaction > 0)
		}
	}
	for _, n := range reps {
		for _, q := range []string{"p50", "p99"} {
			ms = append(ms, compareMetric{"lag " + n + " " + q + " ms", "replicas." + n + ".lag_ms." + q,
				func(s *Summary) (float64, bool) {
					r := s.Replicas[n]
					if r == nil {
						return 0, false
					}
					if q == "p50" {
						return r.LagMs.P50, true
					}
					return r.LagMs.P99, true
				}})
		}
	}
	if allPages(runs) {
		ms = append(ms,
			compareMetric{name: "pages/s", ciKey: "pages.pages_per_s", get: func(s *Summary) (float64, bool) {
				return pagesOf(s).PagesPerS, s.Pages != nil
			}},
			compareMetric{name: "slow pages %", ciKey: "pages.slow.slow_share", get: func(s *Summary) (float64, bool) {
				return 100 * pagesOf(s).Slow.SlowShare, s.Pages != nil
			}})
	}
	if bytes {
		ms = append(ms, compareMetric{"bytes / transaction", "bytes_per_transaction", func(s *Summary) (float64, bool) {
			return s.BytesPerTransaction, s.BytesPerTransaction > 0
		}})
	}
	return ms
}

// allPages says whether every directory is a page-read run (its pages
// figures are compared only then: other workloads have none).
func allPages(runs []*Results) bool {
	for _, r := range runs {
		if r.Summary.Pages == nil {
			return false
		}
	}
	return len(runs) > 0
}

// pagesOf is s's pages figures, zero when it has none.
func pagesOf(s *Summary) pagestats.Summary {
	if s.Pages == nil {
		return pagestats.Summary{}
	}
	return *s.Pages
}

// estimate reads a figure from a directory: from its repetitions when it
// has them (complete ones only), else from summary.json.
func estimate(r *Results, m compareMetric, level float64) Estimate {
	var xs []float64
	for _, rr := range r.Reps {
		if rr.Summary == nil || !rr.Summary.Complete {
			continue
		}
		if v, ok := m.get(rr.Summary); ok {
			xs = append(xs, v)
		}
	}
	if len(xs) > 0 {
		ci := stats.MeanCI(xs, level)
		return Estimate{OK: true, Value: ci.Mean, HalfWidth: ci.HalfWidth, N: ci.N, samples: xs}
	}
	if c, ok := r.Summary.CI[m.ciKey]; ok && c.N > 0 {
		k := ciScale(m.ciKey)
		c.Mean, c.HalfWidth, c.StdDev = c.Mean*k, c.HalfWidth*k, c.StdDev*k
		return Estimate{OK: true, Value: c.Mean, HalfWidth: c.HalfWidth, N: c.N, ci: &c}
	}
	v, ok := m.get(r.Summary)
	if !ok {
		return Estimate{}
	}
	return Estimate{OK: true, Value: v, N: 1}
}

// testDiff compares b against a when both sides have a spread.
func testDiff(a, b Estimate, level float64) (*stats.Diff, string) {
	if !a.OK || !b.OK {
		return nil, ""
	}
	if a.N < 2 || b.N < 2 {
		return nil, "n=1: not testable"
	}
	var d stats.Diff
	switch {
	case a.samples != nil && b.samples != nil:
		d = stats.CompareMeans(a.samples, b.samples, level)
	default:
		d = stats.CompareCIs(ciOf(a, level), ciOf(b, level), level)
	}
	if d.Significant {
		return &d, "significant (" + pValue(d.PValue) + ")"
	}
	return &d, "not significant (" + pValue(d.PValue) + ")"
}

func ciOf(e Estimate, level float64) stats.CI {
	if e.ci != nil {
		return *e.ci
	}
	return stats.MeanCI(e.samples, level)
}

func pValue(p float64) string {
	if p < 0.001 {
		return "p < 0.001"
	}
	return fmt.Sprintf("p = %.3f", p)
}

// Compare lines up the headline figures of runs (the first is the
// baseline) at a confidence level (outside (0, 1): 0.95).
func Compare(runs []*Results, level float64) (*Comparison, error) {
	if !(level > 0 && level < 1) {
		level = stats.DefaultLevel
	}
	for _, r := range runs {
		if r.IsSweep() {
			return nil, fmt.Errorf("compare: %s is a sweep; compare its points instead (e.g. %s %s)", r.Dir,
				path.Join(r.Dir, "p01"), path.Join(r.Dir, "p02"))
		}
		if r.Summary == nil {
			return nil, fmt.Errorf("compare: %s has no summary.json", r.Dir)
		}
	}
	c := &Comparison{Level: level, Runs: runs}
	for i := range runs {
		c.Labels = append(c.Labels, columnLabel(i))
	}
	for _, m := range compareMetrics(runs) {
		row := CompareRow{Metric: m.name}
		for _, r := range runs {
			row.Values = append(row.Values, estimate(r, m, level))
		}
		row.Diffs = make([]*stats.Diff, len(runs))
		row.Verdicts = make([]string, len(runs))
		for i := 1; i < len(runs); i++ {
			row.Diffs[i], row.Verdicts[i] = testDiff(row.Values[0], row.Values[i], level)
		}
		c.Rows = append(c.Rows, row)
	}
	return c, nil
}

// columnLabel is A, B, … Z, AA, AB…
func columnLabel(i int) string {
	s := ""
	for i++; i > 0; i = (i - 1) / 26 {
		s = string(rune('A'+(i-1)%26)) + s
	}
	return s
}

// text prints an estimate: "57,524" or "57,524 ± 1,210".
func (e Estimate) text(metric string) string {
	if !e.OK {
		return "—"
	}
	f := ms
	if metric == "tpm" || strings.HasPrefix(metric, "bytes") {
		f = group
	}
	s := f(e.Value)
	if e.N >= 2 {
		s += " ± " + f(e.HalfWidth)
	}
	return s
}

func ratioText(a, b Estimate) string {
	if !a.OK || !b.OK || a.Value == 0 {
		return "—"
	}
	return fmt.Sprintf("×%.2f", b.Value/a.Value)
}

// describe is one line about a directory for the comparison's header.
func (c *Comparison) describe(i int) string {
	r := c.Runs[i]
	s := r.Summary
	n := "n=1"
	if e := c.Rows[0].Values[i]; e.N >= 2 {
		n = fmt.Sprintf("n=%d", e.N)
	}
	state := ""
	if !s.Complete {
		state = ", INCOMPLETE"
	}
	return fmt.Sprintf("%s (%s, %s, %s, %s%s)", s.Name, s.Engine, s.Scheme, s.Workload, n, state)
}

// PrintCompare writes the comparison as a terminal table.
func PrintCompare(w io.Writer, c *Comparison) {
	for i, r := range c.Runs {
		fmt.Fprintf(w, "%s  %s  %s\n", c.Labels[i], r.Dir, c.describe(i))
	}
	fmt.Fprintln(w)
	head := []string{"", c.Labels[0]}
	right := []bool{false, true}
	for i := 1; i < len(c.Runs); i++ {
		l := c.Labels[i]
		head = append(head, l, l+"/"+c.Labels[0], l+" vs "+c.Labels[0])
		right = append(right, true, true, false)
	}
	rows := [][]string{head}
	for _, row := range c.Rows {
		cells := []string{row.Metric, row.Values[0].text(row.Metric)}
		for i := 1; i < len(c.Runs); i++ {
			cells = append(cells, row.Values[i].text(row.Metric), ratioText(row.Values[0], row.Values[i]), row.Verdicts[i])
		}
		rows = append(rows, cells)
	}
	printColumns(w, rows, right)
	fmt.Fprintf(w, "\n± is the confidence half-width at %.0f %% over repetitions. Significance: Welch's t-test of the\n"+
		"repetitions against %s's at the same level; a side measured once (n=1) has no spread to test against.\n",
		100*c.Level, c.Labels[0])
}

// printColumns writes rows as aligned columns, two spaces apart; right
// marks right-aligned columns.
func printColumns(w io.Writer, rows [][]string, right []bool) {
	width := make([]int, len(right))
	for _, r := range rows {
		for j, s := range r {
			width[j] = max(width[j], len([]rune(s)))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for j, s := range r {
			pad := strings.Repeat(" ", width[j]-len([]rune(s)))
			if j > 0 {
				b.WriteString("  ")
			}
			if right[j] {
				b.WriteString(pad + s)
			} else {
				b.WriteString(s + pad)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// WriteCompareHTML writes the comparison as a self-contained page: the
// table, then throughput, commit latency and lag of every directory
// overlaid.
func WriteCompareHTML(w io.Writer, c *Comparison) error {
	p := &page{Kind: "comparison", Title: "replab comparison", Source: strings.Join(dirsOf(c.Runs), ", ")}
	var names []string
	for i, r := range c.Runs {
		names = append(names, c.Labels[i]+": "+r.Name())
	}
	p.Heading = "Comparison of " + strings.Join(names, " · ")

	runs := htmlTable{Caption: "Results directories", Head: []tcell{txt(""), txt("directory"), txt("run"), txt("engine"), txt("scheme"),
		txt("workload"), numHead("n"), txt("state")}}
	for i, r := range c.Runs {
		s := r.Summary
		st := tcell{Text: "complete", Class: "ok"}
		if !s.Complete {
			st = tcell{Text: "incomplete", Class: "bad", Title: s.StopReason}
		}
		runs.Rows = append(runs.Rows, []tcell{txt(c.Labels[i]), txt(r.Dir), txt(s.Name), txt(s.Engine), txt(s.Scheme), txt(s.Workload),
			num(fmt.Sprint(max(c.Rows[0].Values[i].N, 1))), st})
	}
	t := htmlTable{Head: []tcell{txt("figure"), numHead(c.Labels[0])},
		Note: fmt.Sprintf("± is the confidence half-width at %.0f %%. Significance: Welch's t-test of the repetitions against %s's; a side measured once (n=1) has no spread to test against.", 100*c.Level, c.Labels[0])}
	for i := 1; i < len(c.Runs); i++ {
		l := c.Labels[i]
		t.Head = append(t.Head, numHead(l), numHead(l+"/"+c.Labels[0]), txt(l+" vs "+c.Labels[0]))
	}
	for _, row := range c.Rows {
		cells := []tcell{txt(row.Metric), num(row.Values[0].text(row.Metric))}
		for i := 1; i < len(c.Runs); i++ {
			v := txt(row.Verdicts[i])
			if d := row.Diffs[i]; d != nil {
				v.Title = d.Method
				if d.Significant {
					v.Class = "ok"
				}
			} else {
				v.Class = "muted"
			}
			cells = append(cells, num(row.Values[i].text(row.Metric)), num(ratioText(row.Values[0], row.Values[i])), v)
		}
		t.Rows = append(t.Rows, cells)
	}
	p.Sections = append(p.Sections, section{ID: "comparison", Title: "Side by side", Tables: []htmlTable{runs, t}})

	charts := section{ID: "charts", Title: "Overlaid"}
	var series []*Results
	var snames []string
	for i, r := range c.Runs {
		src, note := r, ""
		if len(r.Series) == 0 && len(r.Reps) > 0 {
			src, note = r.Reps[0], " ("+path.Base(r.Reps[0].Dir)+")"
		}
		series = append(series, src)
		snames = append(snames, names[i]+note)
	}
	addFigure(&charts, &p.Missing, throughputChart("cmp-throughput", series, snames))
	addFigure(&charts, &p.Missing, compareCDF("cmp-latency", "Commit latency distribution", "commit latency (ms, log scale)",
		c, names, func(hs map[string]*hdrhistogram.Histogram) map[string]*hdrhistogram.Histogram {
			if h := hs["commit_latency"]; h != nil {
				return map[string]*hdrhistogram.Histogram{"": h}
			}
			return nil
		}))
	addFigure(&charts, &p.Missing, compareCDF("cmp-lag", "Replication lag distribution", "commit → visible at the replica (ms, log scale)",
		c, names, func(hs map[string]*hdrhistogram.Histogram) map[string]*hdrhistogram.Histogram {
			out := map[string]*hdrhistogram.Histogram{}
			for tag, h := range hs {
				if rep, ok := strings.CutPrefix(tag, "lag_"); ok {
					out[rep] = h
				}
			}
			return out
		}))
	p.Sections = append(p.Sections, charts)
	return render(w, p)
}

func dirsOf(rs []*Results) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Dir)
	}
	return out
}

// compareCDF overlays distributions: a colour per directory, a dash per
// sub-series (replica).
func compareCDF(id, title, xlabel string, c *Comparison, names []string,
	pick func(map[string]*hdrhistogram.Histogram) map[string]*hdrhistogram.Histogram) chart {
	lc := &lineChart{ID: id, Title: title, X: freeAxis(xlabel), Y: freeAxis("share at or below (%)")}
	lc.X.Log = true
	lc.Y.Min, lc.Y.Max = 0, 100
	for i, r := range c.Runs {
		hs := r.Hists
		if len(r.Reps) > 0 {
			hs = mergedHists(r.Reps)
		}
		sub := pick(hs)
		for j, k := range sortedKeys(sub) {
			l := cdfLine(names[i], sub[k])
			if k != "" {
				l.Name += " · " + k
			}
			l.Colour, l.Dash = colour(i), dashes[j%len(dashes)]
			lc.Lines = append(lc.Lines, l)
		}
	}
	if len(lc.Lines) == 0 {
		return chart{missing: strings.ToLower(title[:1]) + title[1:] + ": no latency.hlog"}
	}
	lc.Note = "Repeated runs: all repetitions merged."
	return chart{fig: lc.figure()}
}
