package postgres

import (
	"context"
	"fmt"
	"time"

	"replab/internal/enginekit"
	"replab/internal/units"

	"github.com/jackc/pgx/v5"
)

// Refresh implements engine.Refresher: every snapshot replica catches up
// with the primary now. Other schemes have nothing to refresh and get an
// error.
func (c *cluster) Refresh(ctx context.Context) error {
	if c.plan.replication != Snapshot {
		return fmt.Errorf("refresh: replication = %q has no snapshot replicas", c.plan.replication)
	}
	return c.refreshRound(ctx, "on demand", nil)
}

// RefreshInterval implements engine.Refresher: how often snapshot replicas
// catch up by themselves; 0 when the scheme has none.
func (c *cluster) RefreshInterval() time.Duration {
	if c.plan.replication != Snapshot {
		return 0
	}
	return c.plan.refresh
}

// refreshLoop refreshes the snapshot replicas every c.plan.refresh until
// bg ends. A round that takes longer than the interval delays the next.
func (c *cluster) refreshLoop(bg context.Context) {
	defer c.bg.Done()
	t := time.NewTicker(c.plan.refresh)
	defer t.Stop()
	for {
		select {
		case <-bg.Done():
			return
		case <-t.C:
		}
		if err := c.refreshRound(bg, "scheduled", nil); err != nil && bg.Err() == nil {
			c.logf("refresh failed: %v\n", err)
		}
	}
}

// refreshRound refreshes every snapshot replica in parallel. hook, if set,
// runs while a replica's subscription is enabled (ALTER SUBSCRIPTION …
// REFRESH PUBLICATION refuses disabled subscriptions).
func (c *cluster) refreshRound(ctx context.Context, why string, hook func(context.Context, *node) error) error {
	c.lg.mu.Lock()
	defer c.lg.mu.Unlock()
	c.lg.started.Add(1)
	p := c.byName[c.plan.primaries[0]]
	err := enginekit.Each(c.replicas(), func(r *node) error { return c.refreshOne(ctx, why, p, r, hook) })
	if err == nil {
		c.lg.rounds.Add(1)
	}
	return err
}

// refreshOne enables r's subscription, waits until r has confirmed the
// primary's WAL position taken at the start (and every table's initial copy
// is done), then disables the subscription and waits until its workers
// and the primary's walsender are gone, so nothing more arrives before the
// next refresh.
func (c *cluster) refreshOne(ctx context.Context, why string, p, r *node, hook func(context.Context, *node) error) (err error) {
	start := time.Now()
	sub := subName(r)
	pc, err := p.connect(ctx, "")
	if err != nil {
		return err
	}
	defer pc.Close(context.Background())
	rc, err := r.connect(ctx, "")
	if err != nil {
		return err
	}
	defer rc.Close(context.Background())

	var target string
	var behind, pending int64
	if err := pc.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text,
		pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, sub).Scan(&target, &behind); err != nil {
		return fmt.Errorf("node %s: read slot %s: %w", p.Name, sub, err)
	}
	if err := rc.QueryRow(ctx, pendingTablesSQL, sub).Scan(&pending); err != nil {
		return fmt.Errorf("node %s: read subscription %s: %w", r.Name, sub, err)
	}
	if behind <= 0 && pending == 0 && hook == nil {
		c.logf("node %s: refresh (%s) from %s: nothing to catch up\n", r.Name, why, p.Name)
		return nil
	}

	if _, err := rc.Exec(ctx, "ALTER SUBSCRIPTION "+sub+" ENABLE"); err != nil {
		return fmt.Errorf("node %s: enable subscription %s: %w", r.Name, sub, err)
	}
	defer func() {
		// Disable even when ctx has ended (Close): the server is still up.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := c.disable(dctx, pc, rc, r); derr != nil && err == nil {
			err = derr
		}
	}()
	if hook != nil {
		if err := hook(ctx, r); err != nil {
			return err
		}
	}
	copies := pending // tables copied whole during this refresh
	_, err = c.waitFor(ctx, func(ctx context.Context) (bool, string, error) {
		var left int64
		if err := pc.QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::pg_lsn, confirmed_flush_lsn)::bigint
			FROM pg_replication_slots WHERE slot_name = $2`, target, sub).Scan(&left); err != nil {
			return false, "", err
		}
		var pending int64
		if err := rc.QueryRow(ctx, pendingTablesSQL, sub).Scan(&pending); err != nil {
			return false, "", err
		}
		copies = max(copies, pending)
		state := fmt.Sprintf("%s of WAL and %d table copies to go", units.Bytes(float64(max(left, 0))), pending)
		return left <= 0 && pending == 0, state, nil
	})
	if err != nil {
		return fmt.Errorf("node %s: refresh from %s to %s: %w%s", r.Name, p.Name, target, err, c.subscriptionTrouble(r))
	}
	var tables string
	if copies > 0 {
		tables = fmt.Sprintf(" and %d table(s) copied", copies)
	}
	c.logf("node %s: refresh (%s) from %s: %s of WAL caught up%s in %.2f s\n",
		r.Name, why, p.Name, units.Bytes(float64(max(behind, 0))), tables, time.Since(start).Seconds())
	return nil
}

// pendingTablesSQL counts a subscription's tables whose initial copy is not
// finished and handed over to the apply worker ('r' = ready).
const pendingTablesSQL = `SELECT count(*) FROM pg_subscription_rel sr
	JOIN pg_subscription s ON s.oid = sr.srsubid
	WHERE s.subname = $1 AND sr.srsubstate <> 'r'`

// disable disables r's subscription and waits until its workers have
// exited and the primary's walsender has released the slot.
func (c *cluster) disable(ctx context.Context, pc, rc *pgx.Conn, r *node) error {
	sub := subName(r)
	if _, err := rc.Exec(ctx, "ALTER SUBSCRIPTION "+sub+" DISABLE"); err != nil {
		return fmt.Errorf("node %s: disable subscription %s: %w", r.Name, sub, err)
	}
	for {
		var workers int64
		var active bool
		err := rc.QueryRow(ctx, `SELECT count(*) FROM pg_stat_subscription WHERE subname = $1 AND pid IS NOT NULL`, sub).Scan(&workers)
		if err == nil {
			err = pc.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, sub).Scan(&active)
		}
		if err == nil && workers == 0 && !active {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: subscription %s disabled but its workers did not stop (%d running, slot active %t): %w", r.Name, sub, workers, active, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
