package mariadb

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"replab/internal/engine"
)

var _ engine.ConflictCounter = (*cluster)(nil)

// galeraConflicts is what a Galera member counts: its local transactions
// that lost certification to a write-set ordered before them, and those a
// replicated write-set aborted while they held its rows (brute force).
// Each conflict is counted once, at the member whose transaction lost.
const galeraConflicts = "wsrep_local_cert_failures + wsrep_local_bf_aborts"

// ConflictsCounted implements engine.ConflictCounter: Galera counts its
// conflicts; asynchronous masters apply each other's changes over their
// own without noticing (their divergence shows in the checksums).
func (c *cluster) ConflictsCounted() string {
	if c.plan.replication == Galera {
		return galeraConflicts
	}
	return ""
}

// ReplicationConflicts implements engine.ConflictCounter for Galera: per
// running member, its status counters (which start from 0 when it
// restarts).
func (c *cluster) ReplicationConflicts(ctx context.Context) (map[string]int64, error) {
	if c.plan.replication != Galera {
		return nil, nil
	}
	out := map[string]int64{}
	for _, n := range c.nodes {
		if n.pid() == 0 {
			continue
		}
		db, err := n.db()
		if err != nil {
			return nil, err
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := globalStatus(qctx, db, "wsrep_local_%")
		cancel()
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		var sum int64
		for _, k := range []string{"wsrep_local_cert_failures", "wsrep_local_bf_aborts"} {
			v, err := strconv.ParseInt(st[k], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("node %s: status %s = %q: %w", n.Name, k, st[k], err)
			}
			sum += v
		}
		out[n.Name] = sum
	}
	return out, nil
}
