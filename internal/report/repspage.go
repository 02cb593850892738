package report

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"

	"replab/internal/stats"
)

// repetitionsPage is the report of a repeated run.
func repetitionsPage(r *Results) *page {
	s := r.Summary
	n := len(r.Reps)
	if n == 0 {
		n = len(s.Repetitions)
	}
	p := &page{Kind: "repetitions", Heading: fmt.Sprintf("%s — %d repetitions", s.Name, n), Title: "replab: " + s.Name,
		Env: envLine(r.Env), Source: r.Dir, Problems: r.Problems, Banner: machineBanner(s)}
	p.State, p.StateOK = stateOf(s.Complete, s.StopReason)
	p.Facts = runFacts(s, r.Env)
	complete := 0
	for _, rep := range s.Repetitions {
		if rep.Complete {
			complete++
		}
	}
	if complete > 0 && s.MeasureSeconds > 0 {
		for i, f := range p.Facts {
			if strings.HasPrefix(f, "measured ") { // measure_s is the complete repetitions' total
				p.Facts[i] = fmt.Sprintf("measured %s s × %d", fmtNum(s.MeasureSeconds/float64(complete)), complete)
			}
		}
	}
	p.Cards = runCards(s)
	for i := range p.Cards {
		if p.Cards[i].Label == "Errors" { // a sum, like the retries under it
			p.Cards[i].Label = "Errors in all repetitions"
			continue
		}
		p.Cards[i].Label = "Mean " + strings.ToLower(p.Cards[i].Label[:1]) + p.Cards[i].Label[1:]
	}
	if c, ok := s.CI["commit_latency_ms.p99"]; ok && len(p.Cards) > 1 && c.N >= 2 {
		p.Cards[1].Note = ciText(&c)
	}
	for i := range p.Cards {
		for _, rep := range sortedKeys(s.Replicas) {
			if strings.Contains(p.Cards[i].Label, "at "+rep) {
				if c, ok := s.CI["replicas."+rep+".lag_ms.p99"]; ok && c.N >= 2 {
					p.Cards[i].Note = ciText(&c)
				}
			}
		}
	}

	head := section{ID: "headline", Title: "Headline figures: mean ± confidence half-width",
		Intro: "Means over the complete repetitions; the half-width is Student's t times the standard error, so the true mean lies within mean ± half-width at the stated confidence."}
	if s.RepetitionsNeeded > 0 {
		head.Notes = append(head.Notes, fmt.Sprintf("The pilot asked for %d repetitions to reach the confidence target (Jain's formula).", s.RepetitionsNeeded))
	}
	if len(s.CI) > 0 {
		t := htmlTable{Head: []tcell{txt("figure"), numHead("mean"), numHead("± half-width"), numHead("relative"), numHead("confidence"), numHead("n"), numHead("std dev")},
			Note: "The tables below give every other figure's mean, its interval on hover; summary.json's ci holds them all."}
		var keys []string
		for _, k := range sortedKeys(s.CI) {
			if headlineCI(k) {
				keys = append(keys, k)
			}
		}
		ciOrder(keys)
		for _, k := range keys {
			c := s.CI[k]
			rel := "—"
			if c.Mean != 0 && c.N >= 2 {
				rel = pct(100 * c.HalfWidth / math.Abs(c.Mean))
			}
			t.Rows = append(t.Rows, []tcell{txt(ciName(k)), num(ciValue(k, c.Mean)), num(ciValue(k, c.HalfWidth)), num(rel),
				num(fmt.Sprintf("%.0f %%", 100*c.Level)), num(strconv.Itoa(c.N)), num(ciValue(k, c.StdDev))})
		}
		head.Tables = append(head.Tables, t)
	} else {
		head.Tables = append(head.Tables, throughputTable(s))
	}
	if olderAggregate(s) {
		head.Notes = append(head.Notes, "This aggregate was written before replab averaged every figure over the repetitions: figures it has no confidence interval for show as —, and its verdicts are the last repetition's.")
	}
	if t, ok := latencyTable(s); ok {
		head.Tables = append(head.Tables, t)
	}
	if t, ok := lagTable(s); ok {
		head.Tables = append(head.Tables, t)
	}
	if t, ok := staleTable(s); ok {
		head.Tables = append(head.Tables, t)
	}
	p.Sections = append(p.Sections, head)
	if s.Pages != nil { // each repetition's report draws its pages
		p.Sections = append(p.Sections, section{ID: "pages", Title: "Pages",
			Intro:  "Page reads over the complete repetitions; each repetition's own report draws its pages one by one.",
			Tables: []htmlTable{pagesTable(s)}})
	}

	if sec, ok := faultsSection(r); ok {
		p.Sections = append(p.Sections, sec)
	}
	if sec, ok := consistencySection(r, &p.Missing); ok {
		p.Sections = append(p.Sections, sec)
	}

	reps := section{ID: "repetitions", Title: "Repetitions",
		Intro: "One row per measurement; each has its own report with every chart."}
	reps.Tables = append(reps.Tables, repetitionsTable(r))
	addFigure(&reps, &p.Missing, repTPMChart("rep-tpm", r))
	var names []string
	for _, rr := range r.Reps {
		names = append(names, path.Base(rr.Dir))
	}
	if len(r.Reps) > 0 {
		addFigure(&reps, &p.Missing, throughputChart("rep-throughput", r.Reps, names))
		merged := mergedHists(r.Reps)
		c := latencyCDFChart("rep-latency-cdf", merged)
		c.fig.Title += ", all repetitions"
		addFigure(&reps, &p.Missing, c)
		sites := map[string]string{}
		for n, rep := range s.Replicas {
			if rep != nil {
				sites[n] = rep.Site
			}
		}
		c = lagCDFChart("rep-lag-cdf", merged, sites)
		c.fig.Title += ", all repetitions"
		addFigure(&reps, &p.Missing, c)
	}
	p.Sections = append(p.Sections, reps)
	net := section{ID: "network", Title: "Network", Intro: "The lab stays up across the repetitions: its links carry all of them in turn."}
	if t, ok := linksTable(s); ok {
		net.Tables = append(net.Tables, t)
	}
	if len(r.Links) > 0 {
		addFigure(&net, &p.Missing, linkUtilChart("link-util", r))
	}
	if len(net.Tables)+len(net.Figures) > 0 {
		p.Sections = append(p.Sections, net)
	}
	if t, ok := rolesTable(r); ok {
		p.Sections = append(p.Sections, section{ID: "cpu", Title: "Where the time goes: CPU and I/O wait",
			Intro:  "CPU seconds in user and kernel mode, and time spent waiting for block I/O (kernel delay accounting), summed over each role's processes.",
			Tables: []htmlTable{t}})
	}
	p.Sections = append(p.Sections, section{ID: "environment", Title: "Environment", Tables: []htmlTable{envTable(s, r.Env)}})
	return p
}

// headline is one row of a repetitions, sweep or comparison table.
type headline struct {
	Complete     bool
	TPM          float64
	TPMCI        *stats.CI
	P50, P99     float64
	LagP50       map[string]float64
	LagP99       map[string]float64
	NotVisible   int64
	Errors       int64
	BytesPerTxn  float64 // NaN: unknown
	Transactions int64
	StopReason   string
	// Figs are the sweep table's figures (stale reads, anomalies,
	// conflicts, divergence), for the sweep page's charts.
	Figs *HeadlineFigs
}

func headlineOf(s *Summary) headline {
	h := headline{Complete: s.Complete, TPM: s.TPM, TPMCI: s.TPMCI, P50: s.CommitLatency.P50, P99: s.CommitLatency.P99,
		LagP50: map[string]float64{}, LagP99: map[string]float64{}, Errors: s.Errors, BytesPerTxn: nan,
		Transactions: s.Transactions, StopReason: s.StopReason}
	for n, r := range s.Replicas {
		if r == nil {
			continue
		}
		h.LagP50[n], h.LagP99[n] = r.LagMs.P50, r.LagMs.P99
		h.NotVisible += r.NotVisibleAtEnd
	}
	if s.BytesPerTransaction > 0 {
		h.BytesPerTxn = s.BytesPerTransaction
	}
	h.Figs = Headline(s)
	return h
}

func headlineOfFigs(f *HeadlineFigs) headline {
	return headline{Complete: f.Complete, TPM: f.TPM, TPMCI: f.TPMCI, P50: f.CommitP50Ms, P99: f.CommitP99Ms,
		LagP50: f.LagP50Ms, LagP99: f.LagP99Ms, NotVisible: f.NotVisibleAtEnd, Errors: f.Errors, BytesPerTxn: nan, Figs: f}
}

func replicaNames(hs []headline) []string {
	seen := map[string]bool{}
	var out []string
	for _, h := range hs {
		for n := range h.LagP99 {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

func anyBytes(hs []headline) bool {
	for _, h := range hs {
		if !math.IsNaN(h.BytesPerTxn) {
			return true
		}
	}
	return false
}

func repetitionsTable(r *Results) htmlTable {
	var hs []headline
	var dirs []string
	if len(r.Reps) > 0 {
		for _, rr := range r.Reps {
			hs = append(hs, headlineOf(rr.Summary))
			dirs = append(dirs, path.Base(rr.Dir))
		}
	} else {
		for _, rep := range r.Summary.Repetitions {
			h := headline{Complete: rep.Complete, TPM: rep.TPM, P99: rep.CommitP99Ms, P50: nan, LagP50: rep.LagP50Ms,
				Transactions: rep.Transactions, BytesPerTxn: nan}
			hs = append(hs, h)
			dirs = append(dirs, rep.Dir)
		}
	}
	reps := replicaNames(hs)
	if len(r.Reps) == 0 {
		reps = nil
		for _, h := range hs {
			for n := range h.LagP50 {
				if !containsStr(reps, n) {
					reps = append(reps, n)
				}
			}
		}
		sort.Strings(reps)
	}
	t := htmlTable{Head: []tcell{txt("repetition"), txt("state"), numHead("tpm"), numHead("commit p50 ms"), numHead("commit p99 ms")}}
	for _, n := range reps {
		t.Head = append(t.Head, numHead("lag "+n+" p50 ms"))
		if len(r.Reps) > 0 {
			t.Head = append(t.Head, numHead("lag "+n+" p99 ms"))
		}
	}
	bytes := anyBytes(hs)
	if bytes {
		t.Head = append(t.Head, numHead("B / transaction"))
	}
	for i, h := range hs {
		name := txt(dirs[i])
		if len(r.Reps) > 0 {
			name.Href = dirs[i] + "/" + ReportFile
		}
		st := txt("complete")
		if !h.Complete {
			st = tcell{Text: "incomplete", Class: "bad", Title: h.StopReason}
		}
		row := []tcell{name, st, num(group(h.TPM)), num(ms(h.P50)), num(ms(h.P99))}
		for _, n := range reps {
			row = append(row, num(msOr(h.LagP50, n)))
			if len(r.Reps) > 0 {
				row = append(row, num(msOr(h.LagP99, n)))
			}
		}
		if bytes {
			row = append(row, num(group(h.BytesPerTxn)))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func containsStr(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func msOr(m map[string]float64, k string) string {
	if v, ok := m[k]; ok {
		return ms(v)
	}
	return "—"
}

// repTPMChart: each repetition's tpm, the mean and its confidence band.
func repTPMChart(id string, r *Results) chart {
	var labels []string
	l := line{Name: "tpm of the repetition", Markers: true, Width: 1, Colour: colour(0)}
	if len(r.Reps) > 0 {
		for i, rr := range r.Reps {
			labels = append(labels, strings.TrimPrefix(path.Base(rr.Dir), "rep-"))
			l.Pts = append(l.Pts, point{float64(i), rr.Summary.TPM})
		}
	} else {
		for i, rep := range r.Summary.Repetitions {
			labels = append(labels, strings.TrimPrefix(rep.Dir, "rep-"))
			l.Pts = append(l.Pts, point{float64(i), rep.TPM})
		}
	}
	if len(l.Pts) == 0 {
		return chart{missing: "tpm per repetition: no repetitions listed"}
	}
	c := &lineChart{ID: id, Title: "Throughput of each repetition", X: freeAxis("repetition"), Y: freeAxis("transactions per minute")}
	c.X.Categories = labels
	c.Lines = []line{l}
	if ci := r.Summary.TPMCI; ci != nil && ci.N >= 2 {
		c.YBand = &band{From: ci.Low(), To: ci.High(), Label: fmt.Sprintf("%.0f %% confidence interval of the mean", 100*ci.Level)}
		c.Lines = append(c.Lines, line{Name: "mean " + group(ci.Mean) + " tpm", Colour: "#5a6376", Dash: "5 4", Width: 1.2,
			Pts: []point{{-0.5, ci.Mean}, {float64(len(labels)) - 0.5, ci.Mean}}})
	}
	return chart{fig: c.figure()}
}

// steadyTitle is the steadiness row's tooltip: the trend with its interval
// (when the series set one), and the drift.
func steadyTitle(st *stats.Steadiness) string {
	trend := fmt.Sprintf("trend %+.1f %% of the mean per minute", st.SlopePctPerMin)
	if lo, hi := st.SlopeLowPctPerMin, st.SlopeHighPctPerMin; lo > -1e9 && hi < 1e9 && (lo != 0 || hi != 0) {
		trend += fmt.Sprintf(" (%.0f %% CI %+.1f to %+.1f)", 100*stats.SteadyLevel, lo, hi)
	}
	return fmt.Sprintf("%s; last third %+.1f %% from the first", trend, st.DriftPct)
}
