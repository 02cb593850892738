package mariadb

import (
	"context"
	"fmt"
	"math"
	"time"

	"replab/internal/engine"
)

var _ engine.ReadFence = (*cluster)(nil)

// Read-your-writes by position (issue 32): after a write, the master's
// @@gtid_binlog_pos — every transaction it has written to its binary log,
// the acknowledged ones among them — and, before a read at a replica,
// MASTER_GTID_WAIT(pos, timeout), which returns once the replica's
// @@gtid_slave_pos has reached it (0) or after the timeout (-1). Galera
// has its own wait, wsrep_sync_wait (the workloads' sync_wait).

// CommitPosition implements engine.ReadFence.
func (c *cluster) CommitPosition(ctx context.Context, q engine.Querier) (string, error) {
	var pos string
	if err := q.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&pos); err != nil {
		return "", fmt.Errorf("gtid_binlog_pos: %w", err)
	}
	return pos, nil
}

// WaitApplied implements engine.ReadFence: MASTER_GTID_WAIT at q's node,
// a replica (at a master, which applies no one's binary log, it would wait
// for its replication position instead: the driver waits at replicas
// only).
func (c *cluster) WaitApplied(ctx context.Context, q engine.Querier, pos string, timeout time.Duration) error {
	if pos == "" {
		return nil
	}
	secs := math.Max(timeout.Seconds(), 0.001)
	var res int
	if err := q.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", pos, secs).Scan(&res); err != nil {
		return fmt.Errorf("MASTER_GTID_WAIT: %w", err)
	}
	if res != 0 {
		return fmt.Errorf("MASTER_GTID_WAIT(%q): not applied within %s", pos, timeout)
	}
	return nil
}
