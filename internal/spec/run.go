package spec

import (
	"math"
	"net"
	"strconv"
	"strings"
	"time"
)

var (
	workloadKeyRE = identRE
	runKeys       = []string{"users", "warmup", "duration", "cooldown", "transactions", "rate", "arrival", "think", "seed", "client", "max_error_pct", "lag_interval",
		"repetitions", "confidence", "relative_error", "max_repetitions", "lag_sample", "provision", "verify", "history",
		"search", "search_steps", "search_min_efficiency", "search_max_p99", "search_max_error_pct", "search_refine",
		"search_range", "search_resolution", "search_max_lag_p99", "metrics"}
	provisions = []string{ProvisionAuto, ProvisionFast, ProvisionLink}
	arrivals   = []string{"poisson", "regular"}
)

// workloadAndRun reads [workload] and [run].
func (c *decoder) workloadAndRun(root map[string]any, s *Spec) {
	s.Run = Run{Users: DefaultUsers, Warmup: DefaultWarmup, Duration: DefaultDuration, Cooldown: DefaultCooldown,
		Arrival: "poisson", Seed: s.Lab.Seed, MaxErrorPct: DefaultMaxErrorPct, LagInterval: DefaultLagInterval,
		Repetitions: 1, MaxRepetitions: DefaultMaxRepetitions, LagSample: LagSampleAuto, Provision: ProvisionAuto}
	if v, present := root["workload"]; present {
		p := path{"workload"}
		c.remember(s, p)
		if m, ok := c.table(p, v, `write [workload] with kind = "personnel"`); ok {
			w := &Workload{Options: map[string]any{}}
			for _, k := range c.keysByPos(p, m) {
				c.remember(s, p.child(k))
				if k == "kind" {
					continue
				}
				if !workloadKeyRE.MatchString(k) {
					c.failAt(p.child(k), "not an option name")
					continue
				}
				w.Options[k] = m[k]
			}
			if kv, ok := c.get(p, m, "kind", kString, `a string like "personnel" or "kv-insert"`); ok {
				w.Kind = strings.TrimSpace(kv.(string))
			} else if _, present := m["kind"]; !present {
				c.failAt(p, `kind is required, e.g. kind = "personnel"`)
			}
			s.Workload = w
			if s.Engine == nil && s.Target == nil {
				c.failAt(p, `a workload needs an engine and nodes: add [engine] with kind = "postgres" and [node.NAME] tables`)
			}
		}
	}
	v, present := root["run"]
	if !present {
		return
	}
	p := path{"run"}
	c.remember(s, p)
	m, ok := c.table(p, v, `write [run] with users = 8 and duration = "30s"`)
	if !ok {
		return
	}
	c.checkKeys(p, m, runKeys, "[run]")
	r := &s.Run
	if s.Workload == nil {
		c.failAt(p, `[run] drives a workload: add [workload] with kind = "personnel"`)
	}
	if v, ok := c.get(p, m, "users", kInt, "a whole number of users, like 8"); ok {
		c.remember(s, p.child("users"))
		if n := v.(int64); n < 1 || n > 10000 {
			c.fail(p.child("users"), v, "want between 1 and 10000 users")
		} else {
			r.Users = int(n)
		}
	}
	dur := func(key string, dst *time.Duration, minD time.Duration) {
		if v, ok := c.get(p, m, key, kString, `a string with a unit, like "30s"`); ok {
			c.remember(s, p.child(key))
			d, msg := parseDurationMax(v.(string), 30*24*time.Hour)
			if msg == "" && d < minD {
				msg = "too short; at least " + minD.String()
			}
			if msg != "" {
				c.fail(p.child(key), v, "%s", msg)
				return
			}
			*dst = d
		}
	}
	dur("warmup", &r.Warmup, 0)
	dur("duration", &r.Duration, time.Second)
	dur("cooldown", &r.Cooldown, 0)
	dur("lag_interval", &r.LagInterval, 100*time.Microsecond)
	if v, ok := c.get(p, m, "rate", kString, `a string like "60/min" or "5000/s"`); ok {
		c.remember(s, p.child("rate"))
		rate, msg := parseTxRate(v.(string))
		if msg != "" {
			c.fail(p.child("rate"), v, "%s", msg)
		} else {
			r.RatePerSec = rate
		}
	}
	if v, ok := c.get(p, m, "transactions", kInt, "a whole number of transactions, like 100000"); ok {
		c.remember(s, p.child("transactions"))
		n := v.(int64)
		switch _, hasRate := m["rate"]; {
		case n < 1 || n > 1e12:
			c.fail(p.child("transactions"), v, "want between 1 and 1000000000000 transactions")
		case hasRate:
			c.fail(p.child("transactions"), v, "a count of transactions runs as fast as the users go (closed loop); with a rate the duration decides how many: remove one of them")
		default:
			r.Transactions = n
		}
	}
	if v, ok := c.get(p, m, "arrival", kString, `"poisson" or "regular"`); ok {
		c.remember(s, p.child("arrival"))
		a := strings.TrimSpace(v.(string))
		if !contains(arrivals, a) {
			c.fail(p.child("arrival"), v, `want "poisson" (random arrivals at the rate) or "regular" (evenly spaced)`)
		} else {
			r.Arrival = a
		}
		if _, hasRate := m["rate"]; !hasRate {
			c.fail(p.child("arrival"), v, `arrival applies to open loop: set rate = "60/min" too`)
		}
	}
	if v, ok := c.get(p, m, "think", kString, `a duration like "100ms" or a range like "50ms..200ms"`); ok {
		c.remember(s, p.child("think"))
		lo, hi, msg := parseThink(v.(string))
		if msg != "" {
			c.fail(p.child("think"), v, "%s", msg)
		} else {
			r.ThinkMin, r.ThinkMax = lo, hi
		}
		if _, hasRate := m["rate"]; hasRate {
			c.fail(p.child("think"), v, "think time is for closed loop (users); with a rate the schedule decides when transactions start: remove one of them")
		}
	}
	if v, ok := c.get(p, m, "seed", kInt, "an integer"); ok {
		r.Seed = v.(int64)
	}
	if v, ok := c.get(p, m, "client", kString, `a site name like "primary"`); ok {
		c.remember(s, p.child("client"))
		if s.Target != nil {
			c.fail(p.child("client"), v, "in target mode replab runs where it is started: say where that is with [target] site")
		}
		name := strings.TrimSpace(v.(string))
		found := false
		var names []string
		for _, st := range s.Sites {
			names = append(names, st.Name)
			found = found || st.Name == name
		}
		if !found && s.Target == nil {
			c.fail(p.child("client"), v, "unknown site%s; defined sites: %s", didYouMean(name, names), strings.Join(names, ", "))
		}
		r.Client = name
	}
	if v, ok := c.get(p, m, "metrics", kString, `an address like "127.0.0.1:9464" or ":9464"`); ok {
		c.remember(s, p.child("metrics"))
		addr := strings.TrimSpace(v.(string))
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			c.fail(p.child("metrics"), v, `want host:port to serve live metrics on, like "127.0.0.1:9464" or ":9464"`)
		}
		r.Metrics = addr
	}
	c.repetitions(s, p, m)
	c.search(s, p, m)
	c.lagSample(s, p, m)
	if v, ok := c.get(p, m, "verify", kBool, "true or false"); ok {
		c.remember(s, p.child("verify"))
		r.Verify = v.(bool)
	}
	if v, ok := c.get(p, m, "history", kBool, "true or false"); ok {
		c.remember(s, p.child("history"))
		r.History = v.(bool)
	}
	if v, ok := c.get(p, m, "provision", kString, `"auto", "fast" or "link"`); ok {
		c.remember(s, p.child("provision"))
		pv := strings.TrimSpace(v.(string))
		if !contains(provisions, pv) {
			c.fail(p.child("provision"), v, `want "auto" (over unshaped links when the configured ones would take long), "fast" (always over unshaped links) or "link" (across the configured links)%s`, didYouMean(pv, provisions))
		} else {
			r.Provision = pv
		}
	}
	if v, ok := c.get(p, m, "max_error_pct", kNumber, "a percentage as a number, like 20"); ok {
		c.remember(s, p.child("max_error_pct"))
		if f := v.(float64); f <= 0 || f > 100 {
			c.fail(p.child("max_error_pct"), m["max_error_pct"], "want a number above 0 and at most 100")
		} else {
			r.MaxErrorPct = f
		}
	}
}

// lagSample reads lag_sample: "all", "auto" or a whole number N ≥ 1.
func (c *decoder) lagSample(s *Spec, p path, m map[string]any) {
	v, present := m["lag_sample"]
	if !present {
		return
	}
	kp := p.child("lag_sample")
	c.remember(s, kp)
	const accepted = `"all" (every transaction, by commit position where the engine can), "auto" (stamps, replab chooses N) or a whole number N of 1 or more (stamp every Nth transaction of each user; 1 = all)`
	switch x := v.(type) {
	case string:
		switch strings.TrimSpace(x) {
		case "all":
			s.Run.LagSample = LagSampleAll
		case "auto":
			s.Run.LagSample = LagSampleAuto
		default:
			c.fail(kp, v, "want %s", accepted)
		}
	case int64:
		switch {
		case x < 1:
			c.fail(kp, v, `want 1 (every transaction) or more, "all" or "auto"`)
		case x > MaxLagSample:
			c.fail(kp, v, "at most %d", MaxLagSample)
		default:
			s.Run.LagSample = int(x)
		}
	default:
		c.fail(kp, v, "want %s", accepted)
	}
}

// parseTxRate reads "60/min", "5000/s", "10/h" into transactions per second.
func parseTxRate(s string) (float64, string) {
	const hint = `want a rate like "60/min", "5000/s" or "10/h"`
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, "missing \"/unit\"; " + hint
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) || n <= 0 {
		return 0, "not a positive number; " + hint
	}
	var per float64
	switch strings.ToLower(strings.TrimSpace(unit)) {
	case "s", "sec", "second":
		per = 1
	case "min", "minute":
		per = 60
	case "h", "hour":
		per = 3600
	default:
		return 0, "unknown unit " + strconvQuote(unit) + "; " + hint
	}
	r := n / per
	if r > 1e6 {
		return 0, "at most 1000000/s"
	}
	return r, ""
}

func strconvQuote(s string) string { return strconv.Quote(s) }

// parseThink reads "100ms" (fixed) or "50ms..200ms" (uniform range).
func parseThink(s string) (time.Duration, time.Duration, string) {
	if lo, hi, ok := strings.Cut(s, ".."); ok {
		a, msg := parseDurationMax(strings.TrimSpace(lo), time.Hour)
		if msg != "" {
			return 0, 0, msg
		}
		b, msg := parseDurationMax(strings.TrimSpace(hi), time.Hour)
		if msg != "" {
			return 0, 0, msg
		}
		if b < a {
			return 0, 0, "the range's end is before its start"
		}
		return a, b, ""
	}
	d, msg := parseDurationMax(strings.TrimSpace(s), time.Hour)
	return d, d, msg
}

// repetitions reads repetitions, confidence, relative_error and
// max_repetitions.
func (c *decoder) repetitions(s *Spec, p path, m map[string]any) {
	r := &s.Run
	if v, ok := c.get(p, m, "repetitions", kInt, "a whole number like 5"); ok {
		c.remember(s, p.child("repetitions"))
		if n := v.(int64); n < 1 || n > 1000 {
			c.fail(p.child("repetitions"), v, "want between 1 and 1000")
		} else {
			r.Repetitions = int(n)
		}
	}
	if v, ok := c.get(p, m, "confidence", kNumber, "a level like 0.95"); ok {
		c.remember(s, p.child("confidence"))
		if f := v.(float64); f < 0.5 || f >= 1 {
			c.fail(p.child("confidence"), m["confidence"], "want a confidence level from 0.5 to below 1, like 0.95")
		} else {
			r.Confidence = f
		}
	}
	if v, ok := c.get(p, m, "relative_error", kNumber, "a fraction like 0.05"); ok {
		c.remember(s, p.child("relative_error"))
		if f := v.(float64); f <= 0 || f >= 1 {
			c.fail(p.child("relative_error"), m["relative_error"], "want a fraction above 0 and below 1, like 0.05 (5 percent)")
		} else {
			r.RelativeError = f
		}
	}
	if v, ok := c.get(p, m, "max_repetitions", kInt, "a whole number like 30"); ok {
		c.remember(s, p.child("max_repetitions"))
		if n := v.(int64); n < 2 || n > 1000 {
			c.fail(p.child("max_repetitions"), v, "want between 2 and 1000")
		} else {
			r.MaxRepetitions = int(n)
		}
	}
	_, hasConf := m["confidence"]
	_, hasErr := m["relative_error"]
	switch {
	case hasConf && !hasErr:
		c.failAt(p.child("confidence"), "a confidence target needs relative_error too, e.g. relative_error = 0.05")
	case hasErr && !hasConf:
		c.failAt(p.child("relative_error"), "a relative error target needs confidence too, e.g. confidence = 0.95")
	}
	if hasConf && r.Repetitions < 2 {
		// The pilot needs at least two runs to estimate the spread.
		r.Repetitions = DefaultPilot
	}
	if r.Repetitions > r.MaxRepetitions {
		r.MaxRepetitions = r.Repetitions
	}
}

// HistoryOn says whether a run records its history (history.jsonl) and
// checks it: [run] history as written, or byDefault when it is not (the
// workloads made for checking record by default).
func (s *Spec) HistoryOn(byDefault bool) bool {
	if s.Written("run.history") {
		return s.Run.History
	}
	return s.Run.History || byDefault
}

// VerifyOn says whether a run journals its commits for verification:
// [run] verify as written, or on when the spec schedules faults.
func (s *Spec) VerifyOn() bool {
	if s.Written("run.verify") {
		return s.Run.Verify
	}
	return s.Run.Verify || len(s.Faults) > 0
}
