package runner

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/fault"
	"replab/internal/report"
)

// The HA measures of a run on a cluster whose roles the engine follows
// (engine.RoleWatcher: an HA manager fails over by itself): the nodes'
// roles over time go to node-roles.csv, and each fault's summary gets
// what it did to the cluster (fault.MeasureHA) from those roles and
// from every acknowledged commit — when, by which node, and whether the
// verification found it afterwards.

// NodeRolesFile is the roles' timeline in a results directory.
const NodeRolesFile = "node-roles.csv"

// fillHA writes node-roles.csv and measures every fault; nothing for an
// engine that does not follow roles.
func (r *run) fillHA(dir *report.Dir) error {
	rw, ok := r.cluster.(engine.RoleWatcher)
	if !ok || r.res == nil {
		return nil
	}
	periods, _ := rw.RoleHistory()
	if len(periods) == 0 {
		return nil
	}
	r.phaseMu.Lock()
	from := r.phaseFrom
	r.phaseMu.Unlock()
	if from.IsZero() {
		return nil
	}
	endS := time.Since(from).Seconds()
	roles := make([]fault.RoleSpan, 0, len(periods))
	for _, p := range periods {
		to := endS
		if !p.End.IsZero() {
			to = p.End.Sub(from).Seconds()
		}
		roles = append(roles, fault.RoleSpan{Node: p.Node, Source: p.Source, Role: p.Role, FromS: p.Start.Sub(from).Seconds(), ToS: to})
	}
	if err := writeNodeRoles(dir.File(NodeRolesFile), roles); err != nil {
		return err
	}
	if len(r.sum.Faults) == 0 {
		return nil
	}
	in := fault.HAInput{Roles: roles, Acks: r.acks(), Checked: r.found != nil}
	order := make([]int, len(r.sum.Faults))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(r.sum.Faults[a].AtS, r.sum.Faults[b].AtS) })
	floor := -r.s.Run.Warmup.Seconds()
	for k, i := range order {
		f := &r.sum.Faults[i]
		next := endS
		if k+1 < len(order) {
			next = r.sum.Faults[order[k+1]].AtS
		}
		sp := fault.Span{Fault: f.Fault, What: f.What, AtS: f.AtS, HealS: f.HealS, Err: f.Err}
		f.HA = fault.MeasureHA(sp, floor, next, in)
		floor = f.AtS
	}
	r.sum.HA = fault.FoldHA(r.sum.Faults)
	for _, g := range r.sum.HA {
		fmt.Fprintf(r.log, "HA %s: %d times, %d failovers; no commit for p50 %.2f s, p95 %.2f s; lost %d (%d checked); split brain max %.0f ms; rejoined %d\n",
			g.What, g.N, g.Failovers, g.UnavailableS.P50, g.UnavailableS.P95, g.Lost, g.LostChecked, g.SplitBrainMs.Max, g.Rejoined)
	}
	return nil
}

// acks are the measurement's acknowledged commits, each user's in order,
// on the measure phase's axis, with the node that acknowledged each where
// the driver could tell.
func (r *run) acks() []fault.Ack {
	var out []fault.Ack
	warm := r.s.Run.Warmup.Seconds()
	base := r.journalBase()
	for u, j := range r.res.Journal {
		if len(j.AckedNs) != len(j.Acked) {
			continue // no times: the cluster cannot place connections
		}
		nodes := make([]string, len(j.Acked))
		for _, sp := range j.Spans {
			for i := sp.From; i < sp.To && i < len(nodes); i++ {
				nodes[i] = sp.Node
			}
		}
		for i, seq := range j.Acked {
			out = append(out, fault.Ack{User: u, Node: nodes[i], S: float64(j.AckedNs[i])/1e9 - warm,
				Found: r.found[enginekit.AckKey{Writer: base + u, Seq: seq}]})
		}
	}
	return out
}

// writeNodeRoles writes the roles' timeline: one line per period.
func writeNodeRoles(path string, roles []fault.RoleSpan) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"node", "source", "role", "from_s", "to_s"})
	num := func(v float64) string {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	for _, r := range roles {
		_ = w.Write([]string{r.Node, r.Source, r.Role, num(r.FromS), num(r.ToS)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
