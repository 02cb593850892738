package fault

import "math"

// Second is one second of the driver's series, placed on the measure
// phase's time axis: it covers [S, S+1) seconds since the phase began.
type Second struct {
	S       float64
	Commits int64
	Errors  int64
	P99Ms   float64
	MaxMs   float64
}

// LagSecond is one second of a replica's lag series, on the same axis.
type LagSecond struct {
	S     float64
	P99Ms float64
}

// Gap is a stretch without a commit, on the same axis.
type Gap struct{ FromS, ToS float64 }

// Backlog is one sample of a replica's backlog as the engine reports it,
// on the same axis.
type Backlog struct {
	S     float64
	Value float64
	Unit  string
}

// Span is one fault as it happened: applied at AtS, healed at HealS
// (nil: not healed within the run).
type Span struct {
	Fault int
	What  string
	AtS   float64
	HealS *float64
	Err   string
}

// BeforeS is how far back the window before a fault reaches at most.
const BeforeS = 10

// RecoveredShare is the share of the throughput before a fault that counts
// as recovered.
const RecoveredShare = 0.9

// Measure summarises the run around one fault. series and lag are the
// run's seconds; floorS is where the window before may start at the
// earliest (the heal of an earlier fault, or the run's start), endS where
// the run's series end; lagToS where the lag peak's window ends: the next
// fault (math.Inf(1) when none).
//
// The lag peak is not cut where After ends: a replica's lag series is by
// the second a transaction became visible there, and what a fault holds
// back (the commits made while a standby was down) becomes visible only
// once the replica is back, which may be after After, after the run's
// series end (in the catch-up the runner waits for before measuring), or
// long after a slow restart. Cut at After's end (never later than the
// cooldown's), a standby that caught up only after it showed the lag of
// the commits made after its return alone.
func Measure(sp Span, series []Second, gaps []Gap, lag map[string][]LagSecond, backlog map[string][]Backlog, floorS, endS, lagToS float64) Summary {
	sum := Summary{Fault: sp.Fault, What: sp.What, AtS: sp.AtS, HealS: sp.HealS, Err: sp.Err}
	beforeFrom := math.Max(sp.AtS-BeforeS, floorS)
	duringTo := sp.AtS + 1 // an instantaneous fault: the second after it
	if sp.HealS != nil {
		duringTo = math.Max(*sp.HealS, sp.AtS+1)
	}
	afterTo := math.Min(duringTo+math.Max(sp.AtS-beforeFrom, 1), endS)
	sum.Before = window(series, beforeFrom, sp.AtS)
	sum.During = window(series, sp.AtS, duringTo)
	sum.After = window(series, duringTo, afterTo)

	from := sp.AtS
	if sp.HealS != nil {
		from = *sp.HealS
	}
	if sum.Before.TPS > 0 {
		for _, s := range series {
			if s.S+0.5 < from || s.S+1 > endS+1e-9 {
				continue
			}
			if float64(s.Commits) >= RecoveredShare*sum.Before.TPS {
				r := math.Max(s.S-from, 0)
				sum.RecoverS = &r
				break
			}
		}
	}
	for _, g := range gaps {
		if g.ToS > sp.AtS && g.FromS < afterTo {
			sum.UnavailableS = math.Max(sum.UnavailableS, g.ToS-g.FromS)
		}
	}
	for name, secs := range lag {
		var peak, before float64
		var seen, seenBefore bool
		for _, l := range secs {
			mid := l.S + 0.5
			if mid >= sp.AtS && mid < lagToS {
				peak, seen = math.Max(peak, l.P99Ms), true
			}
			if mid >= beforeFrom && mid < sp.AtS {
				before, seenBefore = math.Max(before, l.P99Ms), true
			}
		}
		if seen {
			if sum.LagPeakMs == nil {
				sum.LagPeakMs = map[string]float64{}
			}
			sum.LagPeakMs[name] = peak
		}
		if seenBefore {
			if sum.LagBeforeMs == nil {
				sum.LagBeforeMs = map[string]float64{}
			}
			sum.LagBeforeMs[name] = before
		}
	}
	for name, samples := range backlog {
		for _, b := range samples {
			if b.S < sp.AtS || b.S >= afterTo {
				continue
			}
			if sum.BacklogPeak == nil {
				sum.BacklogPeak, sum.BacklogUnit = map[string]float64{}, map[string]string{}
			}
			if b.Value >= sum.BacklogPeak[name] {
				sum.BacklogPeak[name], sum.BacklogUnit[name] = b.Value, b.Unit
			}
		}
	}
	return sum
}

// window sums the seconds whose middle is in [from, to).
func window(series []Second, from, to float64) Window {
	w := Window{FromS: from, ToS: to}
	var n int
	var commits int64
	for _, s := range series {
		if mid := s.S + 0.5; mid < from || mid >= to {
			continue
		}
		n++
		commits += s.Commits
		w.Errors += s.Errors
		w.P99Ms = math.Max(w.P99Ms, s.P99Ms)
		w.MaxMs = math.Max(w.MaxMs, s.MaxMs)
	}
	if n > 0 {
		w.TPS = float64(commits) / float64(n)
	}
	return w
}

// Spans pairs each scheduled fault's apply and heal events.
func Spans(events []Event) []Span {
	var out []Span
	idx := map[int]int{}
	for _, e := range events {
		if e.Fault < 0 {
			continue // from a second shell: logged, not measured
		}
		switch e.Action {
		case ActionApply:
			idx[e.Fault] = len(out)
			out = append(out, Span{Fault: e.Fault, What: e.What, AtS: e.AtS, Err: e.Err})
		case ActionHeal:
			if k, ok := idx[e.Fault]; ok {
				h := e.AtS
				out[k].HealS = &h
				if e.Err != "" && out[k].Err == "" {
					out[k].Err = "heal: " + e.Err
				}
			}
		}
	}
	return out
}

// MeasureAll measures every scheduled fault. A fault's window before
// starts no earlier than the heal of any fault that ended before it began
// (faults at the same time, or overlapping ones, share what was before
// them); its lag peak's window ends where the next fault begins.
func MeasureAll(events []Event, series []Second, gaps []Gap, lag map[string][]LagSecond, backlog map[string][]Backlog, startS, endS float64) []Summary {
	spans := Spans(events)
	var out []Summary
	for _, sp := range spans {
		floor, next := startS, math.Inf(1)
		for _, o := range spans {
			end := o.AtS
			if o.HealS != nil {
				end = *o.HealS
			}
			if end <= sp.AtS && o.Fault != sp.Fault {
				floor = math.Max(floor, end)
			}
			if o.AtS > sp.AtS {
				next = math.Min(next, o.AtS)
			}
		}
		out = append(out, Measure(sp, series, gaps, lag, backlog, floor, endS, next))
	}
	return out
}
