package report

// The HA figures (summary.json ha and faults[].ha, docs/failover.md): per
// fault, over its occurrences, how long clients could not write and how
// long until a new primary took writes, what was lost, whether two nodes
// took writes at once, and whether the old primary came back by itself.

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"replab/internal/fault"
)

var haHead = []string{"fault", "n", "failovers", "no commit s p50", "p95", "promoted s p50", "elected s p50", "clients s p50",
	"lost", "split brain ms max", "losing side", "survived", "rejoined", "rejoin s p50", "redundant s p50"}

// haRow is one group's figures; "—" where nothing was measured.
func haRow(g fault.HAStats) []string {
	d := func(x fault.Dist, v float64) string {
		if x.N == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", v)
	}
	lost := "not checked"
	if g.LostChecked > 0 {
		lost = fmt.Sprintf("%d (%d of %d checked)", g.Lost, g.LostChecked, g.N)
		if g.LostChecked == g.N {
			lost = fmt.Sprint(g.Lost)
		}
	}
	split, losing, survived := "not measured", "—", "—"
	if g.SplitBrainMs.N > 0 {
		split = fmt.Sprintf("%.0f", g.SplitBrainMs.Max)
		losing = fmt.Sprint(g.LosingSideWrites)
		survived = fmt.Sprint(g.Surviving)
	}
	return []string{g.What, fmt.Sprint(g.N), fmt.Sprint(g.Failovers),
		d(g.UnavailableS, g.UnavailableS.P50), d(g.UnavailableS, g.UnavailableS.P95),
		d(g.PromotedS, g.PromotedS.P50), d(g.ElectedS, g.ElectedS.P50), d(g.ClientsS, g.ClientsS.P50),
		lost, split, losing, survived,
		fmt.Sprintf("%d of %d", g.Rejoined, g.Failovers), d(g.RejoinedS, g.RejoinedS.P50), d(g.RedundantS, g.RedundantS.P50)}
}

const haNote = "  ha: per fault over its occurrences; no commit: the clients' longest time without one; promoted, elected, clients: from the fault until a new primary took writes as its server, the manager and the clients saw it; lost: acknowledged commits at no node; split brain: time two nodes acknowledged commits at once (0: checked, none); rejoin: from the heal until the old primary streamed again (summary.json ha)"

// printHA writes the HA table of the end-of-run summary.
func printHA(w io.Writer, s *Summary) {
	if len(s.HA) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\n%s\t\n", strings.Join(haHead, "\t"))
	for _, g := range s.HA {
		fmt.Fprintf(tw, "%s\t\n", strings.Join(haRow(g), "\t"))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, haNote)
}

// haTable is the same table for the page.
func haTable(s *Summary) (htmlTable, bool) {
	if s == nil || len(s.HA) == 0 {
		return htmlTable{}, false
	}
	t := htmlTable{Caption: "Failover, lost commits, split brain and rejoin, per fault over its occurrences (summary.json ha)",
		Note: strings.TrimPrefix(haNote, "  ha: ")}
	for i, h := range haHead {
		if i == 0 {
			t.Head = append(t.Head, txt(h))
			continue
		}
		t.Head = append(t.Head, numHead(h))
	}
	for _, g := range s.HA {
		var row []tcell
		for j, v := range haRow(g) {
			if j == 0 {
				row = append(row, txt(v))
				continue
			}
			row = append(row, num(v))
		}
		t.Rows = append(t.Rows, row)
	}
	return t, true
}
