package report

// A page-read run (workload page-read): its block of the end-of-run
// table, and the report's Pages section — the object database study's
// Figure 3 (time per page over the page sequence) with the congestion
// window under it, and the pages figures of summary.json.

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"

	"replab/internal/pagestats"
	"replab/internal/units"
)

// unsetSsthresh is ssthresh_segments before the connection's first loss
// (the kernel's "infinite").
const unsetSsthresh = math.MaxInt32

// maxPagePoints bounds the points a page chart draws: a long run over a
// fast link reads hundreds of thousands of pages, more than an inline SVG
// should carry. Slow pages are drawn beyond the bound.
const maxPagePoints = 5000

// pageChartW is the page charts' width: they span the report's width,
// one under the other, so that their x axes line up.
const pageChartW = 1240.0

// slowColour marks slow pages: red, apart from the blue of the page times.
const slowColour = "#D7191C"

// readPages reads pages.csv; a missing file leaves Pages nil.
func (r *Results) readPages() {
	r.Pages, r.PagesError = readOptional(r, "pages.csv", pagestats.ReadCSV)
}

// pluralize writes "1 connection", "2 connections".
func pluralize(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.FormatInt(n, 10) + " " + word + "s"
}

// pageFigure is figure key of s as text: the value, or in an aggregate
// the mean over the repetitions (with ± its half-width when pm). Figures
// an aggregate sums or keeps (the same in every repetition) have no CI:
// they print as they are.
func pageFigure(s *Summary, key string, v float64, f func(float64) string, pm bool) string {
	c, ok := s.CI[key]
	if s.Kind != "repetitions" || !ok {
		return f(v)
	}
	t := f(c.Mean)
	if pm && c.Bounded() {
		t += " ± " + f(c.HalfWidth)
	}
	return t
}

func fixed(prec int) func(float64) string {
	return func(v float64) string { return strconv.FormatFloat(v, 'f', prec, 64) }
}

func bytesPerS(v float64) string { return units.Bytes(v) + "/s" }

// printPages writes a page-read run's lines of the end-of-run table:
// what was read and how fast, and the slow pages.
func printPages(w io.Writer, s *Summary) {
	p := s.Pages
	if p == nil {
		return
	}
	agg := s.Kind == "repetitions"
	f := func(key string, v float64, prec int) string {
		return pageFigure(s, "pages."+key, v, fixed(prec), false)
	}
	rate := pageFigure(s, "pages.pages_per_s", p.PagesPerS, fixed(1), true)
	fmt.Fprintf(w, "  pages       %s %s, %s, %s in flight: %s pages/s (%s)", units.Bytes(float64(p.PageSizeBytes)), p.Order,
		pluralize(int64(p.Connections), "connection"), pluralize(int64(p.Users), "request"), rate,
		pageFigure(s, "pages.read_bytes_per_s", p.ReadBytesPerS, bytesPerS, false))
	if agg {
		fmt.Fprintf(w, ", mean of %d repetitions\n", completeRepetitions(s))
	} else {
		fmt.Fprintf(w, ", %d pages\n", p.Pages)
	}
	sl := p.Slow
	if sl.Pages == 0 {
		fmt.Fprintf(w, "  slow pages  none: no page was measured\n")
		return
	}
	rule := fmt.Sprintf("slower than %s × median %s ms = %s ms", units.Trim(sl.ThresholdFactor, 2),
		f("slow.median_ms", sl.MedianMs, 1), f("slow.threshold_ms", sl.ThresholdMs, 1))
	in := ""
	if agg {
		in = " in all"
		rule += " (means)"
	}
	share := fmt.Sprintf("%s%%", pageFigure(s, "pages.slow.slow_share", 100*sl.SlowShare, fixed(1), false))
	if c, ok := s.CI["pages.slow.slow_share"]; ok && agg {
		share = fmt.Sprintf("mean share %.1f%%", 100*c.Mean)
		if c.Bounded() {
			share += fmt.Sprintf(" ± %.1f%%", 100*c.HalfWidth)
		}
	}
	var b []byte
	if sl.SlowPages == 0 {
		b = fmt.Appendf(b, "none of %d%s %s", sl.Pages, in, rule)
	} else {
		b = fmt.Appendf(b, "%d of %d%s (%s) %s, taking %s ms on average (the others %s ms)", sl.SlowPages, sl.Pages, in, share, rule,
			f("slow.slow_mean_ms", sl.SlowMeanMs, 1), f("slow.others_mean_ms", sl.OthersMeanMs, 1))
	}
	if sl.SlowPages >= 2 && sl.PeriodPages > 0 {
		b = fmt.Appendf(b, "; every %s pages (%s s), cv %s", f("slow.period_pages", sl.PeriodPages, 0),
			f("slow.period_s", sl.PeriodS, 1), f("slow.period_cv", sl.PeriodCV, 2))
	}
	// The server's socket (sock_diag in its site): the pages it resent.
	b = fmt.Appendf(b, "; %s by the server%s", pluralize(sl.RetransDuring, "retransmission"), in)
	fmt.Fprintf(w, "  slow pages  %s\n", b)
}

// pagesTable is summary.json's pages figures.
func pagesTable(s *Summary) htmlTable {
	p := s.Pages
	sl := p.Slow
	t := htmlTable{Caption: meansCaption(s, "Page reads (measure phase)")}
	// A mean of the repetitions has a CI; sums and settings do not.
	cell := func(key string, v float64, f func(float64) string) tcell {
		if _, ok := s.CI["pages."+key]; ok {
			return fig(s, "pages."+key, v, f, true)
		}
		return num(f(v))
	}
	row := func(k string, c tcell) { t.Rows = append(t.Rows, []tcell{txt(k), c}) }
	count := func(v float64) string { return group(v) }
	percent := func(v float64) string { return pct(100 * v) }
	row("page size", cell("page_size_bytes", float64(p.PageSizeBytes), units.Bytes))
	row("order", num(p.Order))
	row("TCP connections", cell("connections", float64(p.Connections), count))
	row("requests in flight (all connections)", cell("users", float64(p.Users), count))
	row("pages read", cell("pages", float64(p.Pages), count))
	row("pages per second", cell("pages_per_s", p.PagesPerS, fixed(2)))
	row("read rate", cell("read_bytes_per_s", p.ReadBytesPerS, bytesPerS))
	row("median time per page (ms)", cell("slow.median_ms", sl.MedianMs, ms))
	row("slow threshold factor (× median)", cell("slow.threshold_factor", sl.ThresholdFactor, fmtNum))
	row("slow threshold (ms)", cell("slow.threshold_ms", sl.ThresholdMs, ms))
	row("slow pages", cell("slow.slow_pages", float64(sl.SlowPages), count))
	row("slow share", cell("slow.slow_share", sl.SlowShare, percent))
	if sl.SlowPages > 0 {
		row("mean time of a slow page (ms)", cell("slow.slow_mean_ms", sl.SlowMeanMs, ms))
	}
	row("mean time of the other pages (ms)", cell("slow.others_mean_ms", sl.OthersMeanMs, ms))
	if sl.SlowPages >= 2 && sl.PeriodPages > 0 {
		row("slow every (pages, median gap)", cell("slow.period_pages", sl.PeriodPages, fmtNum))
		row("slow every (s, median gap)", cell("slow.period_s", sl.PeriodS, ms))
		row("gap regularity (cv: 0 periodic, 1 random)", cell("slow.period_cv", sl.PeriodCV, ms))
	}
	row("server TCP retransmissions", cell("slow.retransmits", float64(sl.RetransDuring), count))
	if s.Kind == "repetitions" {
		t.Note = "Pages, slow pages and retransmissions are sums over the repetitions; the settings are the same in each."
	}
	return t
}

// pagesSection is the report's Pages section, or false when the run read
// no pages (another workload).
func pagesSection(r *Results) (section, bool) {
	s := r.Summary
	hasSummary := s != nil && s.Pages != nil
	if !hasSummary && r.Pages == nil && r.PagesError == "" {
		return section{}, false
	}
	sec := section{ID: "pages", Title: "Pages",
		Intro: "Every page read, in the order the pages arrived (the object database study's Figure 3): a page takes about one round trip " +
			"plus its serialization on the link; when a loss resets TCP's congestion window, the pages after it are slow."}
	if hasSummary {
		sec.Tables = append(sec.Tables, pagesTable(s))
	}
	switch {
	case r.PagesError != "":
		sec.Notes = append(sec.Notes, "pages.csv could not be read, so the page charts are left out: "+r.PagesError)
	case r.Pages == nil:
		sec.Notes = append(sec.Notes, "This directory has no pages.csv, so the page charts are left out.")
	case len(r.Pages) == 0:
		sec.Notes = append(sec.Notes, "pages.csv lists no pages.")
	default:
		th := pageThreshold(r)
		sec.Figures = append(sec.Figures, pageTimeChart("page-time", r.Pages, th).figure(), pageCwndChart("page-cwnd", r.Pages).figure())
	}
	return sec, true
}

// slowRule is the slow-page detector's threshold and the median it is
// a factor of.
type slowRule struct {
	Factor, MedianMs, ThresholdMs float64
}

// pageThreshold is the run's slow-page rule: summary.json's, or the
// detector's over pages.csv when the summary has none.
func pageThreshold(r *Results) slowRule {
	if s := r.Summary; s != nil && s.Pages != nil && s.Pages.Slow.ThresholdMs > 0 {
		sl := s.Pages.Slow
		return slowRule{sl.ThresholdFactor, sl.MedianMs, sl.ThresholdMs}
	}
	ps := make([]pagestats.Page, len(r.Pages))
	for i, row := range r.Pages {
		ps[i] = row.Page
	}
	sl := pagestats.Detect(ps, pagestats.DefaultFactor, nil)
	return slowRule{sl.ThresholdFactor, sl.MedianMs, sl.ThresholdMs}
}

// decimate picks which of n points to draw: all of them up to maxPts;
// beyond, in runs of ceil(n/maxPts) consecutive points, every point keep
// asks for, or else the one with the highest score — so spikes survive.
func decimate(n, maxPts int, keep func(int) bool, score func(int) float64) []int {
	if n <= maxPts {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	k := (n + maxPts - 1) / maxPts
	var out []int
	for lo := 0; lo < n; lo += k {
		hi := min(lo+k, n)
		best, kept := lo, false
		for i := lo; i < hi; i++ {
			if keep(i) {
				out, kept = append(out, i), true
			}
			if score(i) > score(best) {
				best = i
			}
		}
		if !kept {
			out = append(out, best)
		}
	}
	return out
}

// pageAxes sets a page chart's x axis (the whole run's page sequence, so
// that the charts under each other line up) and shades the pages read
// outside the measure phase.
func pageAxes(c *lineChart, rows []pagestats.Row) {
	lo, hi := math.Inf(1), math.Inf(-1)
	wLo, wHi, cLo, cHi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, p := range rows {
		x := float64(p.Seq)
		lo, hi = math.Min(lo, x), math.Max(hi, x)
		switch {
		case p.Measured:
		case p.StartS < 0: // sent in the warmup
			wLo, wHi = math.Min(wLo, x), math.Max(wHi, x)
		default:
			cLo, cHi = math.Min(cLo, x), math.Max(cHi, x)
		}
	}
	if hi <= lo {
		lo, hi = lo-0.5, hi+0.5
	}
	c.X = axis{Label: "page, in the order they arrived (seq, whole run)", Min: lo, Max: hi}
	if wLo <= wHi {
		c.XBands = append(c.XBands, band{From: wLo - 0.5, To: wHi + 0.5, Label: "warmup"})
	}
	if cLo <= cHi {
		c.XBands = append(c.XBands, band{From: cLo - 0.5, To: cHi + 0.5, Label: "cooldown"})
	}
}

// slowDots marks the slow pages at y(page).
func slowDots(rows []pagestats.Row, y func(pagestats.Row) float64) line {
	l := line{Name: "slow page", Colour: slowColour, Dots: true, Class: "slow"}
	for _, p := range rows {
		if p.Slow {
			l.Pts = append(l.Pts, point{float64(p.Seq), y(p)})
			l.Tips = append(l.Tips, fmt.Sprintf("page %d (seq %d): %s ms, cwnd %d segments", p.Index, p.Seq, ms(p.TimeMs), p.CwndSegments))
		}
	}
	l.Name = fmt.Sprintf("slow page (%d)", len(l.Pts))
	return l
}

// pageTimeChart: the time of every page over the page sequence, the slow
// pages in red and the threshold that makes them slow.
func pageTimeChart(id string, rows []pagestats.Row, th slowRule) *lineChart {
	c := &lineChart{ID: id, Title: "Transfer time per page", Y: freeAxis("request sent → last byte received (ms)"), Width: pageChartW}
	pageAxes(c, rows)
	idx := decimate(len(rows), maxPagePoints, func(i int) bool { return rows[i].Slow }, func(i int) float64 { return rows[i].TimeMs })
	l := line{Name: "time per page", Colour: colour(0), Width: 1.2}
	for _, i := range idx {
		l.Pts = append(l.Pts, point{float64(rows[i].Seq), rows[i].TimeMs})
	}
	c.Lines = append(c.Lines, l)
	lo, hi := c.X.Min, c.X.Max
	if th.ThresholdMs > 0 {
		c.Lines = append(c.Lines,
			line{Name: "median " + ms(th.MedianMs) + " ms", Colour: "#5a6376", Dash: "2 2", Width: 1, Pts: []point{{lo, th.MedianMs}, {hi, th.MedianMs}}},
			line{Name: fmt.Sprintf("slow above %s × median = %s ms", units.Trim(th.Factor, 2), ms(th.ThresholdMs)), Colour: slowColour, Dash: "6 3",
				Width: 1.2, Pts: []point{{lo, th.ThresholdMs}, {hi, th.ThresholdMs}}})
	}
	if d := slowDots(rows, func(p pagestats.Row) float64 { return p.TimeMs }); len(d.Pts) > 0 {
		c.Lines = append(c.Lines, d)
	}
	c.Note = pagesNote(len(rows), len(idx), "the slowest page", maxPagePoints)
	return c
}

// pagesNote says what the shading is and whether every page was drawn.
// maxPts is the bound each line was decimated to.
func pagesNote(n, drawn int, which string, maxPts int) string {
	note := "Shaded: pages sent in the warmup (and cooldown), outside the measurement; slow pages are marked among the measured ones."
	if drawn >= n {
		return note + fmt.Sprintf(" Every one of the %s pages is drawn.", group(float64(n)))
	}
	return note + fmt.Sprintf(" %s of %s pages drawn (at most %s a line): %s of each run of consecutive pages, and every slow page.",
		group(float64(drawn)), group(float64(n)), group(float64(maxPts)), which)
}

// pageCwndChart: each connection's congestion window (and slow-start
// threshold, once set) after each page, on the same x axis as the page
// times, so that a window collapsing just before slow pages shows.
func pageCwndChart(id string, rows []pagestats.Row) *lineChart {
	c := &lineChart{ID: id, Title: "The server's congestion window after each page", Y: freeAxis("server's TCP congestion window (segments)"),
		Width: pageChartW}
	pageAxes(c, rows)
	byConn := map[int][]int{} // indices into rows
	for i, p := range rows {
		byConn[p.Conn] = append(byConn[p.Conn], i)
	}
	conns := slices.Sorted(maps.Keys(byConn))
	perConn := max(maxPagePoints/len(conns), 100)
	drawn := 0
	ssthresh := len(conns) <= 3 // more would crowd the chart
	anySsthresh := false
	for ci, conn := range conns {
		ix := byConn[conn]
		keep := decimate(len(ix), perConn, func(i int) bool { return rows[ix[i]].Slow },
			func(i int) float64 { return -float64(rows[ix[i]].CwndSegments) }) // keep the window's dips
		drawn += len(keep)
		name := "cwnd"
		if len(conns) > 1 {
			name = fmt.Sprintf("cwnd, connection %d", conn)
		}
		cw := line{Name: name, Colour: colour(ci), Width: 1.4}
		st := line{Name: "ssthresh" + name[len("cwnd"):], Colour: colour(ci), Dash: "6 3", Width: 1}
		set := false
		for _, i := range keep {
			p := rows[ix[i]]
			cw.Pts = append(cw.Pts, point{float64(p.Seq), float64(p.CwndSegments)})
			y := float64(p.SsthreshSegments)
			if p.SsthreshSegments >= unsetSsthresh {
				y = nan // not set before the first loss
			} else {
				set = true
			}
			st.Pts = append(st.Pts, point{float64(p.Seq), y})
		}
		c.Lines = append(c.Lines, cw)
		if ssthresh && set {
			c.Lines = append(c.Lines, st)
			anySsthresh = true
		}
	}
	if d := slowDots(rows, func(p pagestats.Row) float64 { return float64(p.CwndSegments) }); len(d.Pts) > 0 {
		c.Lines = append(c.Lines, d)
	}
	c.Note = pagesNote(len(rows), drawn, "the smallest window", perConn)
	if anySsthresh {
		c.Note += " Dashed: the slow-start threshold, from the first loss on."
	}
	c.Note += " Read from the server's socket (the pages' sender) with sock_diag in its site just after each page arrived;" +
		" in a lab without namespaces, the client's own socket."
	return c
}
