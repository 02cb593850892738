package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"replab/internal/engine"
)

// Failover (engine.Promoter): a standby of a physical scheme is promoted
// to primary, as an operator (or a failover manager) would after losing
// the primary. The old primary is then out of the cluster: starting it
// again would make a second primary with commits the new one never saw,
// so Start refuses it (rejoining it with pg_rewind is not built).

var _ engine.Promoter = (*cluster)(nil)

// Promote implements engine.Promoter.
func (c *cluster) Promote(ctx context.Context, name string) error {
	n, err := c.controlled(name)
	if err != nil {
		return err
	}
	if c.plan.replication != Async && c.plan.replication != Sync {
		return fmt.Errorf("node %s: promote works on physical standbys (replication = \"async\" or \"sync\"), not %q", name, c.plan.replication)
	}
	c.topo.RLock()
	old, role := n.From, n.Role
	var others []string
	for _, o := range c.nodes {
		if o.From == old && o != n && old != "" {
			others = append(others, o.Name)
		}
	}
	primary := slices.Contains(c.plan.primaries, old)
	c.topo.RUnlock()
	switch {
	case role != "standby" || !primary:
		return fmt.Errorf("node %s is not a standby of the primary: only a standby of the primary can be promoted", name)
	case len(others) > 0:
		return fmt.Errorf("node %s: other standbys (%v) follow the same primary: re-pointing them to the new primary is not built", name, others)
	case n.pid() == 0:
		return fmt.Errorf("node %s is not running", name)
	}
	start := time.Now()
	var ok bool
	if err := n.query1(ctx, "", "SELECT pg_promote(true, 60)", &ok); err != nil {
		return fmt.Errorf("node %s: promote: %w", name, err)
	}
	if !ok {
		return fmt.Errorf("node %s: pg_promote did not finish within 60 s", name)
	}
	c.topo.Lock()
	c.plan.primaries = []string{name}
	n.Role, n.From = "primary", ""
	if o := c.byName[old]; o != nil {
		o.failedOver = true
	}
	c.topo.Unlock()
	fmt.Fprintf(c.log, "node %s: promoted to primary (%.2f s); %s is out of the cluster\n", name, time.Since(start).Seconds(), old)
	return nil
}
