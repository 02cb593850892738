package runner

import (
	"context"
	"fmt"
	"time"

	"replab/internal/engine"
	"replab/internal/report"
)

// Target mode: no lab. The cluster is the user's; the driver and the lag
// watchers run on this host, where replab was started.

// setupTarget connects to the target's servers and checks them, then
// prepares like a lab run.
func (r *run) setupTarget(ctx context.Context, start time.Time) (err error) {
	t := r.s.Target
	tc, ok := r.eng.(engine.TargetMode)
	if !ok {
		return fmt.Errorf("engine %s cannot connect to existing servers", r.eng.Kind())
	}
	fmt.Fprintf(r.log, "target %s: connecting to %d %s servers\n", t.Name, len(t.Nodes), t.Engine)
	c, err := tc.Connect(ctx, r.s, r.log)
	if err != nil {
		return fmt.Errorf("target %s: %w", t.Name, err)
	}
	r.cluster = c
	for _, n := range c.Nodes() {
		from := ""
		if n.From != "" {
			from = ", streaming from " + n.From + " as the servers confirm"
		}
		fmt.Fprintf(r.log, "node %-8s %-8s %s%s\n", n.Name, n.Role, n.Version, from)
	}
	return r.prepare(ctx, start)
}

// targetSite is where the driver runs in target mode: [target] site, or
// "local".
func (r *run) targetSite() string {
	if r.s.Target.Site != "" {
		return r.s.Target.Site
	}
	return "local"
}

// lagClock is how a reader timed its lags, for the summary; nil for a
// reader on the lab's one clock.
func lagClock(rd engine.LagReader) *report.LagClock {
	b, ok := rd.(engine.LagBounder)
	if !ok {
		return nil
	}
	lb := b.LagBound()
	return &report.LagClock{Method: lb.Method, CorrectionMs: lb.CorrectionMs, BoundMs: lb.BoundMs}
}
