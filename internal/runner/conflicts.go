package runner

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"replab/internal/engine"
	"replab/internal/report"
)

// conflictCount reads the conflicts a multi-master cluster's replication
// counted by itself (engine.ConflictCounter): once when the measure phase
// begins, once after the run has caught up — conflicts made during a
// partition are found when it heals, after the driver may have stopped.
type conflictCount struct {
	ctx     context.Context
	counter engine.ConflictCounter
	once    sync.Once
	read    chan struct{} // closed when before has been read
	before  map[string]int64
	err     error
}

// startConflictCount is nil when the cluster's scheme counts none.
func (r *run) startConflictCount(ctx context.Context) *conflictCount {
	cc, ok := r.cluster.(engine.ConflictCounter)
	if !ok || cc.ConflictsCounted() == "" {
		return nil
	}
	return &conflictCount{ctx: ctx, counter: cc, read: make(chan struct{})}
}

// measureStarted reads the counts now, without holding up the caller
// (the driver's progress report).
func (c *conflictCount) measureStarted() {
	if c == nil {
		return
	}
	c.once.Do(func() {
		go func() {
			defer close(c.read)
			ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
			defer cancel()
			c.before, c.err = c.counter.ReplicationConflicts(ctx)
		}()
	})
}

// result reads the counts again and reports the difference; loadS is the
// seconds of load in between (the measure phase and the cooldown).
func (c *conflictCount) result(ctx context.Context, loadS float64) *report.ReplicationConflicts {
	if c == nil {
		return nil
	}
	out := &report.ReplicationConflicts{Counted: c.counter.ConflictsCounted()}
	select {
	case <-c.read:
	case <-ctx.Done():
		out.Error = "not counted: the run was interrupted"
		return out
	default:
		out.Error = "not counted: the measure phase did not begin"
		return out
	}
	if c.err != nil {
		out.Error = fmt.Sprintf("the counts at the start of the measure phase: %v", c.err)
		return out
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	after, err := c.counter.ReplicationConflicts(rctx)
	cancel()
	if err != nil {
		out.Error = fmt.Sprintf("the counts after the run: %v", err)
		return out
	}
	countConflicts(out, c.before, after, loadS)
	return out
}

// countConflicts fills out from the counts before and after: per node
// the difference, or, for a node whose count went back (it restarted),
// what it counted since its start — a lower bound, and the node is named.
func countConflicts(out *report.ReplicationConflicts, before, after map[string]int64, loadS float64) {
	out.Nodes = map[string]int64{}
	for _, n := range slices.Sorted(maps.Keys(after)) {
		d := after[n] - before[n]
		if d < 0 {
			d = after[n]
			out.Restarted = append(out.Restarted, n)
		}
		out.Nodes[n] = d
		out.Count += d
	}
	for _, n := range slices.Sorted(maps.Keys(before)) {
		if _, ok := after[n]; !ok {
			out.NotRead = append(out.NotRead, n)
		}
	}
	if loadS > 0 {
		out.PerS = math.Round(float64(out.Count)/loadS*1000) / 1000
	}
}
