package report

// Charts drawn as inline SVG: line charts (linear or log axes, shaded x
// ranges, error bars, categorical x) and horizontal stacked bar charts.
// Every chart is a figure: an HTML caption and legend around one <svg>
// whose data marks are <path class="data"> elements.

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strconv"
	"strings"

	"replab/internal/units"
)

// palette is Okabe & Ito's colour-blind-safe set, ordered for contrast on
// white (their yellow is left out: too pale for thin lines).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"}

// dashes tell apart series beyond the palette, and p50 from p99.
var dashes = []string{"", "6 3", "2 2", "8 3 2 3"}

func colour(i int) string { return palette[i%len(palette)] }

func dash(i int) string { return dashes[(i/len(palette))%len(dashes)] }

type point struct{ X, Y float64 }

// line is one series; a NaN Y breaks it.
type line struct {
	Name    string
	Pts     []point
	Err     []float64 // optional ± half-width per point: error bars
	Colour  string
	Dash    string
	Width   float64
	Markers bool
	Faint   bool // thin and translucent, for many overlaid series
	NoKey   bool // left out of the legend
	// Dots draws the points as markers only, without the line through
	// them (e.g. the slow pages over the page times); Class names the
	// markers for styles and tests, and Tips (one per point) their
	// tooltips instead of the value.
	Dots  bool
	Class string
	Tips  []string
}

// band shades a range of x (phases) or of y (a confidence interval).
type band struct {
	From, To float64
	Label    string
}

type axis struct {
	Label      string
	Log        bool
	Min, Max   float64 // NaN: from the data
	Format     func(float64) string
	Categories []string  // x only: ticks at 0..n-1 with these labels
	Ticks      []float64 // labelled ticks at these values instead of round ones
}

type lineChart struct {
	ID, Title, Note string
	X, Y            axis
	Lines           []line
	XBands          []band
	YBand           *band
	// Faults mark the faults of a run on a time axis (x in the chart's
	// units): a band from apply to heal, a line for one without a heal.
	Faults []faultMark
	// Width is the chart's width in SVG units (0: chartW); a wide chart
	// spans the page (the page sequence of a long run).
	Width float64
}

type bars struct {
	Name   string
	Colour string
	Values []float64 // one per category
}

// barChart is a horizontal stacked bar chart.
type barChart struct {
	ID, Title, Note string
	Categories      []string
	Stacks          []bars
	Label           string               // value axis
	Format          func(float64) string // ticks
	ValueFormat     func(float64) string // totals at the bars' ends (default Format)
}

type legendItem struct {
	Name, Colour, Dash string
	Box                bool
}

// figure is a rendered chart: caption, legend and SVG.
type figure struct {
	ID, Title, Note string
	Legend          []legendItem
	SVG             string
}

const (
	chartW  = 640.0
	chartH  = 280.0
	marginL = 62.0
	marginR = 18.0
	marginT = 14.0
	marginB = 46.0
)

// scale maps data to pixels on one axis.
type scale struct {
	log    bool
	d0, d1 float64 // domain
	r0, r1 float64 // range (pixels)
}

func (s scale) at(v float64) float64 {
	if s.log {
		v, d0, d1 := math.Log10(v), math.Log10(s.d0), math.Log10(s.d1)
		return s.r0 + (v-d0)/(d1-d0)*(s.r1-s.r0)
	}
	return s.r0 + (v-s.d0)/(s.d1-s.d0)*(s.r1-s.r0)
}

type tick struct {
	V     float64
	Label string
	Minor bool
}

// niceStep is a round step giving about n intervals over span.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m == 2.5 && mag < 10 {
			continue // 25 and 250 are round, 2.5 and 0.25 less so
		}
		if span/(m*mag) <= float64(n)*1.4 { // a few more ticks than asked is fine
			return m * mag
		}
	}
	return 10 * mag
}

// linearTicks are round values from lo to hi.
func linearTicks(lo, hi float64, n int, f func(float64) string) []tick {
	step := niceStep(hi-lo, n)
	var ts []tick
	for v := math.Ceil(lo/step-1e-9) * step; v <= hi+step*1e-9; v += step {
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		ts = append(ts, tick{V: v, Label: f(v)})
	}
	return ts
}

// logTicks labels powers of ten, 2 and 5 times them when the range spans
// few decades, and every integer (and 1.5, 2.5) times them within about
// one decade; the others are minor grid lines. Labels too close to the
// previous one are dropped when drawn.
func logTicks(lo, hi float64, f func(float64) string) []tick {
	var ts []tick
	decades := math.Log10(hi / lo)
	ms := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}
	if decades < 1.2 {
		ms = []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9}
	}
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		p := math.Pow(10, e)
		for _, m := range ms {
			v := m * p
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			major := m == 1 || (decades < 2.5 && (m == 2 || m == 5)) || decades < 1.2
			t := tick{V: v, Minor: !major}
			if major {
				t.Label = f(v)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// fmtNum prints a tick or table value briefly: 0.25, 12, 1500, 25k, 3.2M.
func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 1e9:
		return units.Trim(v/1e9, 1) + "G"
	case a >= 1e6:
		return units.Trim(v/1e6, 1) + "M"
	case a >= 1e4:
		return units.Trim(v/1e3, 1) + "k"
	case a >= 100:
		return units.Trim(v, 0)
	case a >= 10:
		return units.Trim(v, 1)
	case a >= 1:
		return units.Trim(v, 2)
	default:
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
}

func esc(s string) string { return html.EscapeString(s) }

// extent returns the data's range on one axis (positive values only for
// a log axis); ok is false when there is none.
func extent(ls []line, x, logAxis bool) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, l := range ls {
		for i, p := range l.Pts {
			v := p.Y
			if x {
				v = p.X
			}
			if math.IsNaN(v) || math.IsInf(v, 0) || (logAxis && v <= 0) {
				continue
			}
			e := 0.0
			if !x && i < len(l.Err) && !math.IsNaN(l.Err[i]) {
				e = l.Err[i]
			}
			lo, hi = math.Min(lo, v-e), math.Max(hi, v+e)
		}
	}
	return lo, hi, lo <= hi
}

// domain picks an axis's range: the data's (or the axis's fixed bounds);
// a linear value axis starts at zero and ends on a round value.
func domain(a axis, ls []line, isX bool) (lo, hi float64) {
	if a.Categories != nil {
		return -0.5, float64(len(a.Categories)) - 0.5
	}
	dlo, dhi, ok := extent(ls, isX, a.Log)
	if !ok {
		dlo, dhi = 0, 1
		if a.Log {
			dlo, dhi = 1, 10
		}
	}
	lo, hi = dlo, dhi
	if a.Log {
		lo, hi = lo/1.15, hi*1.15
	} else if !isX {
		lo = math.Min(0, lo)
		if hi <= lo {
			hi = lo + 1
		}
		step := niceStep(hi-lo, 5)
		hi = math.Ceil(hi/step-1e-9) * step
		if lo < 0 {
			lo = math.Floor(lo/step+1e-9) * step
		}
	} else if hi <= lo {
		lo, hi = lo-0.5, hi+0.5
	} else if markers(ls) {
		pad := (hi - lo) * 0.04 // room for the end markers
		lo, hi = lo-pad, hi+pad
	}
	if !math.IsNaN(a.Min) {
		lo = a.Min
	}
	if !math.IsNaN(a.Max) {
		hi = a.Max
	}
	return lo, hi
}

func markers(ls []line) bool {
	for _, l := range ls {
		if l.Markers {
			return true
		}
	}
	return false
}

func ticks(a axis, lo, hi float64, n int) []tick {
	f := a.Format
	if f == nil {
		f = fmtNum
	}
	if a.Categories != nil {
		ts := make([]tick, len(a.Categories))
		for i, c := range a.Categories {
			ts[i] = tick{V: float64(i), Label: c}
		}
		return ts
	}
	if a.Ticks != nil {
		var ts []tick
		for _, v := range a.Ticks {
			ts = append(ts, tick{V: v, Label: f(v)})
		}
		return ts
	}
	if a.Log {
		return logTicks(lo, hi, f)
	}
	return linearTicks(lo, hi, n, f)
}

// svgOpen starts an SVG of the given size with an accessible title.
func svgOpen(b *strings.Builder, id, title string, w, h float64) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" id="%s" class="chart" viewBox="0 0 %g %g" role="img" aria-labelledby="%s-t">`, esc(id), w, h, esc(id))
	fmt.Fprintf(b, `<title id="%s-t">%s</title>`, esc(id), esc(title))
}

func (c *lineChart) legend() []legendItem {
	var items []legendItem
	for _, l := range c.Lines {
		if l.NoKey || l.Name == "" {
			continue
		}
		items = append(items, legendItem{Name: l.Name, Colour: l.Colour, Dash: l.Dash})
	}
	return items
}

// figure draws the chart.
func (c *lineChart) figure() figure {
	for i := range c.Lines {
		if c.Lines[i].Colour == "" {
			c.Lines[i].Colour = colour(i)
		}
	}
	var b strings.Builder
	w := chartW
	if c.Width > 0 {
		w = c.Width
	}
	svgOpen(&b, c.ID, c.Title, w, chartH)
	pl, pr, pt, pb := marginL, w-marginR, marginT, chartH-marginB
	xlo, xhi := domain(c.X, c.Lines, true)
	ylo, yhi := domain(c.Y, c.Lines, false)
	xs := scale{log: c.X.Log, d0: xlo, d1: xhi, r0: pl, r1: pr}
	ys := scale{log: c.Y.Log, d0: ylo, d1: yhi, r0: pb, r1: pt}

	clip := c.ID + "-clip"
	fmt.Fprintf(&b, `<defs><clipPath id="%s"><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"/></clipPath></defs>`,
		esc(clip), pl, pt-1, pr-pl, pb-pt+2)

	// shaded ranges
	for _, bd := range c.XBands {
		x0, x1 := math.Max(xs.at(bd.From), pl), math.Min(xs.at(bd.To), pr)
		if x1 <= x0 {
			continue
		}
		fmt.Fprintf(&b, `<rect class="band" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, x0, pt, x1-x0, pb-pt)
		if bd.Label != "" {
			fmt.Fprintf(&b, `<text class="band-label" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, (x0+x1)/2, pt+12, esc(bd.Label))
		}
	}
	c.drawFaults(&b, xs, pl, pr, pt, pb)
	if c.YBand != nil {
		y0, y1 := ys.at(c.YBand.From), ys.at(c.YBand.To)
		y0, y1 = math.Min(math.Max(y0, pt), pb), math.Min(math.Max(y1, pt), pb)
		fmt.Fprintf(&b, `<rect class="band ci" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, pl, math.Min(y0, y1), pr-pl, math.Abs(y0-y1))
		if c.YBand.Label != "" {
			fmt.Fprintf(&b, `<text class="band-label" x="%.1f" y="%.1f" text-anchor="end">%s</text>`, pr-4, math.Min(y0, y1)-3, esc(c.YBand.Label))
		}
	}

	// grid and axes
	yt := ticks(c.Y, ylo, yhi, 5)
	for _, t := range yt {
		y := ys.at(t.V)
		cls := "grid"
		if t.Minor {
			cls = "grid minor"
		}
		fmt.Fprintf(&b, `<line class="%s" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, cls, pl, pr, y, y)
		if t.Label != "" {
			fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="end">%s</text>`, pl-6, y+4, esc(t.Label))
		}
	}
	xt := ticks(c.X, xlo, xhi, 6)
	lastLabel := math.Inf(-1)
	for _, t := range xt {
		x := xs.at(t.V)
		if t.Label != "" && c.X.Categories == nil {
			if x-lastLabel < float64(len(t.Label))*6.5+8 { // would overlap the previous label
				t.Label, t.Minor = "", true
			} else {
				lastLabel = x
			}
		}
		if t.Minor || c.X.Log {
			cls := "grid"
			if t.Minor {
				cls = "grid minor"
			}
			fmt.Fprintf(&b, `<line class="%s" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, cls, x, x, pt, pb)
		}
		if t.Label != "" {
			fmt.Fprintf(&b, `<line class="axis" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, x, x, pb, pb+4)
			fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x, pb+17, esc(t.Label))
		}
	}
	fmt.Fprintf(&b, `<line class="axis" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, pl, pr, pb, pb)
	fmt.Fprintf(&b, `<line class="axis" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, pl, pl, pt, pb)
	fmt.Fprintf(&b, `<text class="axis-label" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, (pl+pr)/2, chartH-8, esc(c.X.Label))
	fmt.Fprintf(&b, `<text class="axis-label" transform="translate(14 %.1f) rotate(-90)" text-anchor="middle">%s</text>`, (pt+pb)/2, esc(c.Y.Label))

	// data
	fmt.Fprintf(&b, `<g clip-path="url(#%s)">`, esc(clip))
	for _, l := range c.Lines {
		c.drawLine(&b, l, xs, ys)
	}
	b.WriteString(`</g></svg>`)
	return figure{ID: c.ID, Title: c.Title, Note: c.Note, Legend: c.legend(), SVG: b.String()}
}

// drawFaults draws the chart's faults: a <rect class="fault"> from apply
// to heal, a <line class="fault"> for one not healed, each labelled
// (labels of faults close together step down so they do not overlap).
func (c *lineChart) drawFaults(b *strings.Builder, xs scale, pl, pr, pt, pb float64) {
	lastEnd, row := math.Inf(-1), 0
	for _, f := range c.Faults {
		x0 := xs.at(f.From)
		if math.IsNaN(x0) || x0 > pr {
			continue
		}
		title := fmt.Sprintf("<title>%s</title>", esc(f.Label))
		if math.IsNaN(f.To) {
			if x0 < pl {
				continue
			}
			fmt.Fprintf(b, `<line class="fault" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f">%s</line>`, x0, x0, pt, pb, title)
		} else {
			x1 := math.Min(xs.at(f.To), pr)
			x0 = math.Max(x0, pl)
			if x1 < x0 {
				continue
			}
			fmt.Fprintf(b, `<rect class="fault" x="%.1f" y="%.1f" width="%.1f" height="%.1f">%s</rect>`, x0, pt, math.Max(x1-x0, 1), pb-pt, title)
		}
		if x0 < lastEnd {
			row = (row + 1) % 4
		} else {
			row = 0
		}
		w := float64(len([]rune(f.Label)))*5.6 + 6
		lastEnd = math.Max(lastEnd, x0+w)
		x, anchor := x0+3, "start"
		if x0+w > pr { // would run off the plot: end it at the plot's edge
			x, anchor = pr-3, "end"
		}
		fmt.Fprintf(b, `<text class="fault-label" x="%.1f" y="%.1f" text-anchor="%s">%s</text>`, x, pt+24+float64(row)*11, anchor, esc(f.Label))
	}
}

func (c *lineChart) drawLine(b *strings.Builder, l line, xs, ys scale) {
	valid := func(p point) bool {
		return !math.IsNaN(p.X) && !math.IsNaN(p.Y) && !math.IsInf(p.Y, 0) &&
			(!xs.log || p.X > 0) && (!ys.log || p.Y > 0)
	}
	var d strings.Builder
	pen := false
	for _, p := range l.Pts {
		if !valid(p) {
			pen = false
			continue
		}
		cmd := "L"
		if !pen {
			cmd = "M"
		}
		fmt.Fprintf(&d, "%s%.1f %.1f", cmd, xs.at(p.X), ys.at(p.Y))
		pen = true
	}
	w := l.Width
	if w == 0 {
		w = 2
	}
	style := fmt.Sprintf(`stroke="%s" stroke-width="%g"`, l.Colour, w)
	if l.Dash != "" {
		style += fmt.Sprintf(` stroke-dasharray="%s"`, l.Dash)
	}
	if l.Faint {
		style += ` stroke-opacity="0.45"`
	}
	if d.Len() > 0 && !l.Dots {
		fmt.Fprintf(b, `<path class="data" fill="none" stroke-linejoin="round" %s d="%s"><title>%s</title></path>`, style, d.String(), esc(l.Name))
	}
	for i, p := range l.Pts {
		if !valid(p) {
			continue
		}
		x, y := xs.at(p.X), ys.at(p.Y)
		if i < len(l.Err) && l.Err[i] > 0 {
			y0, y1 := ys.at(p.Y-l.Err[i]), ys.at(p.Y+l.Err[i])
			fmt.Fprintf(b, `<path class="data err" fill="none" stroke="%s" stroke-width="1.5" d="M%.1f %.1fV%.1fM%.1f %.1fh8M%.1f %.1fh8"/>`,
				l.Colour, x, y0, y1, x-4, y0, x-4, y1)
		}
		if l.Markers || l.Dots {
			tip := l.Name + ": " + fmtNum(p.Y)
			if i < len(l.Tips) {
				tip = l.Tips[i]
			}
			cls := ""
			if l.Class != "" {
				cls = ` class="` + esc(l.Class) + `"`
			}
			fmt.Fprintf(b, `<circle%s cx="%.1f" cy="%.1f" r="3.5" fill="%s" stroke="#fff" stroke-width="1"><title>%s</title></circle>`,
				cls, x, y, l.Colour, esc(tip))
		}
	}
}

// figure draws the stacked bars, one row per category.
func (c *barChart) figure() figure {
	for i := range c.Stacks {
		if c.Stacks[i].Colour == "" {
			c.Stacks[i].Colour = colour(i)
		}
	}
	f := c.Format
	if f == nil {
		f = fmtNum
	}
	vf := c.ValueFormat
	if vf == nil {
		vf = f
	}
	longest := 0
	for _, cat := range c.Categories {
		longest = max(longest, len([]rune(cat)))
	}
	const rowH, barH = 26.0, 16.0
	pl := math.Min(math.Max(60, float64(longest)*6.6+16), 260)
	pr, pt := chartW-marginR-40, 8.0
	pb := pt + rowH*float64(len(c.Categories))
	h := pb + 40
	total := 0.0
	sums := make([]float64, len(c.Categories))
	for i := range c.Categories {
		for _, s := range c.Stacks {
			if i < len(s.Values) && s.Values[i] > 0 {
				sums[i] += s.Values[i]
			}
		}
		total = math.Max(total, sums[i])
	}
	if total <= 0 {
		total = 1
	}
	step := niceStep(total, 5)
	hi := math.Ceil(total/step-1e-9) * step
	xs := scale{d0: 0, d1: hi, r0: pl, r1: pr}

	var b strings.Builder
	svgOpen(&b, c.ID, c.Title, chartW, h)
	for _, t := range linearTicks(0, hi, 5, f) {
		x := xs.at(t.V)
		fmt.Fprintf(&b, `<line class="grid" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, x, x, pt, pb)
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x, pb+16, esc(t.Label))
	}
	for i, cat := range c.Categories {
		y := pt + rowH*float64(i) + (rowH-barH)/2
		fmt.Fprintf(&b, `<text class="tick cat" x="%.1f" y="%.1f" text-anchor="end">%s</text>`, pl-8, y+barH/2+4, esc(cat))
		x := 0.0
		for _, s := range c.Stacks {
			if i >= len(s.Values) || !(s.Values[i] > 0) {
				continue
			}
			x0, x1 := xs.at(x), xs.at(x+s.Values[i])
			fmt.Fprintf(&b, `<path class="data bar" fill="%s" d="M%.1f %.1fH%.1fV%.1fH%.1fZ"><title>%s, %s: %s</title></path>`,
				s.Colour, x0, y, x1, y+barH, x0, esc(cat), esc(s.Name), esc(vf(s.Values[i])))
			x += s.Values[i]
		}
		fmt.Fprintf(&b, `<text class="tick value" x="%.1f" y="%.1f">%s</text>`, xs.at(x)+5, y+barH/2+4, esc(vf(sums[i])))
	}
	fmt.Fprintf(&b, `<line class="axis" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, pl, pl, pt, pb)
	fmt.Fprintf(&b, `<text class="axis-label" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, (pl+pr)/2, h-6, esc(c.Label))
	b.WriteString(`</svg>`)
	var items []legendItem
	for _, s := range c.Stacks {
		items = append(items, legendItem{Name: s.Name, Colour: s.Colour, Box: true})
	}
	return figure{ID: c.ID, Title: c.Title, Note: c.Note, Legend: items, SVG: b.String()}
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
