package report

// The link fact check (issue 34) in the terminal summary and the run
// page: what each direction was configured to do next to what it
// delivered (monitor.LinkCheck).

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"replab/internal/units"
)

// printLinkChecks writes one warning line per direction that strayed
// past a tolerance, nothing when all passed.
func printLinkChecks(w io.Writer, s *Summary) {
	for _, k := range slices.Sorted(maps.Keys(s.Links)) {
		c := s.Links[k].Check
		if c == nil || c.OK() {
			continue
		}
		why := strings.Join(c.Flags, "; ")
		if why == "" { // an aggregate keeps the verdicts, not the sentences
			var what []string
			for _, x := range []struct {
				ok   bool
				name string
			}{{c.DelayOK, "delay"}, {c.LossOK, "loss"}, {c.RateOK, "rate"}} {
				if !x.ok {
					what = append(what, x.name)
				}
			}
			why = strings.Join(what, ", ") + " in some repetition (their reports say how)"
		}
		fmt.Fprintf(w, "  warning: link %s strayed from its configuration: %s\n", k, why)
	}
}

// linkFactsTable is "Links: configured vs delivered".
func linkFactsTable(s *Summary) (htmlTable, bool) {
	t := htmlTable{Caption: meansCaption(s, "Links: configured vs delivered"),
		Head: []tcell{txt("direction"), numHead("delay"), numHead("delivered p50"), numHead("p99"), numHead("lateness p99"),
			numHead("loss"), numHead("delivered"), numHead("95 % interval"), numHead("rate"), numHead("highest second"),
			numHead("queue drops"), txt("check")}}
	for _, d := range sortedKeys(s.Links) {
		l := s.Links[d]
		if l.Check == nil {
			continue // written before the fact check
		}
		k := "links." + d + "."
		msf := func(v float64) string { return ms(v) + " ms" }
		rate, peak := "unlimited", num("")
		if l.RateBps > 0 {
			rate = units.Bits(float64(l.RateBps))
		}
		peak = fig(s, k+"rate_peak_second_bps", l.RatePeakSecondBps, units.Bits, false)
		verdict := tcell{Text: "ok"}
		if !l.Check.OK() {
			verdict = tcell{Text: "strayed", Class: "wrap", Title: strings.Join(l.Check.Flags, "; ")}
		} else if len(l.Check.Unchecked) > 0 {
			verdict = tcell{Text: "ok (partly unchecked)", Class: "wrap", Title: strings.Join(l.Check.Unchecked, "; ")}
		}
		interval := num("—")
		if l.LossDrawnPackets > 0 && s.Kind != "repetitions" {
			interval = num(fmt.Sprintf("%s–%s %%", pct(l.LossCI95LowPct), pct(l.LossCI95HighPct)))
		}
		t.Rows = append(t.Rows, []tcell{txt(d), num(msf(l.DelayMs)), fig(s, k+"delay_p50_ms", l.DelayP50Ms, msf, false),
			fig(s, k+"delay_p99_ms", l.DelayP99Ms, msf, false), fig(s, k+"lateness_p99_us", l.LatenessP99Us, func(v float64) string { return ms(v) + " µs" }, false),
			num(pct(l.LossConfiguredPct) + " %"), fig(s, k+"loss_delivered_pct", l.LossDeliveredPct, func(v float64) string { return pct(v) + " %" }, false),
			interval, num(rate), peak, fig(s, k+"dropped_queue_packets", float64(l.DroppedQueuePackets), group, false), verdict})
	}
	return t, len(t.Rows) > 0
}

// linkClassTable is the delivered bytes by traffic class.
func linkClassTable(s *Summary) (htmlTable, bool) {
	t := htmlTable{Caption: meansCaption(s, "Bytes by traffic class"),
		Head: []tcell{txt("direction"), numHead("replication"), numHead("client"), numHead("storage"), numHead("other"), numHead("all")}}
	for _, d := range sortedKeys(s.Links) {
		l := s.Links[d]
		if l.Check == nil {
			continue
		}
		k := "links." + d + ".bytes_by_class."
		b := l.BytesByClass
		t.Rows = append(t.Rows, []tcell{txt(d), fig(s, k+"replication", float64(b.Replication), units.Bytes, false),
			fig(s, k+"client", float64(b.Client), units.Bytes, false), fig(s, k+"storage", float64(b.Storage), units.Bytes, false),
			fig(s, k+"other", float64(b.Other), units.Bytes, false), fig(s, "links."+d+".bytes", float64(l.Bytes), units.Bytes, false)})
	}
	return t, len(t.Rows) > 0
}
