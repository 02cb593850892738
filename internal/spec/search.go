package spec

import (
	"fmt"
	"strings"
	"time"
)

// search reads [run] search and its search_* keys.
func (c *decoder) search(s *Spec, p path, m map[string]any) {
	v, ok := c.get(p, m, "search", kString, `"users", "rate" or "link[N].rate"`)
	if !ok {
		for _, k := range []string{"search_steps", "search_min_efficiency", "search_max_p99", "search_max_error_pct", "search_refine"} {
			if _, present := m[k]; present {
				c.failAt(p.child(k), `%s belongs to a saturation search: add search = "users" (or "rate")`, k)
			}
		}
		for _, k := range []string{"search_range", "search_resolution", "search_max_lag_p99"} {
			if _, present := m[k]; present {
				c.failAt(p.child(k), `%s belongs to a link search: add search = "link[1].rate" (or .delay, .loss)`, k)
			}
		}
		return
	}
	sp := p.child("search")
	c.remember(s, sp)
	by := strings.TrimSpace(v.(string))
	if IsLinkSearch(by) {
		c.linkSearch(s, p, m, by)
		return
	}
	for _, k := range []string{"search_range", "search_resolution", "search_max_lag_p99"} {
		if _, present := m[k]; present {
			c.failAt(p.child(k), `%s belongs to a link search (search = "link[1].rate"), not to a saturation search`, k)
		}
	}
	sr := &Search{By: by, MinEfficiency: DefaultSearchMinEfficiency, MaxErrorPct: DefaultSearchMaxErrorPct, Line: c.d.line(sp)}
	_, hasRate := m["rate"]
	if _, hasCount := m["transactions"]; hasCount {
		c.fail(sp, v, "a saturation search measures each step for the same duration: remove transactions")
	}
	switch by {
	case SearchUsers:
		if hasRate {
			c.fail(sp, v, `a search by users is closed loop: remove rate, or search = "rate"`)
		}
	case SearchRate:
	default:
		c.fail(sp, v, `want "users" (more users each step, closed loop), "rate" (a higher open-loop rate each step) or a link's parameter, "link[N].rate", "link[N].delay" or "link[N].loss" (a link search)`)
		return
	}
	kp := p.child("search_steps")
	if sv, present := m["search_steps"]; present {
		c.remember(s, kp)
		sr.Steps = c.searchSteps(kp, sv, by)
	} else if by == SearchUsers {
		sr.Steps = DefaultSearchUsers
	} else {
		c.failAt(sp, `a search by rate needs its steps: search_steps = ["100/s", "200/s", "400/s"]`)
	}
	if v, ok := c.get(p, m, "search_min_efficiency", kNumber, "a fraction like 0.5"); ok {
		c.remember(s, p.child("search_min_efficiency"))
		if f := v.(float64); f <= 0 || f > 1 {
			c.fail(p.child("search_min_efficiency"), m["search_min_efficiency"], "want a fraction above 0 and at most 1: the share of the load's rise that throughput must follow")
		} else {
			sr.MinEfficiency = f
		}
	}
	if v, ok := c.get(p, m, "search_max_p99", kString, `a duration like "500ms"`); ok {
		c.remember(s, p.child("search_max_p99"))
		d, msg := parseDurationMax(v.(string), time.Hour)
		if msg == "" && d <= 0 {
			msg = "want a positive duration"
		}
		if msg != "" {
			c.fail(p.child("search_max_p99"), v, "%s", msg)
		} else {
			sr.MaxP99 = d
		}
	}
	if v, ok := c.get(p, m, "search_max_error_pct", kNumber, "a percentage as a number, like 1"); ok {
		c.remember(s, p.child("search_max_error_pct"))
		if f := v.(float64); f < 0 || f > 100 {
			c.fail(p.child("search_max_error_pct"), m["search_max_error_pct"], "want a percentage from 0 to 100")
		} else {
			sr.MaxErrorPct = f
		}
	}
	if v, ok := c.get(p, m, "search_refine", kInt, "a whole number of probes like 3 (0: none)"); ok {
		c.remember(s, p.child("search_refine"))
		if n := v.(int64); n < 0 || n > MaxSearchRefine {
			c.fail(p.child("search_refine"), v, "want a number of probes from 0 (none) to %d: each halves the bracket between the knee and the exhaust point", MaxSearchRefine)
		} else {
			sr.Refine = int(n)
		}
	}
	s.Run.Search = sr
}

// searchSteps reads the steps: whole numbers of users, or rates like
// "100/s"; at least two, each above the one before.
func (c *decoder) searchSteps(kp path, v any, by string) []float64 {
	arr, ok := v.([]any)
	if !ok || len(arr) < 2 {
		c.fail(kp, v, "want a list of at least two steps, like %s", stepsExample(by))
		return nil
	}
	var out []float64
	for i, e := range arr {
		var x float64
		switch by {
		case SearchUsers:
			n, ok := e.(int64)
			if !ok || n < 1 || n > 10000 {
				c.fail(kp, v, "step %d: want a whole number of users from 1 to 10000, like %s", i+1, stepsExample(by))
				return nil
			}
			x = float64(n)
		default:
			str, ok := e.(string)
			if !ok {
				c.fail(kp, v, "step %d: want a rate like \"100/s\", like %s", i+1, stepsExample(by))
				return nil
			}
			r, msg := parseTxRate(str)
			if msg != "" {
				c.fail(kp, v, "step %d: %s", i+1, msg)
				return nil
			}
			x = r
		}
		if len(out) > 0 && x <= out[len(out)-1] {
			c.fail(kp, v, "step %d (%s) is not above the step before: the load must rise at each step", i+1, fmt.Sprint(e))
			return nil
		}
		out = append(out, x)
	}
	return out
}

func stepsExample(by string) string {
	if by == SearchUsers {
		return "[3, 10, 30, 100, 300]"
	}
	return `["100/s", "200/s", "400/s"]`
}
