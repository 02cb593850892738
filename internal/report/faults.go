package report

// Faults (issue 12) in the report: the end-of-run table of summary.json's
// faults, faults.csv read back, and the marks each fault leaves on the
// charts whose x axis is run time.

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"replab/internal/fault"
)

// FaultsFile is the fault log's name inside a results directory.
const FaultsFile = "faults.csv"

// readFaults reads faults.csv into r.Faults; a malformed one sets
// FaultsError (and a Problem), a missing one leaves both empty.
func (r *Results) readFaults() {
	r.Faults, r.FaultsError = readOptional(r, FaultsFile, readFaultEvents)
}

// readFaultEvents is fault.ReadCSV (which rejects a wrong header, a
// line of the wrong length and a bad number) that also rejects an
// unknown action.
func readFaultEvents(rd io.Reader) ([]fault.Event, error) {
	evs, err := fault.ReadCSV(rd)
	if err != nil {
		return nil, err
	}
	for i, e := range evs {
		if e.Action != fault.ActionApply && e.Action != fault.ActionHeal {
			return nil, fmt.Errorf("faults.csv line %d: action %q is neither %s nor %s", i+2, e.Action, fault.ActionApply, fault.ActionHeal)
		}
	}
	return evs, nil
}

// faultKey is the key under which an aggregate keeps fault i's figures
// in its CI ("faults.0.before.tps").
func faultKey(f *fault.Summary, field string) string {
	return "faults." + strconv.Itoa(f.Fault) + "." + field
}

// worstLag is the replica with the highest lag peak of f.
func worstLag(f *fault.Summary) (string, float64, bool) {
	name, peak, ok := "", 0.0, false
	for _, n := range slices.Sorted(maps.Keys(f.LagPeakMs)) {
		if v := f.LagPeakMs[n]; !ok || v > peak {
			name, peak, ok = n, v, true
		}
	}
	return name, peak, ok
}

// faultRow is one fault's cells in the terminal and HTML tables: at,
// healed, what, tps before/during/after, commit p99 before/during/after,
// recovered, the longest time without a commit, worst lag peak.
func faultRow(s *Summary, f *fault.Summary) []string {
	k := func(field string) string { return faultKey(f, field) }
	healed := "—"
	if f.HealS != nil {
		healed = shown(s, k("heal_s"), *f.HealS, "%.1f")
	}
	rec := "not within the run"
	if f.RecoverS != nil {
		rec = shown(s, k("recover_s"), *f.RecoverS, "%.1f")
	}
	if s.Kind == "repetitions" {
		// recover_s is the mean over the repetitions that recovered.
		if c, ok := s.CI[k("recover_s")]; ok && f.RecoverS != nil {
			rec += fmt.Sprintf(" (%d of %d)", c.N, completeRepetitions(s))
		}
	}
	gap := "—"
	if f.UnavailableS > 0 {
		gap = shown(s, k("unavailable_s"), f.UnavailableS, "%.2f")
	}
	lag := "—"
	if n, v, ok := worstLag(f); ok {
		lag = n + " " + shown(s, k("lag_peak_ms."+n), v, "%.1f")
	}
	return []string{shown(s, k("at_s"), f.AtS, "%.1f"), healed, f.What,
		shown(s, k("before.tps"), f.Before.TPS, "%.1f"), shown(s, k("during.tps"), f.During.TPS, "%.1f"), shown(s, k("after.tps"), f.After.TPS, "%.1f"),
		shown(s, k("before.commit_p99_ms"), f.Before.P99Ms, "%.2f"), shown(s, k("during.commit_p99_ms"), f.During.P99Ms, "%.2f"),
		shown(s, k("after.commit_p99_ms"), f.After.P99Ms, "%.2f"), rec, gap, lag}
}

// faultHead is the faults table's heading (the terminal's, in columns).
var faultHead = []string{"at s", "healed s", "fault", "tps before", "during", "after",
	"commit p99 ms before", "during", "after", "recovered after s", "no commit for s", "worst lag peak ms"}

// printFaults writes the faults table of the end-of-run summary, with a
// line for each fault that failed.
func printFaults(w io.Writer, s *Summary) {
	if len(s.Faults) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\n%s\t\n", strings.Join(faultHead, "\t"))
	for i := range s.Faults {
		fmt.Fprintf(tw, "%s\t\n", strings.Join(faultRow(s, &s.Faults[i]), "\t"))
	}
	_ = tw.Flush()
	note := "  faults: times since the measure phase began; before, during and after the fault (summary.json faults)"
	if s.Kind == "repetitions" {
		note = "  faults: means over the repetitions, per fault; recovered after: over those that recovered (k of n)"
	}
	fmt.Fprintln(w, note)
	for i := range s.Faults {
		if f := &s.Faults[i]; f.Err != "" {
			fmt.Fprintf(w, "  fault %d (%s) failed: %s\n", f.Fault, f.What, f.Err)
		}
	}
}

// faultMark is a fault on a chart with a run-time axis: a band from
// apply to heal (To +Inf: still in force when the run ended), or a line
// (To NaN) for an instantaneous one.
type faultMark struct {
	From, To float64 // seconds since the measure phase began
	Label    string
}

// shortFault is a fault's label on a chart: "primary<->asia down",
// "e1 kill".
func shortFault(what string) string {
	s := strings.TrimPrefix(strings.TrimPrefix(what, "link "), "node ")
	return strings.Replace(s, " set ", " ", 1)
}

// instantaneous says whether a fault is done at once rather than held
// until healed: a node killed, stopped or restarted (it stays down, or
// comes back, by itself). Any other fault not healed within the run was
// in force until its end.
func instantaneous(what string) bool {
	f := strings.Fields(what)
	if len(f) < 3 || f[0] != "node" {
		return false
	}
	switch f[len(f)-1] {
	case "kill", "stop", "restart":
		return true
	}
	return false
}

// unhealed is a mark's end when no heal ended it.
func unhealed(what string) float64 {
	if instantaneous(what) {
		return nan
	}
	return math.Inf(1)
}

// faultMarks pairs faults.csv's applies with their heals (a scheduled
// fault by its index, one from a second shell by what it did), else
// takes them from summary.json's faults. src says which. A heal that
// failed leaves the fault in force to the end.
func faultMarks(r *Results) (marks []faultMark, src string) {
	if len(r.Faults) > 0 {
		type key struct {
			fault int
			what  string
		}
		open := map[key][]int{}
		for _, e := range r.Faults {
			k := key{e.Fault, ""}
			if e.Fault < 0 {
				k.what = e.What
			}
			label := shortFault(e.What)
			if e.Fault < 0 {
				label += " (shell)"
			}
			switch e.Action {
			case fault.ActionApply:
				if e.Err != "" {
					label += " (failed)"
				}
				open[k] = append(open[k], len(marks))
				marks = append(marks, faultMark{From: e.AtS, To: unhealed(e.What), Label: label})
			case fault.ActionHeal:
				if q := open[k]; len(q) > 0 {
					m := &marks[q[0]]
					open[k] = q[1:]
					m.To = e.AtS
					if e.Err != "" {
						m.To, m.Label = math.Inf(1), m.Label+" (heal failed)"
					}
					continue
				}
				marks = append(marks, faultMark{From: e.AtS, To: nan, Label: label + " healed"})
			}
		}
		return marks, FaultsFile
	}
	if r.Summary == nil {
		return nil, ""
	}
	for _, f := range r.Summary.Faults {
		m := faultMark{From: f.AtS, To: unhealed(f.What), Label: shortFault(f.What)}
		if f.HealS != nil {
			m.To = *f.HealS
		}
		if f.Err != "" {
			m.Label += " (failed)"
		}
		marks = append(marks, m)
	}
	return marks, "summary.json"
}

// measureStart is when the measure phase began in seconds since the
// driver started (series.csv's clock): the start of its first measure
// second, else the spec's warmup.
func measureStart(r *Results) (float64, bool) {
	for _, s := range r.Series {
		if s.Phase == "measure" {
			return s.T - 1, true
		}
	}
	if r.WarmupS != nil {
		return *r.WarmupS, true
	}
	return 0, false
}

// addFaultMarks puts the faults on a chart whose x axis is seconds since
// the driver started, or (lab true) since the lab came up: the driver
// starts about setup_s after that (a little later: after the replicas
// have caught up and the monitors started; about 2 s in testdata/run,
// judged by its traffic). Nothing records the driver's start on the
// lab's clock exactly.
func addFaultMarks(c *lineChart, r *Results, lab bool) {
	marks, _ := faultMarks(r)
	if len(marks) == 0 {
		return
	}
	t0, ok := measureStart(r)
	if !ok {
		c.Note = strings.TrimSpace(c.Note + " The faults are not shown: neither series.csv nor the spec says when the measure phase began.")
		return
	}
	if lab {
		if r.Summary == nil || r.Summary.SetupS <= 0 {
			c.Note = strings.TrimSpace(c.Note + " The faults are not shown: summary.json has no setup_s to place them on the lab's clock.")
			return
		}
		t0 += r.Summary.SetupS
	}
	for _, m := range marks {
		c.Faults = append(c.Faults, faultMark{From: t0 + m.From, To: t0 + m.To, Label: m.Label})
	}
	note := " Red: faults, shaded from apply to heal (to the end when not healed), a line for a node killed, stopped or restarted."
	if lab {
		note += " On this clock they are placed setup_s after the lab came up: the driver starts a little later (once the replicas have caught up), so they may be drawn a second or two early."
	}
	c.Note = strings.TrimSpace(c.Note + note)
}

// faultsSection is the report's Faults section: summary.json's table, and
// faults.csv's log (what went wrong with it, if anything).
func faultsSection(r *Results) (section, bool) {
	s := r.Summary
	if (s == nil || len(s.Faults) == 0) && len(r.Faults) == 0 && r.FaultsError == "" {
		return section{}, false
	}
	sec := section{ID: "faults", Title: "Faults",
		Intro: "Each scheduled fault and the run around it: times in seconds since the measure phase began; throughput and the worst second's commit p99 before, during and after it; how long after the heal (or the fault, if not healed) throughput was back within 10 % of before's; each replica's worst lag."}
	if s != nil && s.Kind == "repetitions" {
		sec.Intro += " Means over the repetitions, per fault; recovered after: the mean over the repetitions that recovered (how many of them did)."
	}
	if r.FaultsError != "" {
		sec.Notes = append(sec.Notes, "faults.csv could not be read ("+r.FaultsError+"): the charts mark the faults from summary.json, without those from a second shell.")
	}
	if s != nil && len(s.Faults) > 0 {
		t := htmlTable{}
		for i, h := range faultHead {
			if i == 2 {
				t.Head = append(t.Head, txt(h))
				continue
			}
			t.Head = append(t.Head, numHead(h))
		}
		for i := range s.Faults {
			f := &s.Faults[i]
			var row []tcell
			for j, v := range faultRow(s, f) {
				if j == 2 {
					row = append(row, txt(v))
					continue
				}
				row = append(row, num(v))
			}
			t.Rows = append(t.Rows, row)
			if f.Err != "" {
				sec.Notes = append(sec.Notes, fmt.Sprintf("Fault %d (%s) failed: %s", f.Fault, f.What, f.Err))
			}
		}
		sec.Tables = append(sec.Tables, t)
		if ht, ok := haTable(s); ok {
			sec.Tables = append(sec.Tables, ht)
		}
	} else if s != nil {
		sec.Notes = append(sec.Notes, "summary.json has no faults: no figures around them.")
	}
	if len(r.Faults) > 0 {
		t := htmlTable{Caption: "faults.csv: every fault applied and healed",
			Head: []tcell{numHead("at s"), numHead("fault"), txt("action"), txt("what"), txt("error")},
			Note: "fault −1: made from a second shell (replab fault, replab link set)."}
		for _, e := range r.Faults {
			t.Rows = append(t.Rows, []tcell{num(fmt.Sprintf("%.1f", e.AtS)), num(strconv.Itoa(e.Fault)), txt(e.Action), txt(e.What), txt(e.Err)})
		}
		sec.Tables = append(sec.Tables, t)
	}
	return sec, true
}

// readWarmup reads the warmup from resolved-spec.json (nanoseconds, as
// spec.Run.Warmup marshals); it is only a fallback, so a missing or odd
// file is no problem.
func (r *Results) readWarmup() {
	b, err := os.ReadFile(r.file("resolved-spec.json"))
	if err != nil {
		return
	}
	var sp struct {
		Run *struct {
			Warmup *float64
		}
	}
	if json.Unmarshal(b, &sp) == nil && sp.Run != nil && sp.Run.Warmup != nil {
		w := *sp.Run.Warmup / 1e9
		r.WarmupS = &w
	}
}
