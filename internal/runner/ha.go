package runner

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
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
	rows := make([]report.NodeRoleRow, len(roles))
	for i, ro := range roles {
		rows[i] = report.NodeRoleRow{Node: ro.Node, Source: ro.Source, Role: ro.Role, FromS: ro.FromS, ToS: ro.ToS}
		if ro.ToS >= endS {
			rows[i].ToS = math.NaN() // still holding it when the run ended
		}
	}
	f, err := os.Create(dir.File(report.NodeRolesFile))
	if err != nil {
		return err
	}
	err = report.WriteNodeRoles(f, rows)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if len(r.sum.Faults) == 0 {
		return nil
	}
	in := fault.HAInput{Roles: roles, Acks: r.haAcks(), Checked: r.found != nil}
	if v := r.sum.Verification; v != nil && in.Checked {
		for node, why := range v.Skipped {
			if strings.HasPrefix(why, "not readable") {
				in.Unread = append(in.Unread, node)
			}
		}
	}
	order := make([]int, len(r.sum.Faults))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(r.sum.Faults[a].AtS, r.sum.Faults[b].AtS) })
	applied := func(f *fault.Summary) bool { return f.Err == "" || strings.HasPrefix(f.Err, "heal: ") }
	// The applied faults' windows for lost commits tile the measurement
	// (a fault not applied did nothing: what was lost meanwhile is the
	// previous one's doing).
	var ats []float64
	for _, i := range order {
		if applied(&r.sum.Faults[i]) {
			ats = append(ats, r.sum.Faults[i].AtS)
		}
	}
	windows := fault.LostWindows(ats, -r.s.Run.Warmup.Seconds(), endS)
	w := 0
	for k, i := range order {
		f := &r.sum.Faults[i]
		next := endS
		if k+1 < len(order) {
			next = r.sum.Faults[order[k+1]].AtS
		}
		if !applied(f) {
			continue // not applied: nothing to measure (its error says why)
		}
		sp := fault.Span{Fault: f.Fault, What: f.What, AtS: f.AtS, HealS: f.HealS, Err: f.Err}
		f.HA = fault.MeasureHA(sp, windows[w], next, in)
		w++
	}
	r.sum.HA = fault.FoldHA(r.sum.Faults)
	for _, g := range r.sum.HA {
		fmt.Fprintf(r.log, "HA %s: %d times, %d failovers; no commit for p50 %.2f s, p95 %.2f s; lost %d (%d checked); split brain max %.0f ms; rejoined %d\n",
			g.What, g.N, g.Failovers, g.UnavailableS.P50, g.UnavailableS.P95, g.Lost, g.LostChecked, g.SplitBrainMs.Max, g.Rejoined)
	}
	return nil
}

// haAcks are the measurement's acknowledged commits, each user's in order,
// on the measure phase's axis, with the node that acknowledged each where
// the driver could tell.
func (r *run) haAcks() []fault.Ack {
	var out []fault.Ack
	warm := r.s.Run.Warmup.Seconds()
	base := r.ackWriterBase()
	for u, j := range r.res.Acks {
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

// waitRedundant gives an HA manager the time to bring a failed primary
// back after the run's last fault: it waits, up to the catch-up timeout,
// until the cluster has one primary and every other node streaming, as
// the role history says. A rejoin that the run's end would cut short is
// then measured, from its heal, rather than reported as none; a manager
// that does not rejoin (repmgr, two primaries after a partition) costs
// the timeout, said in the log.
func (r *run) waitRedundant(ctx context.Context) {
	rw, ok := r.cluster.(engine.RoleWatcher)
	if !ok || len(r.s.Faults) == 0 || ctx.Err() != nil {
		return
	}
	if periods, _ := rw.RoleHistory(); len(periods) == 0 {
		return // roles not followed: no manager
	}
	start := time.Now()
	deadline := start.Add(r.catchUpTimeout())
	said := false
	for {
		missing := notRedundant(rw, r.nodes)
		if missing == "" {
			if said {
				fmt.Fprintf(r.log, "cluster redundant again after %.1f s\n", time.Since(start).Seconds())
			}
			return
		}
		if !said {
			fmt.Fprintf(r.log, "waiting for the cluster to be redundant again (%s)\n", missing)
			said = true
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(r.log, "warning: not redundant %.0f s after the run: %s\n", time.Since(start).Seconds(), missing)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// notRedundant says what keeps the cluster from one primary and every
// other node streaming, by the servers' latest roles; "" when nothing.
func notRedundant(rw engine.RoleWatcher, nodes []engine.Node) string {
	periods, _ := rw.RoleHistory()
	now := map[string]string{}
	for _, p := range periods {
		if p.Source == engine.RoleFromServer && p.End.IsZero() {
			now[p.Node] = p.Role
		}
	}
	var primaries, others []string
	for _, n := range nodes {
		switch role := now[n.Name]; role {
		case engine.RolePrimary:
			primaries = append(primaries, n.Name)
		case engine.RoleStreaming:
		case "":
			others = append(others, n.Name+" unknown")
		default:
			others = append(others, n.Name+" "+role)
		}
	}
	if len(primaries) > 1 {
		others = append(others, "primaries "+strings.Join(primaries, ", "))
	} else if len(primaries) == 0 {
		others = append(others, "no primary")
	}
	return strings.Join(others, "; ")
}
