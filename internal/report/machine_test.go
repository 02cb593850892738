package report

import (
	"bytes"
	"strings"
	"testing"

	"replab/internal/monitor"
)

// A machine-bound run says so wherever its figures are read: the
// terminal summary, the report's banner, the sweep table; a run that was
// not says nothing.
func TestMachineBoundIsSaidWhereverTheFiguresAre(t *testing.T) {
	why := "every core was at least 95 % busy for 9 of 15 measured seconds (the nodes used 1.20 cores, replab 0.60, other work 0.15, of 2)"
	for _, bound := range []bool{true, false} {
		s := &Summary{Kind: "run", Name: "m", Complete: true, MachineBound: bound,
			Machine: &monitor.MachineSummary{Cores: 2, Seconds: 15, BusySeconds: 9, Bound: bound, Why: why}}
		var b bytes.Buffer
		PrintSummary(&b, s)
		said := strings.Contains(b.String(), "warning: MACHINE-BOUND: "+why+": this result measures this machine, not the modelled system")
		if said != bound {
			t.Errorf("bound %v: the terminal summary says so: %v\n%s", bound, said, b.String())
		}
		if got := machineBanner(s) != ""; got != bound || bound && !strings.Contains(machineBanner(s), why) {
			t.Errorf("bound %v: banner %q", bound, machineBanner(s))
		}
		sw := &Sweep{Parameters: []string{"run.users"}, Points: []SweepPoint{{Label: "run.users=4", Values: map[string]any{"run.users": 4}, Summary: Headline(s)}}}
		b.Reset()
		PrintSweep(&b, sw)
		if got := strings.Contains(b.String(), "machine-bound"); got != bound {
			t.Errorf("bound %v: the sweep table marks the point: %v\n%s", bound, got, b.String())
		}
	}
}
