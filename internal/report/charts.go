package report

// The report's charts, each built from one results directory (or several,
// overlaid). A builder returns ok=false and a reason when its data is not
// in the directory, so the page can say what it left out.

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/HdrHistogram/hdrhistogram-go"
)

var nan = math.NaN()

// freeAxis is an axis whose range comes from the data.
func freeAxis(label string) axis { return axis{Label: label, Min: nan, Max: nan} }

// phaseBands shades the warmup and cooldown seconds of series.csv (row T
// covers the second that ends at T).
func phaseBands(rows []SeriesRow) []band {
	var bs []band
	for i := 0; i < len(rows); {
		j := i
		for j+1 < len(rows) && rows[j+1].Phase == rows[i].Phase {
			j++
		}
		if p := rows[i].Phase; p != "" && p != "measure" {
			bs = append(bs, band{From: rows[i].T - 1, To: rows[j].T, Label: p})
		}
		i = j + 1
	}
	return bs
}

// measureMean is the mean commits per second over the measure phase.
func measureMean(rows []SeriesRow) (float64, bool) {
	sum, n := 0.0, 0
	for _, s := range rows {
		if s.Phase == "measure" && !math.IsNaN(s.Commits) {
			sum += s.Commits
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// throughputChart: commits per second over time, phases shaded. With
// several runs (repetitions, a comparison) one line each, named by names.
func throughputChart(id string, runs []*Results, names []string) chart {
	c := &lineChart{ID: id, Title: "Throughput over time",
		X: freeAxis("time since the run started (s)"), Y: freeAxis("committed transactions per second")}
	c.X.Min = 0
	var errLine line
	samePhases := true
	for i, r := range runs {
		if len(r.Series) == 0 {
			continue
		}
		l := line{Name: names[i]}
		el := line{Name: "errors per second", Colour: "#D55E00", Dash: "2 2", Width: 1.5}
		anyErr := false
		for _, s := range r.Series {
			l.Pts = append(l.Pts, point{s.T - 0.5, s.Commits})
			el.Pts = append(el.Pts, point{s.T - 0.5, s.Errors})
			anyErr = anyErr || s.Errors > 0
		}
		if len(runs) > 6 {
			l.Colour, l.Width, l.Faint = colour(0), 1.2, true
			l.NoKey = i > 0
			if i == 0 {
				l.Name = "one line per repetition"
			}
		}
		c.Lines = append(c.Lines, l)
		if len(runs) == 1 && anyErr {
			errLine = el
		}
		if bs := phaseBands(r.Series); c.XBands == nil {
			c.XBands = bs
		} else if !slices.Equal(bs, c.XBands) {
			samePhases = false
		}
	}
	if !samePhases {
		c.XBands = nil
	}
	if len(c.Lines) == 0 {
		return chart{missing: "throughput over time: no series.csv"}
	}
	if len(runs) == 1 {
		c.Lines[0].Name = "per second"
		if m, ok := measureMean(runs[0].Series); ok {
			c.Lines = append(c.Lines, line{Name: "measure-phase mean (" + fmtNum(m) + "/s)", Colour: "#5a6376", Dash: "5 4", Width: 1.2,
				Pts: measureSpan(runs[0].Series, m)})
		}
		if errLine.Pts != nil {
			c.Lines = append(c.Lines, errLine)
		}
	}
	c.Note = "Shaded: warmup and cooldown, outside the measurement."
	if !samePhases {
		c.Note = "The runs' phases differ, so none is shaded."
	}
	if len(runs) == 1 {
		addFaultMarks(c, runs[0], false)
	}
	return chart{fig: c.figure()}
}

func measureSpan(rows []SeriesRow, y float64) []point {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range rows {
		if s.Phase == "measure" {
			lo, hi = math.Min(lo, s.T-1), math.Max(hi, s.T)
		}
	}
	return []point{{lo, y}, {hi, y}}
}

// latencyTimeChart: per-second commit latency p50 and p99.
func latencyTimeChart(id string, r *Results) chart {
	if len(r.Series) == 0 {
		return chart{missing: "latency over time: no series.csv"}
	}
	c := &lineChart{ID: id, Title: "Commit latency over time",
		X: freeAxis("time since the run started (s)"), Y: freeAxis("commit latency (ms)"), XBands: phaseBands(r.Series)}
	c.X.Min = 0
	p50 := line{Name: "p50", Colour: colour(0)}
	p99 := line{Name: "p99", Colour: colour(1), Dash: "6 3"}
	for _, s := range r.Series {
		y50, y99 := s.P50Ms, s.P99Ms
		if s.Commits == 0 {
			y50, y99 = nan, nan
		}
		p50.Pts = append(p50.Pts, point{s.T - 0.5, y50})
		p99.Pts = append(p99.Pts, point{s.T - 0.5, y99})
	}
	c.Lines = []line{p50, p99}
	c.Note = "Percentiles of the transactions committed in each second (all types)."
	addFaultMarks(c, r, false)
	return chart{fig: c.figure()}
}

// cdfQuantiles are the percentiles a CDF is drawn through: dense in the
// tail, where latency distributions are interesting.
var cdfQuantiles = func() []float64 {
	var q []float64
	for p := 0.0; p < 90; p += 1 {
		q = append(q, p)
	}
	for p := 90.0; p < 99; p += 0.25 {
		q = append(q, p)
	}
	for p := 99.0; p < 99.9; p += 0.05 {
		q = append(q, p)
	}
	return append(q, 99.9, 99.95, 99.99, 99.999, 100)
}()

// cdfLine is a histogram of µs as a CDF in ms.
func cdfLine(name string, h *hdrhistogram.Histogram) line {
	l := line{Name: name}
	vals := h.ValueAtPercentiles(cdfQuantiles)
	for _, q := range cdfQuantiles {
		v := float64(vals[q]) / 1e3
		if q == 0 {
			v = float64(h.Min()) / 1e3
		}
		if q == 100 {
			v = float64(h.Max()) / 1e3
		}
		l.Pts = append(l.Pts, point{v, q})
	}
	return l
}

// mergedHists merges each tag's histograms over runs.
func mergedHists(runs []*Results) map[string]*hdrhistogram.Histogram {
	out := map[string]*hdrhistogram.Histogram{}
	for _, r := range runs {
		for tag, h := range r.Hists {
			if h == nil || h.TotalCount() == 0 {
				continue
			}
			if m, ok := out[tag]; ok {
				m.Merge(h)
				continue
			}
			out[tag] = hdrhistogram.Import(h.Export())
		}
	}
	return out
}

func cdfChart(id, title, xlabel string, hs map[string]*hdrhistogram.Histogram, prefix string, names func(string) string) (*lineChart, bool) {
	c := &lineChart{ID: id, Title: title, X: freeAxis(xlabel), Y: freeAxis("share of transactions at or below (%)")}
	c.X.Log = true
	c.Y.Min, c.Y.Max = 0, 100
	c.Y.Format = func(v float64) string { return fmtNum(v) }
	for _, tag := range sortedKeys(hs) {
		if !strings.HasPrefix(tag, prefix) {
			continue
		}
		c.Lines = append(c.Lines, cdfLine(names(strings.TrimPrefix(tag, prefix)), hs[tag]))
	}
	return c, len(c.Lines) > 0
}

// latencyCDFChart: commit latency distribution per transaction type.
func latencyCDFChart(id string, hs map[string]*hdrhistogram.Histogram) chart {
	c, ok := cdfChart(id, "Commit latency distribution by transaction type", "commit latency (ms, log scale)", hs, "type_",
		func(s string) string { return s })
	if !ok {
		if h := hs["commit_latency"]; h != nil {
			c.Lines = []line{cdfLine("all transactions", h)}
			ok = true
		}
	} else if h := hs["commit_latency"]; h != nil && len(c.Lines) > 1 {
		all := cdfLine("all types", h)
		all.Colour, all.Dash, all.Width = "#5a6376", "2 2", 1.5
		c.Lines = append(c.Lines, all)
	}
	if !ok {
		return chart{missing: "latency distribution: no latency.hlog"}
	}
	c.Note = "Cumulative distribution over the measure phase, from latency.hlog."
	return chart{fig: c.figure()}
}

// lagTimeChart: per-second lag p50 (solid) and p99 (dashed) per replica.
// Row T of lag.csv covers the second that starts at T.
func lagTimeChart(id string, r *Results) chart {
	if len(r.Lag) == 0 {
		return chart{missing: "replication lag over time: no lag.csv"}
	}
	c := &lineChart{ID: id, Title: "Replication lag over time",
		X: freeAxis("time since the run started (s)"), Y: freeAxis("commit → visible at the replica (ms)"), XBands: phaseBands(r.Series)}
	c.X.Min = 0
	byRep := map[string][]LagRow{}
	for _, l := range r.Lag {
		byRep[l.Replica] = append(byRep[l.Replica], l)
	}
	for i, name := range sortedKeys(byRep) {
		p50 := line{Name: name + " p50", Colour: colour(i)}
		p99 := line{Name: name + " p99", Colour: colour(i), Dash: "6 3", Width: 1.5}
		for _, l := range byRep[name] {
			y50, y99 := l.P50Ms, l.P99Ms
			if !(l.Observed > 0) {
				y50, y99 = nan, nan
			}
			p50.Pts = append(p50.Pts, point{l.T + 0.5, y50})
			p99.Pts = append(p99.Pts, point{l.T + 0.5, y99})
		}
		c.Lines = append(c.Lines, p50, p99)
	}
	c.Note = "Per second, over the transactions that became visible in it; solid p50, dashed p99."
	addFaultMarks(c, r, false)
	return chart{fig: c.figure()}
}

// lagCDFChart: lag distribution per replica.
func lagCDFChart(id string, hs map[string]*hdrhistogram.Histogram, sites map[string]string) chart {
	c, ok := cdfChart(id, "Replication lag distribution by replica", "commit → visible at the replica (ms, log scale)", hs, "lag_",
		func(s string) string {
			if site := sites[s]; site != "" {
				return s + " (" + site + ")"
			}
			return s
		})
	if !ok {
		return chart{missing: "replication lag distribution: no lag_* histograms in latency.hlog"}
	}
	c.Note = "Cumulative distribution over the measure phase, from latency.hlog."
	return chart{fig: c.figure()}
}

// linkUtilChart: per-second utilisation of each link direction,
// Δdelivered bytes · 8 / Δt / rate.
func linkUtilChart(id string, r *Results) chart {
	if len(r.Links) == 0 {
		return chart{missing: "link utilization: no links.csv"}
	}
	byDir := map[string][]LinkRow{}
	var order []string
	for _, l := range r.Links {
		if _, ok := byDir[l.Direction]; !ok {
			order = append(order, l.Direction)
		}
		byDir[l.Direction] = append(byDir[l.Direction], l)
	}
	c := &lineChart{ID: id, Title: "Link utilization over time",
		X: freeAxis("time since the lab came up (s)"), Y: freeAxis("delivered bits / configured rate (%)")}
	c.X.Min = 0
	unlimited := 0
	for _, d := range order {
		rows := byDir[d]
		l := line{Name: d}
		for i := 1; i < len(rows); i++ {
			a, b := rows[i-1], rows[i]
			dt := b.T - a.T
			if !(dt > 0) || !(b.RateBps > 0) {
				continue
			}
			l.Pts = append(l.Pts, point{b.T, (b.DeliveredBytes - a.DeliveredBytes) * 8 / dt / b.RateBps * 100})
		}
		if len(l.Pts) == 0 {
			unlimited++
			continue
		}
		l.Colour, l.Dash = colour(len(c.Lines)), dash(len(c.Lines))
		c.Lines = append(c.Lines, l)
	}
	if len(c.Lines) == 0 {
		return chart{missing: "link utilization: every link is unlimited (no rate to compare with)"}
	}
	c.Note = "Per direction, per second. The link series starts when the lab comes up, before the engine's setup and the run."
	if unlimited > 0 {
		c.Note += " Unlimited directions are left out."
	}
	if !r.IsRepetitions() { // the lab's links carry every repetition in turn
		addFaultMarks(c, r, true)
	}
	return chart{fig: c.figure()}
}

// roleTimes is CPU user, system and I/O wait seconds per node and role.
type roleTimes struct {
	label              string
	user, sys, cpu, io float64
}

// roleBreakdown reads per-role times from summary.json, else from
// roles.csv (over the measure phase when series.csv tells where it is).
func roleBreakdown(r *Results) ([]roleTimes, string) {
	var out []roleTimes
	if s := r.Summary; s != nil && len(s.Roles) > 0 {
		for _, node := range sortedKeys(s.Roles) {
			for _, role := range sortedKeys(s.Roles[node]) {
				f := s.Roles[node][role]
				out = append(out, roleTimes{label: node + " · " + role, user: f.CPUUserS, sys: f.CPUSysS, cpu: f.CPUS, io: f.IOWaitS})
			}
		}
		return out, "measure phase, from summary.json"
	}
	if len(r.Roles) == 0 {
		return nil, ""
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	src := "whole run, from roles.csv"
	if span := measureSpan(r.Series, 0); len(r.Series) > 0 && !math.IsInf(span[0].X, 0) {
		lo, hi = span[0].X, span[1].X
		src = "measure phase, from roles.csv"
	}
	type key struct{ node, role string }
	first, last := map[key]RoleRow{}, map[key]RoleRow{}
	var keys []key
	for _, row := range r.Roles {
		if row.T < lo || row.T > hi {
			continue
		}
		k := key{row.Node, row.Role}
		if _, ok := first[k]; !ok {
			first[k] = row
			keys = append(keys, k)
		}
		last[k] = row
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].node != keys[j].node {
			return keys[i].node < keys[j].node
		}
		return keys[i].role < keys[j].role
	})
	d := func(a, b float64) float64 {
		if math.IsNaN(a) || math.IsNaN(b) {
			return 0
		}
		return math.Max(b-a, 0)
	}
	for _, k := range keys {
		a, b := first[k], last[k]
		u, s := d(a.CPUUserS, b.CPUUserS), d(a.CPUSysS, b.CPUSysS)
		out = append(out, roleTimes{label: k.node + " · " + k.role, user: u, sys: s, cpu: u + s, io: d(a.IOWait, b.IOWait)})
	}
	return out, src
}

// rolesChart: CPU user, CPU system and I/O wait seconds, stacked, per node
// and role.
func rolesChart(id string, r *Results) chart {
	rts, src := roleBreakdown(r)
	if len(rts) == 0 {
		return chart{missing: "CPU and I/O wait by role: no roles in summary.json and no roles.csv"}
	}
	c := &barChart{ID: id, Title: "CPU and I/O wait by node and process role", Label: "seconds (" + src + ")"}
	user := bars{Name: "CPU user", Colour: "#0072B2"}
	sys := bars{Name: "CPU system", Colour: "#56B4E9"}
	cpu := bars{Name: "CPU", Colour: "#0072B2"}
	io := bars{Name: "I/O wait", Colour: "#E69F00"}
	split := false
	top := 0.0
	for _, t := range rts {
		split = split || t.user > 0 || t.sys > 0
		top = math.Max(top, t.cpu+t.io)
	}
	idle := 0
	for _, t := range rts {
		if t.cpu+t.io < top*0.005 { // under 0.5 % of the busiest: no visible bar
			idle++
			continue
		}
		c.Categories = append(c.Categories, t.label)
		user.Values = append(user.Values, t.user)
		sys.Values = append(sys.Values, t.sys)
		cpu.Values = append(cpu.Values, t.cpu)
		io.Values = append(io.Values, t.io)
	}
	if split {
		c.Stacks = []bars{user, sys, io}
	} else {
		c.Stacks = []bars{cpu, io}
	}
	c.Format = func(v float64) string { return fmtNum(v) + " s" }
	c.ValueFormat = func(v float64) string { return ms(v) + " s" }
	if idle > 0 {
		c.Note = fmt.Sprintf("%d roles under 0.5 %% of the busiest left out.", idle)
	}
	if s := r.Summary; s != nil && len(s.Roles) > 0 && !s.IOWaitMeasured {
		why := "no kernel delay accounting"
		if s.Monitor != nil && s.Monitor.IOWaitNote != "" {
			why = s.Monitor.IOWaitNote
		}
		c.Note = strings.TrimSpace("I/O wait was not measured (" + why + "). " + c.Note)
	}
	return chart{fig: c.figure()}
}

// replicationChart: the engine's backlog per replica over time, in its
// unit (bytes for PostgreSQL).
func replicationChart(id string, r *Results) chart {
	if len(r.Replication) == 0 {
		return chart{missing: "engine replication state: no replication.csv"}
	}
	by := map[string][]ReplicationRow{}
	for _, row := range r.Replication {
		k := row.Node
		if row.From != "" {
			k = row.From + " → " + row.Node
		}
		by[k] = append(by[k], row)
	}
	peak := 0.0
	units := map[string]bool{}
	for _, row := range r.Replication {
		if !math.IsNaN(row.Backlog) {
			peak = math.Max(peak, row.Backlog)
		}
		units[row.BacklogUnit] = true
	}
	if len(units) > 1 {
		return chart{missing: "engine replication state: backlogs in different units"}
	}
	bu := r.Replication[0].BacklogUnit
	title, unit, div := "Backlog ("+bu+"), as the engine sees it", bu, 1.0
	if bu == "bytes" || bu == "" {
		title = "Bytes behind, as the engine sees it"
		unit, div = byteUnit(peak)
	}
	c := &lineChart{ID: id, Title: title,
		X: freeAxis("time since the run started (s)"), Y: freeAxis("not yet applied (" + unit + ")"), XBands: phaseBands(r.Series)}
	c.X.Min = 0
	for _, k := range sortedKeys(by) {
		l := line{Name: k}
		for _, row := range by[k] {
			l.Pts = append(l.Pts, point{row.T, row.Backlog / div})
		}
		c.Lines = append(c.Lines, l)
	}
	c.Note = "Sampled each second from the engine (PostgreSQL: upstream WAL position − replay position)."
	addFaultMarks(c, r, false)
	return chart{fig: c.figure()}
}

// chart is a built figure, or why it could not be drawn.
type chart struct {
	fig     figure
	missing string // not "": no figure, and why
}

// byteUnit picks the binary unit an axis up to peak bytes reads best in.
func byteUnit(peak float64) (string, float64) {
	switch {
	case peak >= 1<<30:
		return "GiB", 1 << 30
	case peak >= 1<<20:
		return "MiB", 1 << 20
	case peak >= 1<<10:
		return "KiB", 1 << 10
	}
	return "bytes", 1
}

// addFigure appends a chart, or the reason it is missing.
func addFigure(s *section, missing *[]string, c chart) {
	if c.missing == "" {
		s.Figures = append(s.Figures, c.fig)
	} else {
		*missing = append(*missing, c.missing)
	}
}
