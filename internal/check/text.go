package check

import (
	"fmt"
	"io"
	"strings"

	"replab/internal/history"
)

// WriteText prints the verdict for a terminal: the counts, the models,
// the session guarantees, what was skipped, then up to maxPerClass
// witnesses of each class found (0: none, only the counts).
func (r *Result) WriteText(w io.Writer, maxPerClass int) error {
	var b strings.Builder
	o := r.Operations
	fmt.Fprintf(&b, "checked %d committed transactions (operations: %d ok, %d fail, %d info", r.TransactionsChecked, o.OK, o.Fail, o.Info)
	if o.Skipped > 0 {
		fmt.Fprintf(&b, ", %d not checked", o.Skipped)
	}
	fmt.Fprintf(&b, "; keys: %d list, %d register)\n", r.Keys.List, r.Keys.Register)
	if r.HistoryCutShort != nil {
		fmt.Fprintf(&b, "the %s; what came before was checked\n", r.HistoryCutShort.Message)
	}
	if r.InfoUndecided > 0 {
		fmt.Fprintf(&b, "%d info operations undecided: no read observed their writes, so whether they committed is unknown and they are left out\n", r.InfoUndecided)
	}
	t := 0
	for _, c := range r.Classes() {
		t += r.Anomalies[c]
	}
	partly := ""
	if !r.Complete {
		partly = " (in the part checked)"
	}
	fmt.Fprintf(&b, "strongest model satisfied%s: %s\n", partly, r.StrongestSatisfied)
	fmt.Fprintf(&b, "weakest model violated: %s\n", r.WeakestViolated)
	if len(r.ModelsViolated) > 0 {
		fmt.Fprintf(&b, "  violated: %s\n", strings.Join(r.ModelsViolated, ", "))
	}
	if len(r.ModelsSatisfied) > 0 {
		fmt.Fprintf(&b, "  satisfied%s: %s\n", partly, strings.Join(r.ModelsSatisfied, ", "))
	}
	if len(r.SessionGuaranteesViolated) == 0 {
		fmt.Fprintf(&b, "session guarantees: all hold%s (%s)\n", partly, strings.Join(r.SessionGuaranteesSatisfied, ", "))
	} else {
		fmt.Fprintf(&b, "session guarantees violated: %s", strings.Join(r.SessionGuaranteesViolated, ", "))
		if len(r.SessionGuaranteesSatisfied) > 0 {
			fmt.Fprintf(&b, "; hold%s: %s", partly, strings.Join(r.SessionGuaranteesSatisfied, ", "))
		}
		b.WriteString("\n")
	}
	if t == 0 {
		b.WriteString("anomalies: none found\n")
	} else {
		var parts []string
		for _, c := range r.Classes() {
			parts = append(parts, fmt.Sprintf("%s ×%d", c, r.Anomalies[c]))
		}
		fmt.Fprintf(&b, "anomalies: %s\n", strings.Join(parts, ", "))
	}
	if !r.Complete {
		b.WriteString("checked in part:\n")
		for _, s := range r.Skipped {
			fmt.Fprintf(&b, "  - %s\n", s)
		}
	}
	if maxPerClass > 0 {
		t0 := r.TimeOriginNs
		for _, c := range r.Classes() {
			ws := r.Witnesses[c]
			n := min(len(ws), maxPerClass)
			fmt.Fprintf(&b, "\n%s: %d found, showing %d\n", c, r.Anomalies[c], n)
			for i, wi := range ws[:n] {
				writeWitness(&b, i+1, wi, t0)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeWitness(b *strings.Builder, n int, w Witness, t0 int64) {
	fmt.Fprintf(b, "  %d. %s\n", n, w.Summary)
	for _, l := range w.Lines(t0) {
		fmt.Fprintf(b, "     %s\n", l)
	}
}

// Lines are the witness's evidence as the terminal prints it under its
// summary, one line each: its transactions (times in seconds after t0,
// the Result's TimeOriginNs), its edges with why each exists, its
// details.
func (w Witness) Lines(t0 int64) []string {
	var ls []string
	width := 0
	for _, t := range w.Txns {
		width = max(width, len(fmt.Sprintf("T%d", t.Index)))
	}
	for _, t := range w.Txns {
		ls = append(ls, fmt.Sprintf("%-*s process %d at %s, %s, %s..%s: %s", width, fmt.Sprintf("T%d", t.Index), t.Process, orDash(t.Node), t.Type,
			rel(t.InvokeNs, t0), rel(t.CompleteNs, t0), history.MopsText(t.Value)))
	}
	for _, e := range w.Edges {
		ls = append(ls, fmt.Sprintf("T%d -%s-> T%d: %s", e.From, e.Type, e.To, e.Why))
	}
	return append(ls, w.Details...)
}

// CompleteNs is when the witness's last transaction completed: when the
// anomaly could first be seen.
func (w Witness) CompleteNs() int64 {
	var t int64
	for _, x := range w.Txns {
		t = max(t, x.CompleteNs)
	}
	return t
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// rel prints a time in seconds after t0 (the first invocation shown).
func rel(ns, t0 int64) string { return fmt.Sprintf("+%.6fs", float64(ns-t0)/1e9) }
