package report

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// minLagSamples is how many lags a replica needs before its p99 means
// something: with fewer, the summary suggests tracking more.
const minLagSamples = 100

// fewLagSamples names the replicas whose lag rests on fewer than
// minLagSamples sampled transactions ("" when none, or when every
// transaction was tracked: then the run was simply short or slow).
func fewLagSamples(s *Summary) string {
	var few []string
	for _, n := range slices.Sorted(maps.Keys(s.Replicas)) {
		r := s.Replicas[n]
		if r != nil && r.SampleEvery > 1 && r.LagMethod != "positions" && r.LagMs.Count < minLagSamples {
			few = append(few, fmt.Sprintf("%s (%d)", n, r.LagMs.Count))
		}
	}
	if len(few) == 0 {
		return ""
	}
	return fmt.Sprintf("few lag samples at %s: the sample is per user, and users that commit rarely (e.g. across a WAN link) are tracked rarely; set [run] lag_sample = 1 to track every transaction", strings.Join(few, ", "))
}

// catchUpNote says how long each replica took to apply the measure
// phase's last tracked transaction after its COMMIT: "caught up after the
// measurement (…): t1 1.240 s, t2 0.004 s". Only when one of them took
// 1 ms or more.
func catchUpNote(s *Summary) string {
	var parts []string
	late := false
	for _, n := range slices.Sorted(maps.Keys(s.Replicas)) {
		r := s.Replicas[n]
		switch {
		case r == nil:
		case r.NotCaughtUpS != nil:
			late = true
			parts = append(parts, fmt.Sprintf("%s not within the %.0f s waited", n, *r.NotCaughtUpS))
		case r.CatchUpMs != nil:
			late = late || *r.CatchUpMs >= 1
			parts = append(parts, fmt.Sprintf("%s %.3f s", n, *r.CatchUpMs/1000))
		}
	}
	if !late {
		return ""
	}
	return "caught up after the measurement (its last tracked commit visible): " + strings.Join(parts, ", ")
}

// LagSampleNote says how the lag figures were measured: by commit
// position, every transaction ("lag of every transaction, by commit
// position (WAL replay LSN)"), and by stamps when they are a sample ("lag
// tracked for every 11th transaction of each user (auto: ≤ 10 tracked/s
// at the warmup's rate)"); with both, at which replicas. "" when every
// transaction was stamped.
func LagSampleNote(s *Summary) string {
	var byPos, stamped []string
	var r *Replica // the first stamped replica: the sample is the same at all
	position := ""
	for _, n := range slices.Sorted(maps.Keys(s.Replicas)) {
		x := s.Replicas[n]
		switch {
		case x == nil:
		case x.LagMethod == "positions":
			byPos = append(byPos, n)
			if position == "" || position == x.LagPosition {
				position = x.LagPosition
			} else {
				position = "each replica's applied position"
			}
		default:
			stamped = append(stamped, n)
			if r == nil {
				r = x
			}
		}
	}
	if len(byPos) == 0 {
		return stampNote(s, r)
	}
	note := "lag of every transaction, by commit position"
	if position != "" {
		note += " (" + position + ")"
	}
	if len(stamped) == 0 {
		return note
	}
	note += " at " + strings.Join(byPos, ", ") + "; by stamps at " + strings.Join(stamped, ", ")
	if sn := stampNote(s, r); sn != "" {
		note += ": " + sn
	}
	return note
}

// stampNote is LagSampleNote for stamped replicas, r the first.
func stampNote(s *Summary, r *Replica) string {
	if r == nil {
		return ""
	}
	how := fmt.Sprintf("lag_sample = %d", r.SampleEvery)
	if r.Sample == "auto" {
		// N is chosen from a rate known before the measure phase.
		basis := "the warmup's rate"
		if s.Mode == "open" {
			basis = "the target rate"
		}
		how = fmt.Sprintf("auto: ≤ %s tracked/s at %s", strconvFloat(r.SampleBudgetPerS), basis)
	}
	if r.SampleEvery > 1 {
		return fmt.Sprintf("lag tracked for every %s transaction of each user (%s)", ordinal(r.SampleEvery), how)
	}
	// Repetitions whose automatic samples differ.
	lo, hi := 0, 0
	for _, rep := range s.Repetitions {
		if n := rep.LagSampleEvery; n > 0 {
			if lo == 0 || n < lo {
				lo = n
			}
			hi = max(hi, n)
		}
	}
	if r.SampleEvery == 0 && hi > 1 {
		return fmt.Sprintf("lag tracked for every Nth transaction of each user, N from %d to %d by repetition (%s)", lo, hi, how)
	}
	return ""
}

// LagClockNotes say, per replica in target mode, how its lags were timed
// and how far they may be off.
func LagClockNotes(s *Summary) []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(s.Replicas)) {
		r := s.Replicas[n]
		if r == nil || r.LagClock == nil {
			continue
		}
		lc := r.LagClock
		switch lc.Method {
		case "remote-poll":
			out = append(out, fmt.Sprintf("lag at %s polled from this host: %.2f ms one-way taken off each poll, ± %.2f ms (half the spread of poll round trips)", n, lc.CorrectionMs, lc.BoundMs))
		case "agent":
			out = append(out, fmt.Sprintf("lag at %s polled by its agent: clock offset %+.2f ms, ± %.2f ms", n, lc.CorrectionMs, lc.BoundMs))
		default:
			out = append(out, fmt.Sprintf("lag at %s: %s, %.2f ms, ± %.2f ms", n, lc.Method, lc.CorrectionMs, lc.BoundMs))
		}
	}
	return out
}

// ordinal writes 2nd, 3rd, 4th, 11th, 21st.
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

func strconvFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// machineWhy says why a run was machine-bound.
func machineWhy(s *Summary) string {
	if s.Machine != nil && s.Machine.Why != "" {
		return s.Machine.Why
	}
	return "the machine's CPU was the limit"
}

// machineBanner is the report's banner for a machine-bound run; "" for
// another.
func machineBanner(s *Summary) string {
	if !s.MachineBound {
		return ""
	}
	return "Machine-bound: " + machineWhy(s) + ". This result measures this machine, not the modelled system."
}
