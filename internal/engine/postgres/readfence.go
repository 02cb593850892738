package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"replab/internal/engine"
)

var _ engine.ReadFence = (*cluster)(nil)

// Read-your-writes by position (issue 32): after a write, the primary's
// WAL insert position — at or after the end of the commit record of every
// transaction it has acknowledged — and, before a read at a standby, a
// poll of pg_last_wal_replay_lsn() until the standby has replayed that far.
// A logical replica has WAL of its own, not the primary's: its replay
// position means nothing against the primary's LSN, so the wait holds for
// physical standbys (and the primary, which waits for nothing).

// fencePoll is how often a read's wait asks the standby again.
const fencePoll = time.Millisecond

// CommitPosition implements engine.ReadFence: pg_current_wal_insert_lsn()
// at q's node (after a commit returned, at or after its commit record).
func (c *cluster) CommitPosition(ctx context.Context, q engine.Querier) (string, error) {
	var lsn string
	if err := q.QueryRowContext(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		return "", fmt.Errorf("pg_current_wal_insert_lsn: %w", err)
	}
	return lsn, nil
}

// WaitApplied implements engine.ReadFence: polls q's node every
// millisecond until pg_last_wal_replay_lsn() ≥ pos; a node not in
// recovery (the primary: NULL) has everything at once.
func (c *cluster) WaitApplied(ctx context.Context, q engine.Querier, pos string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var done sql.NullBool
		if err := q.QueryRowContext(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", pos).Scan(&done); err != nil {
			return fmt.Errorf("pg_last_wal_replay_lsn: %w", err)
		}
		if !done.Valid || done.Bool {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not replayed to %s within %s", pos, timeout)
		}
		t := time.NewTimer(fencePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
