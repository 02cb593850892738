package report

// The report page of a sweep: the table of every combination and charts
// of the headline figures against the swept parameter.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sweepRow is one point of a sweep with its headline figures.
type sweepRow struct {
	label  string
	values []string // one per parameter, as printed
	nums   []float64
	dir    string
	ok     bool // has figures
	h      headline
	report bool // has its own report.html
}

// valueText prints a swept value: 3, 0.5, "sync".
func valueText(v any) string {
	switch x := v.(type) {
	case nil:
		return "—"
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

func valueNum(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			return f
		}
		if d, err := time.ParseDuration(strings.TrimSpace(x)); err == nil {
			return float64(d) / 1e6 // a duration: in ms
		}
	}
	return nan
}

func sweepRows(r *Results) []sweepRow {
	var rows []sweepRow
	for i, pt := range r.Sweep.Points {
		row := sweepRow{label: pt.Label, dir: pt.Dir}
		for _, k := range r.Sweep.Parameters {
			row.values = append(row.values, valueText(pt.Values[k]))
			row.nums = append(row.nums, valueNum(pt.Values[k]))
		}
		var pr *Results
		if i < len(r.Points) {
			pr = r.Points[i]
		}
		switch {
		case pr != nil && pr.Summary != nil:
			row.ok, row.h, row.report = true, headlineOf(pr.Summary), true
		case pt.Summary != nil:
			row.ok, row.h = true, headlineOfFigs(pt.Summary)
		}
		rows = append(rows, row)
	}
	return rows
}

// sweepAxis picks the parameter for the x axis: the first numeric one,
// else the first; the others make one line each.
func sweepAxis(params []string, rows []sweepRow) int {
	for j := range params {
		numeric := len(rows) > 0
		for _, row := range rows {
			numeric = numeric && !math.IsNaN(row.nums[j])
		}
		if numeric {
			return j
		}
	}
	return 0
}

func sweepPage(r *Results) *page {
	sw := r.Sweep
	rows := sweepRows(r)
	p := &page{Kind: "sweep", Heading: r.Name() + " — sweep", Title: "replab sweep: " + r.Name(), Source: r.Dir, Problems: r.Problems}
	p.State, p.StateOK = stateOf(sw.Complete, "")
	if !sw.Complete {
		p.State = fmt.Sprintf("incomplete: %d of the points measured", countOK(rows))
	}
	p.Facts = append(p.Facts, "over "+strings.Join(sw.Parameters, " × "), fmt.Sprintf("%d points", len(sw.Points)))
	for _, pr := range r.Points {
		if pr != nil && pr.Summary != nil {
			s := pr.Summary
			p.Facts = append(p.Facts, s.Engine)
			if !swept(sw.Parameters, "scheme.") {
				p.Facts = append(p.Facts, s.Scheme+" replication")
			}
			if !swept(sw.Parameters, "workload.kind") {
				p.Facts = append(p.Facts, "workload "+s.Workload)
			}
			p.Env = envLine(pr.Env)
			break
		}
	}

	var hs []headline
	for _, row := range rows {
		if row.ok {
			hs = append(hs, row.h)
		}
	}
	reps := replicaNames(hs)
	bytes := anyBytes(hs)
	t := htmlTable{Head: nil}
	for _, k := range sw.Parameters {
		t.Head = append(t.Head, txt(k))
	}
	t.Head = append(t.Head, numHead("tpm"), numHead("commit p50 ms"), numHead("commit p99 ms"))
	for _, n := range reps {
		t.Head = append(t.Head, numHead("lag "+n+" p50 ms"), numHead("lag "+n+" p99 ms"))
	}
	if bytes {
		t.Head = append(t.Head, numHead("B / transaction"))
	}
	t.Head = append(t.Head, numHead("not visible"), numHead("errors"), txt("state"), txt("report"))
	for _, row := range rows {
		var cells []tcell
		for _, v := range row.values {
			cells = append(cells, txt(v))
		}
		if !row.ok {
			for range len(t.Head) - len(cells) - 2 {
				cells = append(cells, num("—"))
			}
			cells = append(cells, tcell{Text: "not measured", Class: "bad"}, txt(""))
			t.Rows = append(t.Rows, cells)
			continue
		}
		h := row.h
		tpm := group(h.TPM)
		if h.TPMCI != nil && h.TPMCI.N >= 2 {
			tpm += " ± " + group(h.TPMCI.HalfWidth)
		}
		cells = append(cells, num(tpm), num(ms(h.P50)), num(ms(h.P99)))
		for _, n := range reps {
			cells = append(cells, num(msOr(h.LagP50, n)), num(msOr(h.LagP99, n)))
		}
		if bytes {
			cells = append(cells, num(group(h.BytesPerTxn)))
		}
		nv := num(group(float64(h.NotVisible)))
		if h.NotVisible > 0 {
			nv.Class = "n bad"
		}
		st := tcell{Text: "complete", Class: "ok"}
		if !h.Complete {
			st = tcell{Text: "incomplete", Class: "bad", Title: h.StopReason}
		}
		link := txt("")
		if row.report {
			link = tcell{Text: row.dir, Href: row.dir + "/" + ReportFile}
		}
		cells = append(cells, nv, num(group(float64(h.Errors))), st, link)
		t.Rows = append(t.Rows, cells)
	}
	table := section{ID: "sweep", Title: "Sweep", Tables: []htmlTable{t},
		Intro: "One row per combination of the swept values; figures are over each point's measure phase (means ± confidence half-width when the point was repeated)."}
	p.Sections = append(p.Sections, table)

	charts := section{ID: "sweep-charts", Title: "Headline figures against " + sw.Parameters[sweepAxis(sw.Parameters, rows)]}
	charts.Figures = append(charts.Figures, sweepCharts(sw.Parameters, rows, reps, bytes)...)
	if len(charts.Figures) > 0 {
		p.Sections = append(p.Sections, charts)
	}
	return p
}

// swept reports whether a parameter starts with prefix.
func swept(params []string, prefix string) bool {
	for _, p := range params {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

func countOK(rows []sweepRow) int {
	n := 0
	for _, r := range rows {
		if r.ok {
			n++
		}
	}
	return n
}

// sweepCharts draws tpm, commit latency, lag and bytes per transaction
// against the x parameter, one line per combination of the others.
func sweepCharts(params []string, rows []sweepRow, reps []string, bytes bool) []figure {
	if len(params) == 0 || countOK(rows) == 0 {
		return nil
	}
	xi := sweepAxis(params, rows)
	xa := freeAxis(params[xi])
	for _, row := range rows {
		if _, err := time.ParseDuration(row.values[xi]); err == nil {
			xa.Label += " (ms)"
			break
		}
	}
	numeric := true
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, row := range rows {
		v := row.nums[xi]
		numeric = numeric && !math.IsNaN(v)
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	xpos := map[string]float64{}
	if !numeric {
		for _, row := range rows {
			if _, ok := xpos[row.values[xi]]; !ok {
				xpos[row.values[xi]] = float64(len(xa.Categories))
				xa.Categories = append(xa.Categories, row.values[xi])
			}
		}
	} else {
		if lo > 0 && hi/lo >= 20 {
			xa.Log = true
			xa.Label += " (log scale)"
		}
		for _, row := range rows { // tick the swept values themselves
			if v := row.nums[xi]; !slices.Contains(xa.Ticks, v) {
				xa.Ticks = append(xa.Ticks, v)
			}
		}
	}
	x := func(row sweepRow) float64 {
		if numeric {
			return row.nums[xi]
		}
		return xpos[row.values[xi]]
	}
	// groups: the other parameters' values
	var groups []string
	groupOf := func(row sweepRow) string {
		var parts []string
		for j, k := range params {
			if j != xi {
				parts = append(parts, k+"="+row.values[j])
			}
		}
		return strings.Join(parts, ", ")
	}
	for _, row := range rows {
		g := groupOf(row)
		if !containsStr(groups, g) {
			groups = append(groups, g)
		}
	}
	oneD := len(params) == 1
	type metric struct {
		name string
		y    func(h headline) (float64, float64) // value, ± half-width
	}
	chart := func(id, title, ylabel string, ms []metric) figure {
		c := &lineChart{ID: id, Title: title, X: xa, Y: freeAxis(ylabel)}
		for gi, g := range groups {
			for mi, m := range ms {
				name := m.name
				if !oneD {
					name = g
					if len(ms) > 1 {
						name += " " + m.name
					}
				}
				l := line{Name: name, Markers: true, Colour: colour(gi), Dash: dashes[mi%len(dashes)]}
				if oneD {
					l.Colour = colour(mi)
				}
				for _, row := range rows {
					if !row.ok || groupOf(row) != g {
						continue
					}
					v, e := m.y(row.h)
					l.Pts = append(l.Pts, point{x(row), v})
					l.Err = append(l.Err, e)
				}
				c.Lines = append(c.Lines, l)
			}
		}
		return c.figure()
	}
	tpm := metric{"tpm", func(h headline) (float64, float64) {
		if h.TPMCI != nil && h.TPMCI.N >= 2 {
			return h.TPM, h.TPMCI.HalfWidth
		}
		return h.TPM, 0
	}}
	figs := []figure{chart("sweep-tpm", "Throughput", "transactions per minute", []metric{tpm})}
	for _, row := range rows {
		if row.ok && row.h.TPMCI != nil && row.h.TPMCI.N >= 2 {
			figs[0].Note = "Error bars: the confidence half-width over the point's repetitions."
			break
		}
	}
	p50 := metric{"p50", func(h headline) (float64, float64) { return h.P50, 0 }}
	p99 := metric{"p99", func(h headline) (float64, float64) { return h.P99, 0 }}
	if oneD {
		figs = append(figs, chart("sweep-latency", "Commit latency", "commit latency (ms)", []metric{p50, p99}))
	} else {
		figs = append(figs, chart("sweep-latency", "Commit latency p99", "commit latency p99 (ms)", []metric{p99}))
	}
	if len(reps) > 0 {
		if oneD {
			var ms []metric
			for _, n := range reps {
				ms = append(ms, metric{n + " p99", func(h headline) (float64, float64) {
					if v, ok := h.LagP99[n]; ok {
						return v, 0
					}
					return nan, 0
				}})
			}
			figs = append(figs, chart("sweep-lag", "Replication lag p99 by replica", "commit → visible (ms)", ms))
		} else {
			worst := metric{"worst replica p99", func(h headline) (float64, float64) {
				w := nan
				for _, v := range h.LagP99 {
					if math.IsNaN(w) || v > w {
						w = v
					}
				}
				return w, 0
			}}
			figs = append(figs, chart("sweep-lag", "Replication lag p99, worst replica", "commit → visible (ms)", []metric{worst}))
		}
	}
	if bytes {
		b := metric{"bytes per transaction", func(h headline) (float64, float64) { return h.BytesPerTxn, 0 }}
		figs = append(figs, chart("sweep-bytes", "Bytes on the wire per transaction", "bytes per transaction", []metric{b}))
	}
	// Stale reads at each replica, measured and predicted (issue 32).
	var staleReps []string
	checked := false
	for _, row := range rows {
		if !row.ok || row.h.Figs == nil {
			continue
		}
		for n := range row.h.Figs.StaleShare {
			if !slices.Contains(staleReps, n) {
				staleReps = append(staleReps, n)
			}
		}
		f := row.h.Figs
		multi := f.ReplicationConflicts != nil || (f.DivergedRows != nil && *f.DivergedRows > 0) || f.Anomalies["lost-update"] > 0
		checked = checked || (f.Checked != nil && multi)
	}
	slices.Sort(staleReps)
	for _, n := range staleReps {
		get := func(m func(f *HeadlineFigs) map[string]float64) func(h headline) (float64, float64) {
			return func(h headline) (float64, float64) {
				if h.Figs == nil {
					return nan, 0
				}
				if v, ok := m(h.Figs)[n]; ok {
					return 100 * v, 0
				}
				return nan, 0
			}
		}
		measured := metric{"measured", get(func(f *HeadlineFigs) map[string]float64 { return f.StaleShare })}
		predicted := metric{"predicted", get(func(f *HeadlineFigs) map[string]float64 { return f.PredictedShare })}
		f := chart("sweep-stale-"+n, "Stale reads at "+n+": measured (solid) and predicted from the lag (dashed)", "reads that missed an acknowledged write (%)", []metric{measured, predicted})
		figs = append(figs, f)
	}
	// The multi-master frontier: per combination of the other parameters
	// (a scheme), anomalies, lost updates, conflicts the replication
	// counted and rows left diverged, per 10,000 transactions.
	if checked {
		per := func(name string, v func(f *HeadlineFigs) (float64, bool), checkedBase bool) metric {
			return metric{name, func(h headline) (float64, float64) {
				f := h.Figs
				if f == nil {
					return nan, 0
				}
				x, ok := v(f)
				base := float64(f.Transactions)
				if checkedBase && f.Checked != nil {
					base = float64(*f.Checked)
				}
				if !ok || base == 0 {
					return nan, 0
				}
				return x * 1e4 / base, 0
			}}
		}
		ms := []metric{
			per("anomalies", func(f *HeadlineFigs) (float64, bool) { return float64(sumAnomalies(f.Anomalies)), f.Checked != nil }, true),
			per("lost updates", func(f *HeadlineFigs) (float64, bool) { return float64(f.Anomalies["lost-update"]), f.Checked != nil }, true),
			per("conflicts counted", func(f *HeadlineFigs) (float64, bool) {
				if f.ReplicationConflicts == nil {
					return 0, false
				}
				return float64(*f.ReplicationConflicts), true
			}, false),
			per("rows diverged", func(f *HeadlineFigs) (float64, bool) {
				if f.DivergedRows == nil {
					return 0, false
				}
				return float64(*f.DivergedRows), true
			}, false),
		}
		for gi, g := range groups {
			c := &lineChart{ID: fmt.Sprintf("sweep-frontier-%d", gi+1), Title: "Per 10,000 transactions: " + orAll(g), X: xa, Y: freeAxis("per 10,000 transactions")}
			for mi, m := range ms {
				l := line{Name: m.name, Markers: true, Colour: colour(mi)}
				for _, row := range rows {
					if !row.ok || groupOf(row) != g {
						continue
					}
					v, _ := m.y(row.h)
					l.Pts = append(l.Pts, point{x(row), v})
				}
				c.Lines = append(c.Lines, l)
			}
			fig := c.figure()
			fig.Note = "Anomalies and lost updates per 10,000 transactions checked; conflicts the replication counted and rows diverged after quiescence per 10,000 committed in the measure phase."
			figs = append(figs, fig)
		}
	}
	return figs
}

func orAll(g string) string {
	if g == "" {
		return "every point"
	}
	return g
}
