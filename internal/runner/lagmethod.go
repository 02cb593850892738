package runner

import (
	"context"
	"fmt"
	"sync"

	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/lagprobe"
	"replab/internal/spec"
)

// How each replica's lag is measured. With lag_sample = "all" (the
// default) a replica whose engine orders commits by a position it shows
// (engine.Positions) is measured by position, every transaction; the
// others — and every replica with lag_sample = "auto" or N — by stamps, a
// sample. Positions also need the clients' commits to learn their
// positions: pipelined ones for PostgreSQL, every commit for an engine
// whose server says it with the commit (engine.CommitPositions).

// chooseLagMethods fills r.byPosition: the replicas measured by position,
// with what their position is. Called once the cluster is up.
func (r *run) chooseLagMethods() {
	r.byPosition = map[string]string{}
	pc, ok := r.cluster.(engine.Positions)
	if !ok || r.s.Run.LagSample != spec.LagSampleAll || !r.commitsPositioned(pc) {
		return
	}
	for _, n := range r.replicas {
		if m := pc.PositionMethod(n.Name); m != "" {
			r.byPosition[n.Name] = m
		}
	}
}

// commitsPositioned says whether every writing transaction of the
// workload learns its commit's position from the cluster.
func (r *run) commitsPositioned(pc engine.Positions) bool {
	_, pipes := r.cluster.(engine.Pipeliner)
	for _, t := range r.wl.Transactions() {
		if t.ReadOnly {
			continue
		}
		switch pc.CommitPositions() {
		case engine.PipeCommits:
			// The driver pipelines a type with a Batch and no session
			// statements, when the engine can.
			if t.Op != nil || t.Batch == nil || len(t.Session) > 0 || !pipes {
				return false
			}
		case engine.SessionCommits:
			if t.Op != nil {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// stampReplicas says whether some replica is measured by stamps.
func (r *run) stampReplicas() bool {
	for _, n := range r.replicas {
		if r.byPosition[n.Name] == "" {
			return true
		}
	}
	return false
}

// lagConfig sets the driver's lag journals: stamps for the replicas that
// read them, positions for the others.
func (r *run) lagConfig(cfg *driver.Config) {
	if len(r.byPosition) > 0 {
		cfg.LagPositions = func(i int) driver.PositionJournal { return r.probe.PosWriter(i) }
		if sp, ok := r.cluster.(engine.SessionPositions); ok {
			cfg.Positions = sp
		}
	}
	if !r.stampReplicas() {
		cfg.Lag, cfg.LagStatement = nil, ""
	}
	if cfg.LagEvery == spec.LagSampleAll {
		cfg.LagEvery = 0 // the stamp replicas' sample: automatic
	}
}

// watchPositions starts replica n's position watcher in wg; the reader
// it returns is to be closed once the watch stopped.
func (r *run) watchPositions(ctx, wctx context.Context, n engine.Node, wg *sync.WaitGroup, failed func(error)) (engine.PositionReader, error) {
	pr, err := r.cluster.(engine.Positions).PositionReader(ctx, n.Name)
	if err != nil {
		return nil, fmt.Errorf("position reader at %s: %w", n.Name, err)
	}
	opts := lagprobe.WatchOptions{Skip: r.ownWriters(n.Name)}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := r.probe.WatchPositions(wctx, n.Name, pr, opts); err != nil && wctx.Err() == nil {
			failed(fmt.Errorf("lag watcher at %s: %w", n.Name, err))
		}
	}()
	return pr, nil
}

// lagMethodOf is what the summary says of replica name's method.
func (r *run) lagMethodOf(name string) (method, position string) {
	if m := r.byPosition[name]; m != "" {
		return lagprobe.MethodPositions, m
	}
	return lagprobe.MethodStamps, ""
}
