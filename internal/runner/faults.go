package runner

import (
	"cmp"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"replab/internal/engine"
	"replab/internal/fault"
	"replab/internal/faultkind"
	"replab/internal/linkem"
	"replab/internal/report"
)

// faults runs the spec's [[fault]] schedule during one measurement: it
// starts when the measure phase begins (start is sent the phase's start),
// and stop ends it, heals whatever is still broken and returns the events.
type faults struct {
	sched *fault.Schedule
	start chan time.Time
	done  chan struct{}
	stopF context.CancelFunc
}

// startFaults arms the schedule; nil when the spec has no faults.
func (r *run) startFaults(ctx context.Context) *faults {
	if len(r.s.Faults) == 0 {
		return nil
	}
	f := &faults{start: make(chan time.Time, 1), done: make(chan struct{})}
	f.sched = fault.NewSchedule(r.s.Faults, faultTarget{r, clusterNodes{r.eng.Kind(), r.cluster}}, func(e fault.Event) {
		r.opt.live.Fault(e.Action, strings.Fields(e.What + " ?")[0])
		msg := fmt.Sprintf("fault at %.1f s: %s %s", e.AtS, e.Action, e.What)
		if e.Err != "" {
			msg += ": FAILED: " + e.Err
		}
		fmt.Fprintln(r.log, msg)
	})
	sctx, cancel := context.WithCancel(ctx)
	f.stopF = cancel
	go func() {
		defer close(f.done)
		select {
		case at := <-f.start:
			f.sched.Run(sctx, at)
		case <-sctx.Done():
		}
	}()
	return f
}

// measureStarted tells the schedule when the measure phase began.
func (f *faults) measureStarted(at time.Time) {
	if f == nil {
		return
	}
	select {
	case f.start <- at:
	default:
	}
}

// stop ends the schedule and heals every fault still in effect, so that
// replicas can catch up and copies be compared.
func (f *faults) stop() []fault.Event {
	if f == nil {
		return nil
	}
	f.stopF()
	<-f.done
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f.sched.HealAll(ctx)
	return f.sched.Events()
}

// faultTarget is the world of a run's scheduled faults: the lab's links
// and the cluster's nodes.
type faultTarget struct {
	r *run
	clusterNodes
}

var _ faultkind.World = faultTarget{}

func (t faultTarget) LinkParams(from, to string) (linkem.Params, error) {
	if t.r.lab.Emulator() == nil {
		return linkem.Params{}, errors.New("this lab has no links (offline)")
	}
	return t.r.lab.Emulator().Params(from, to)
}

func (t faultTarget) SetLink(from, to string, both bool, kvs []string) error {
	return t.r.lab.SetLink(from, to, both, kvs)
}

func (t faultTarget) RestoreLink(from, to string, p linkem.Params) error {
	return t.r.lab.Emulator().SetParams(from, to, p)
}

// Start is the heal of a kill or a stop: a node a standby was promoted
// over stays down, on purpose.
func (t faultTarget) Start(ctx context.Context, node string) error {
	err := t.clusterNodes.Start(ctx, node)
	if errors.Is(err, engine.ErrFailedOver) {
		return fmt.Errorf("%w: %v", faultkind.ErrStaysDown, err)
	}
	return err
}

// NodesOf is what faults do to c's nodes, through its engine's
// capabilities (engine.NodeControl, Pauser, Promoter, StageControl); an
// action the engine does not have fails with faultkind.Cannot.
func NodesOf(kind string, c engine.Cluster) faultkind.Nodes { return clusterNodes{kind, c} }

// clusterNodes is a cluster's nodes as faults act on them.
type clusterNodes struct {
	kind string // the engine's, for errors
	c    engine.Cluster
}

func (n clusterNodes) control(what string) (engine.NodeControl, error) {
	nc, ok := n.c.(engine.NodeControl)
	if !ok {
		return nil, faultkind.Cannot(n.kind, what+" nodes")
	}
	return nc, nil
}

func (n clusterNodes) Kill(ctx context.Context, node string) error {
	nc, err := n.control("kill")
	if err != nil {
		return err
	}
	return nc.Kill(ctx, node)
}

func (n clusterNodes) Stop(ctx context.Context, node string) error {
	nc, err := n.control("stop")
	if err != nil {
		return err
	}
	return nc.Stop(ctx, node)
}

func (n clusterNodes) Start(ctx context.Context, node string) error {
	nc, err := n.control("start")
	if err != nil {
		return err
	}
	return nc.Start(ctx, node)
}

func (n clusterNodes) Restart(ctx context.Context, node string) error {
	nc, err := n.control("restart")
	if err != nil {
		return err
	}
	return nc.Restart(ctx, node)
}

func (n clusterNodes) pauser() (engine.Pauser, error) {
	pz, ok := n.c.(engine.Pauser)
	if !ok {
		return nil, faultkind.Cannot(n.kind, "pause nodes")
	}
	return pz, nil
}

func (n clusterNodes) Pause(ctx context.Context, node string) error {
	pz, err := n.pauser()
	if err != nil {
		return err
	}
	return pz.Pause(ctx, node)
}

func (n clusterNodes) Resume(ctx context.Context, node string) error {
	pz, err := n.pauser()
	if err != nil {
		return err
	}
	return pz.Resume(ctx, node)
}

func (n clusterNodes) Promote(ctx context.Context, node string) error {
	pr, ok := n.c.(engine.Promoter)
	if !ok {
		return faultkind.Cannot(n.kind, "promote nodes")
	}
	return pr.Promote(ctx, node)
}

// Primary implements faultkind.PrimaryFinder: the one node that takes
// writes now.
func (n clusterNodes) Primary(ctx context.Context) (string, string, error) {
	srcs := engine.Sources(n.c.Nodes())
	switch len(srcs) {
	case 1:
		return srcs[0].Name, srcs[0].Site, nil
	case 0:
		return "", "", errors.New("no node takes writes now")
	}
	return "", "", fmt.Errorf("%d nodes take writes now (%s): which one is the primary?", len(srcs), names(srcs))
}

// Stage acts on one of node's replication stages, which it must have.
func (n clusterNodes) Stage(ctx context.Context, node, stage, action string) error {
	sc, ok := n.c.(engine.StageControl)
	if !ok {
		return faultkind.Cannot(n.kind, `act on replication stages: this scheme has none (stage faults are for replication = "pipeline")`)
	}
	stages := sc.Stages(node)
	if !slices.Contains(stages, stage) {
		if len(stages) == 0 {
			return fmt.Errorf("node %s has no replication stages", node)
		}
		return fmt.Errorf("node %s has no stage %q; its stages: %s", node, stage, strings.Join(stages, ", "))
	}
	return sc.DoStage(ctx, node, stage, action)
}

// fillFaults writes faults.csv and measures the run around each scheduled
// fault into the summary.
func (r *run) fillFaults(dir *report.Dir, events []fault.Event) error {
	if events == nil {
		return nil
	}
	slices.SortStableFunc(events, func(a, b fault.Event) int { return cmp.Compare(a.AtS, b.AtS) })
	f, err := os.Create(dir.File("faults.csv"))
	if err != nil {
		return err
	}
	err = fault.WriteCSV(f, events)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if r.res == nil {
		return err
	}
	warm := r.s.Run.Warmup.Seconds()
	var series []fault.Second
	for _, s := range r.res.Series {
		// Second T of the series ends T seconds after the driver started.
		series = append(series, fault.Second{S: float64(s.T-1) - warm, Commits: s.Commits, Errors: s.Errors, P99Ms: s.P99Ms, MaxMs: s.MaxMs})
	}
	lag := map[string][]fault.LagSecond{}
	if r.probe != nil {
		r.phaseMu.Lock()
		offset := r.phaseFrom.Sub(r.probeStarted).Seconds()
		r.phaseMu.Unlock()
		for name, res := range r.probe.Results() {
			for _, s := range res.Series {
				lag[name] = append(lag[name], fault.LagSecond{S: float64(s.Second) - offset, P99Ms: s.P99Ms})
			}
		}
	}
	end := r.res.MeasureSeconds + r.s.Run.Cooldown.Seconds() // a count may end the measure phase early
	var gaps []fault.Gap
	for _, g := range r.res.Gaps {
		gaps = append(gaps, fault.Gap{FromS: float64(g.From)/1e9 - warm, ToS: float64(g.To)/1e9 - warm})
	}
	r.sum.Faults = fault.MeasureAll(events, series, gaps, lag, r.backlogs(dir), -warm, end)
	return err
}

// shellFaults are the faults made from a second shell (replab fault,
// replab link set) since the driver started, from the lab's fault log:
// logged in faults.csv with fault -1, not measured.
func (r *run) shellFaults(since time.Time) []fault.Event {
	r.phaseMu.Lock()
	from := r.phaseFrom
	r.phaseMu.Unlock()
	var out []fault.Event
	if r.lab == nil {
		return nil // target mode: no lab to break
	}
	for _, rec := range r.lab.FaultLog() {
		if rec.Time.Before(since) || from.IsZero() {
			continue
		}
		out = append(out, fault.Event{Fault: -1, What: rec.What, Action: rec.Action, AtS: rec.Time.Sub(from).Seconds(), Err: rec.Err})
	}
	slices.SortStableFunc(out, func(a, b fault.Event) int { return cmp.Compare(a.AtS, b.AtS) })
	return out
}

// backlogs reads each replica's backlog samples from replication.csv,
// placed on the measure phase's axis; none when it cannot be read.
func (r *run) backlogs(dir *report.Dir) map[string][]fault.Backlog {
	f, err := os.Open(dir.File("replication.csv"))
	if err != nil {
		return nil
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) < 2 {
		return nil
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	ti, ni, bi, ui := col["t_s"], col["node"], col["backlog"], col["backlog_unit"]
	if _, ok := col["backlog"]; !ok {
		return nil
	}
	r.phaseMu.Lock()
	offset := r.phaseFrom.Sub(r.monStarted).Seconds()
	r.phaseMu.Unlock()
	out := map[string][]fault.Backlog{}
	for _, rec := range recs[1:] {
		t, err1 := strconv.ParseFloat(rec[ti], 64)
		v, err2 := strconv.ParseFloat(rec[bi], 64)
		if err1 != nil || err2 != nil {
			continue // a sample without a backlog (the node was down)
		}
		out[rec[ni]] = append(out[rec[ni]], fault.Backlog{S: t - offset, Value: v, Unit: rec[ui]})
	}
	return out
}
