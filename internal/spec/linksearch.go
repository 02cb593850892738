package spec

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// LinkSearch is a search over one parameter of one link instead of the
// load ([run] search = "link[N].rate", "link[N].delay" or "link[N].loss"):
// on one lab, built once, the parameter is set on the running link probe
// after probe, by bisection over [Lo, Hi], until the least rate (the
// largest delay or loss) at which the run keeps within its bounds is known
// within Resolution. Values are in the parameter's unit: bits per second,
// milliseconds or percent.
type LinkSearch struct {
	Link  int    // index into Spec.Links
	Dir   string // "" (both directions), LinkForward or LinkReverse
	Param string // LinkRate, LinkDelay or LinkLoss
	// Lo < Hi: the range searched; Resolution: the search stops when the
	// bracket around the answer is no wider.
	Lo, Hi, Resolution float64
	// The bounds a probe must keep: every replica's lag p99 at most
	// MaxLagP99 (0: no bound; a tracked transaction not visible at the
	// end fails it too), commit latency p99 at most MaxP99 (0: no bound),
	// at most MaxErrorPct of its transactions failed.
	MaxLagP99   time.Duration
	MaxP99      time.Duration
	MaxErrorPct float64
	Line        int
}

// Link search parameters and directions.
const (
	LinkRate    = "rate"
	LinkDelay   = "delay"
	LinkLoss    = "loss"
	LinkForward = "forward"
	LinkReverse = "reverse"
	// DefaultLinkSearchSteps: without search_resolution the bracket is
	// narrowed to the range's width over 2^5 (five probes after its ends).
	DefaultLinkSearchSteps = 32
)

var linkSearchRE = regexp.MustCompile(`^link\[([0-9]+)\](?:\.(forward|reverse))?\.(rate|delay|loss)$`)

// IsLinkSearch says whether a [run] search value names a link parameter.
func IsLinkSearch(by string) bool { return strings.HasPrefix(strings.TrimSpace(by), "link[") }

// Path is the searched parameter as the spec writes it: "link[1].rate".
func (l *LinkSearch) Path() string {
	p := fmt.Sprintf("link[%d]", l.Link+1)
	if l.Dir != "" {
		p += "." + l.Dir
	}
	return p + "." + l.Param
}

// HigherIsBetter: a faster link keeps the bounds more easily; a longer
// delay or more loss less so. The answer is the least rate, or the
// largest delay or loss, that keeps them.
func (l *LinkSearch) HigherIsBetter() bool { return l.Param == LinkRate }

// Unit is the unit of Lo, Hi, Resolution and every probe's value.
func (l *LinkSearch) Unit() string {
	switch l.Param {
	case LinkRate:
		return "bit/s"
	case LinkDelay:
		return "ms"
	}
	return "%"
}

// Round puts a value on the grid the link takes: whole bits per second,
// microseconds, millionths of a percent.
func (l *LinkSearch) Round(v float64) float64 {
	switch l.Param {
	case LinkRate:
		return math.Round(v)
	case LinkDelay:
		return math.Round(v*1000) / 1000
	}
	return math.Round(v*1e6) / 1e6
}

// Text writes a value as a spec would: "19200bit", "150ms", "1.5%".
func (l *LinkSearch) Text(v float64) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	switch l.Param {
	case LinkRate:
		return f(math.Round(v)) + "bit"
	case LinkDelay:
		return f(math.Round(v*1000)/1000) + "ms"
	}
	return f(math.Round(v*1e6)/1e6) + "%"
}

// Setting is the change that puts the link at v, in the words of replab
// link set: "rate=19200bit".
func (l *LinkSearch) Setting(v float64) string { return l.Param + "=" + l.Text(v) }

// linkSearch reads a search over a link parameter and its keys.
func (c *decoder) linkSearch(s *Spec, p path, m map[string]any, by string) {
	sp := p.child("search")
	ls := &LinkSearch{MaxErrorPct: DefaultSearchMaxErrorPct, Line: c.d.line(sp)}
	mt := linkSearchRE.FindStringSubmatch(by)
	if mt == nil {
		c.fail(sp, m["search"], `want "link[N].rate", "link[N].delay" or "link[N].loss" (or link[N].forward.rate, …, for one direction)`)
		return
	}
	n, _ := strconv.Atoi(mt[1])
	switch {
	case n < 1 || n > len(s.Links):
		c.fail(sp, m["search"], "the spec has %d [[link]] tables; link[N] counts them from 1", len(s.Links))
		return
	}
	ls.Link, ls.Dir, ls.Param = n-1, mt[2], mt[3]
	for _, k := range []string{"search_steps", "search_min_efficiency", "search_refine"} {
		if _, present := m[k]; present {
			c.failAt(p.child(k), "belongs to a saturation search (search = \"users\" or \"rate\"); a link search takes search_range and search_resolution")
		}
	}
	if _, present := m["transactions"]; present {
		c.fail(sp, m["search"], "a link search measures each probe for the same duration: remove transactions")
	}
	rp := p.child("search_range")
	rv, present := m["search_range"]
	if !present {
		c.failAt(sp, "a link search needs its range: search_range = [%s]", linkRangeExample(ls.Param))
	} else {
		c.remember(s, rp)
		arr, ok := rv.([]any)
		var lo, hi float64
		var msg string
		if !ok || len(arr) != 2 {
			msg = "want two values, the range's ends, like [" + linkRangeExample(ls.Param) + "]"
		} else if lo, msg = linkValue(ls.Param, arr[0]); msg == "" {
			if hi, msg = linkValue(ls.Param, arr[1]); msg == "" && hi <= lo {
				msg = "the range's second end must be above its first"
			}
		}
		if msg != "" {
			c.fail(rp, rv, "%s", msg)
		} else {
			ls.Lo, ls.Hi = ls.Round(lo), ls.Round(hi)
			ls.Resolution = ls.Round((hi - lo) / DefaultLinkSearchSteps)
		}
	}
	if v, ok := c.get(p, m, "search_resolution", kString, `a value in the parameter's unit, like "1200bit", "10ms" or "0.1%"`); ok {
		kp := p.child("search_resolution")
		c.remember(s, kp)
		r, msg := linkStep(ls.Param, v.(string))
		switch {
		case msg != "":
		case r <= 0:
			msg = "want a step above 0"
		case ls.Hi > ls.Lo && r >= ls.Hi-ls.Lo:
			msg = "want a step smaller than the range (" + ls.Text(ls.Hi-ls.Lo) + ")"
		}
		if msg != "" {
			c.fail(kp, v, "%s", msg)
		} else {
			ls.Resolution = ls.Round(r)
		}
	}
	if ls.Resolution <= 0 && ls.Hi > ls.Lo {
		ls.Resolution = ls.Hi - ls.Lo // a range too small to split
	}
	dur := func(key string, dst *time.Duration) {
		if v, ok := c.get(p, m, key, kString, `a duration like "1s"`); ok {
			c.remember(s, p.child(key))
			d, msg := parseDurationMax(v.(string), time.Hour)
			if msg == "" && d <= 0 {
				msg = "want a positive duration"
			}
			if msg != "" {
				c.fail(p.child(key), v, "%s", msg)
			} else {
				*dst = d
			}
		}
	}
	dur("search_max_lag_p99", &ls.MaxLagP99)
	dur("search_max_p99", &ls.MaxP99)
	_, hasLag := m["search_max_lag_p99"]
	_, hasP99 := m["search_max_p99"]
	if !hasLag && !hasP99 {
		c.failAt(sp, `a link search needs a bound to keep: search_max_lag_p99 = "1s" (every replica's replication lag p99) or search_max_p99 = "500ms" (commit latency p99), or both`)
	}
	if v, ok := c.get(p, m, "search_max_error_pct", kNumber, "a percentage as a number, like 1"); ok {
		c.remember(s, p.child("search_max_error_pct"))
		if f := v.(float64); f < 0 || f > 100 {
			c.fail(p.child("search_max_error_pct"), m["search_max_error_pct"], "want a percentage from 0 to 100")
		} else {
			ls.MaxErrorPct = f
		}
	}
	s.Run.LinkSearch = ls
}

// checkLinkSearch refuses what a link search cannot measure, once the
// whole spec is read: faults would change the link between probes.
func (c *decoder) checkLinkSearch(s *Spec) {
	if s.Run.LinkSearch == nil || len(s.Faults) == 0 {
		return
	}
	c.failAt(path{"run", "search"}, "a link search sets the link itself probe after probe: it cannot also run [[fault]]s (line %d)", s.Faults[0].Line)
}

func linkRangeExample(param string) string {
	switch param {
	case LinkRate:
		return `"9600bit", "115200bit"`
	case LinkDelay:
		return `"0ms", "400ms"`
	}
	return `"0%", "10%"`
}

// linkValue reads one end of a link search's range: a rate (bit/s), a
// delay (ms) or a loss (%), each within what a link takes.
func linkValue(param string, v any) (float64, string) {
	str, ok := v.(string)
	if !ok {
		return 0, "want strings with units, like [" + linkRangeExample(param) + "]"
	}
	switch param {
	case LinkRate:
		r, msg := parseRate(str)
		if msg == "" && r == 0 {
			msg = "a range of rates has limited ends: not \"unlimited\""
		}
		return float64(r), msg
	case LinkDelay:
		d, msg := parseDuration(str)
		return float64(d) / 1e6, msg
	}
	f, msg := parsePercent(str)
	if msg == "" && f >= 1 {
		msg = "a loss must be below 100%"
	}
	return f * 100, msg
}

// linkStep reads a link search's resolution in the parameter's unit,
// without the range limits of a link's own values.
func linkStep(param, s string) (float64, string) {
	switch param {
	case LinkDelay:
		d, msg := parseDuration(s)
		return float64(d) / 1e6, msg
	case LinkLoss:
		f, msg := parsePercent(s)
		return f * 100, msg
	}
	num, unit, ok := splitNumber(strings.TrimSpace(s))
	mult := map[string]float64{"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[strings.ToLower(unit)]
	f, err := strconv.ParseFloat(num, 64)
	if !ok || mult == 0 || err != nil {
		return 0, "not a rate; " + rateHint
	}
	return f * mult, ""
}
