package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"replab/internal/engine"
	"replab/internal/lab"
	"replab/internal/spec"
)

// Logical replication (replication = "logical") and periodic snapshot
// refresh (replication = "snapshot").
//
// Every replica is a cluster of its own (initdb, the replab database and
// replab_marker, like the primary). For each replica the primary has a
// publication replab_<replica>, and the replica a subscription of the same
// name whose slot (also replab_<replica>) lives on the primary. The
// subscription connects from the replica's server, inside its site, to the
// primary's lab address, so the initial copy and the change stream cross
// the emulated link. Each publication always holds replab_marker, whole, so
// WaitFlowing works whatever the replica's filters.
//
// A replica without [[node.NAME.table]] filters receives every table the
// workload creates. A partial replica receives only the tables it lists,
// and of those only the rows matching where and the columns in columns
// (PostgreSQL 15 row filters and column lists). ApplySchema creates every
// table of the schema at every replica, so a workload's DDL (foreign keys
// between tables) runs unchanged; tables a partial replica does not
// receive stay empty there, and a table with a column list keeps only the
// listed columns at that replica (the others are dropped), so what a
// partial replica holds is exactly what it is sent.
//
// Snapshot replicas are the same subscriptions kept disabled between
// refreshes. Every refresh interval a refresh round enables them, waits
// until each has confirmed the primary's WAL position taken when the round
// began, and disables them again; the slot keeps the changes in between,
// so a refresh sends everything since the previous one at once.

// logicalState is what logical and snapshot clusters keep beyond the nodes.
type logicalState struct {
	mu     sync.Mutex   // one refresh round or subscription change at a time
	rounds atomic.Int64 // completed refresh rounds (tests wait on it)
	logMu  sync.Mutex
}

// retryInterval is the replicas' wal_retrieve_retry_interval. The default
// (5 s) is how long the logical replication launcher waits between starting
// workers: it delays every new subscription's apply worker and every
// snapshot refresh by up to 5 s. A spec's [node.NAME.settings] can still set
// it.
const retryInterval = "500ms"

// subName names a replica's publication, subscription and slot.
func subName(r *node) string { return "replab_" + r.Name }

// logf writes one progress line; refreshes of several replicas log at once.
func (c *cluster) logf(format string, args ...any) {
	c.lg.logMu.Lock()
	defer c.lg.logMu.Unlock()
	fmt.Fprintf(c.log, format, args...)
}

// replicas lists the logical replicas in spec order.
func (c *cluster) replicas() []*node {
	var out []*node
	for _, n := range c.nodes {
		if n.Role == "replica" {
			out = append(out, n)
		}
	}
	return out
}

// upLogical builds the primary, then every replica in parallel, each with
// its publication and subscription. Snapshot replicas get their first
// refresh before it returns, and a background goroutine (stopped by Close
// through bg) refreshes them every c.plan.refresh.
func (c *cluster) upLogical(ctx, bg context.Context) error {
	c.lg = &logicalState{}
	primary := c.byName[c.plan.primaries[0]]
	if err := c.createPrimary(ctx, primary); err != nil {
		return err
	}
	// Publications first, before any slot exists: a transaction with an
	// xid running at the primary while a logical slot is created makes the
	// slot wait for a later xl_running_xacts record, which the background
	// writer logs at most every 15 s.
	for _, r := range c.replicas() {
		if err := primary.exec(ctx, "", "CREATE PUBLICATION "+subName(r)+" FOR TABLE replab_marker"); err != nil {
			return err
		}
	}
	if err := eachNode(c.replicas(), func(r *node) error { return c.createReplica(ctx, primary, r) }); err != nil {
		return err
	}
	if c.plan.replication != Snapshot || len(c.replicas()) == 0 {
		return nil
	}
	if err := c.refreshRound(ctx, "initial", nil); err != nil {
		return err
	}
	c.bg.Add(1)
	go c.refreshLoop(bg)
	return nil
}

// createReplica starts r as a fresh cluster and subscribes it to its
// publication at p. A logical replica's subscription starts at once and this
// waits for its initial copy; a snapshot replica's starts disabled.
func (c *cluster) createReplica(ctx context.Context, p, r *node) error {
	start := time.Now()
	if err := c.createPrimary(ctx, r); err != nil {
		return err
	}
	if err := r.writeConfig(map[string]string{"wal_retrieve_retry_interval": retryInterval}); err != nil {
		return fmt.Errorf("node %s: configure: %w", r.Name, err)
	}
	if err := r.exec(ctx, "", "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	sub := subName(r)
	snapshot := c.plan.replication == Snapshot
	// CREATE SUBSCRIPTION connects to the primary across the link and
	// creates the slot there; bound it like a marker's trip.
	sctx, cancel := context.WithTimeout(ctx, c.flowTimeout())
	defer cancel()
	err := r.exec(sctx, "", fmt.Sprintf("CREATE SUBSCRIPTION %s CONNECTION %s PUBLICATION %s WITH (enabled = %t)",
		sub, sqlString(p.conninfo("")), sub, !snapshot))
	if err != nil {
		return fmt.Errorf("node %s: subscribe to %s: %w", r.Name, p.Name, err)
	}
	if snapshot {
		c.logf("node %s: subscribed to %s (%s), disabled between refreshes every %s\n", r.Name, p.Name, describeFilters(r), c.plan.refresh)
		return nil
	}
	if err := c.waitSynced(ctx, p, r); err != nil {
		return err
	}
	c.logf("node %s: subscribed to %s (%s), streaming after %.2f s\n", r.Name, p.Name, describeFilters(r), time.Since(start).Seconds())
	return nil
}

// describeFilters says in one phrase what a replica receives.
func describeFilters(r *node) string {
	if len(r.Tables) == 0 {
		return "all tables"
	}
	var parts []string
	for _, f := range r.Tables {
		parts = append(parts, strings.TrimSpace(strings.ToLower(f.Table)+pubFilter(&f)))
	}
	return "tables: " + strings.Join(parts, "; ")
}

// pubFilter renders a filter as ALTER PUBLICATION writes it after the
// table name: " (cols) WHERE (cond)".
func pubFilter(f *spec.TableFilter) string {
	if f == nil {
		return ""
	}
	var b strings.Builder
	if len(f.Columns) > 0 {
		b.WriteString(" (" + strings.Join(lowerAll(f.Columns), ", ") + ")")
	}
	if f.Where != "" {
		b.WriteString(" WHERE (" + f.Where + ")")
	}
	return b.String()
}

// Refresh makes every snapshot replica catch up with the primary now: it is
// the optional capability interface{ Refresh(context.Context) error } of a
// cluster. Other schemes have nothing to refresh and get an error.
func (c *cluster) Refresh(ctx context.Context) error {
	if c.plan.replication != Snapshot {
		return fmt.Errorf("refresh: replication = %q has no snapshot replicas", c.plan.replication)
	}
	return c.refreshRound(ctx, "on demand", nil)
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
	p := c.byName[c.plan.primaries[0]]
	err := eachNode(c.replicas(), func(r *node) error { return c.refreshOne(ctx, why, p, r, hook) })
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
		state := fmt.Sprintf("%s of WAL and %d table copies to go", lab.FormatBytes(max(left, 0)), pending)
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
		r.Name, why, p.Name, lab.FormatBytes(max(behind, 0)), tables, time.Since(start).Seconds())
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

// waitSynced waits until every table of r's subscription has its initial
// copy done ('r' ready or 's' sync done) and the apply worker runs.
func (c *cluster) waitSynced(ctx context.Context, p, r *node) error {
	sub := subName(r)
	rc, err := r.connect(ctx, "")
	if err != nil {
		return err
	}
	defer rc.Close(context.Background())
	_, err = c.waitFor(ctx, func(ctx context.Context) (bool, string, error) {
		var pending, workers int64
		var states string
		err := rc.QueryRow(ctx, `SELECT count(*) FILTER (WHERE sr.srsubstate NOT IN ('r', 's')),
			coalesce(string_agg(sr.srrelid::regclass::text || '=' || sr.srsubstate::text, ' ' ORDER BY sr.srrelid), ''),
			(SELECT count(*) FROM pg_stat_subscription st WHERE st.subname = $1 AND st.pid IS NOT NULL AND st.relid IS NULL)
			FROM pg_subscription_rel sr JOIN pg_subscription s ON s.oid = sr.srsubid
			WHERE s.subname = $1`, sub).Scan(&pending, &states, &workers)
		if err != nil {
			return false, "", err
		}
		return pending == 0 && workers == 1, fmt.Sprintf("table states %s, apply worker running %t", states, workers == 1), nil
	})
	if err != nil {
		return fmt.Errorf("node %s: initial copy from %s: %w%s", r.Name, p.Name, err, c.subscriptionTrouble(r))
	}
	return nil
}

// waitFor polls check until it reports done. It gives up when ctx ends or
// when the state check describes has not changed for c.flowTimeout(): a
// long copy over a slow link is fine as long as it moves. Every 10 s
// without an end it logs the state.
func (c *cluster) waitFor(ctx context.Context, check func(context.Context) (bool, string, error)) (string, error) {
	stall := c.flowTimeout()
	var last string
	changed, reported := time.Now(), time.Now()
	var lastErr error
	for {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		done, state, err := check(qctx)
		cancel()
		if err == nil && done {
			return state, nil
		}
		if permanent(err) {
			return last, err
		}
		if err != nil {
			lastErr = err
		} else if state != last {
			last, changed = state, time.Now()
		}
		if time.Since(changed) > stall {
			if last == "" && lastErr != nil {
				return last, fmt.Errorf("no answer within %s: %w", stall, lastErr)
			}
			return last, fmt.Errorf("no progress within %s (%s)", stall, last)
		}
		if time.Since(reported) > 10*time.Second && last != "" {
			c.logf("  … still waiting: %s\n", last)
			reported = time.Now()
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("%w (%s)", ctx.Err(), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// permanent reports whether a query error will not go away by asking
// again: the server refused the statement itself, rather than the
// connection failing or the server shutting down.
func permanent(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || len(pe.Code) < 2 {
		return false
	}
	switch pe.Code[:2] {
	case "08", "53", "57", "58": // connection, resources, shutdown, system
		return false
	}
	return true
}

// subscriptionTrouble describes why a subscription may not be moving: its
// workers, error counts and the replica's log.
func (c *cluster) subscriptionTrouble(r *node) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var workers, applyErrs, syncErrs int64
	var enabled bool
	err := queryRowOn(ctx, r, `SELECT s.subenabled,
		(SELECT count(*) FROM pg_stat_subscription st WHERE st.subname = s.subname AND st.pid IS NOT NULL),
		coalesce(ss.apply_error_count, 0), coalesce(ss.sync_error_count, 0)
		FROM pg_subscription s LEFT JOIN pg_stat_subscription_stats ss ON ss.subid = s.oid
		WHERE s.subname = $1`, []any{subName(r)}, &enabled, &workers, &applyErrs, &syncErrs)
	if err != nil {
		return "; log: " + r.logTail()
	}
	return fmt.Sprintf("; subscription enabled %t, %d workers, %d apply and %d copy errors; log %s: %s",
		enabled, workers, applyErrs, syncErrs, r.logPath, r.logTail())
}

// applySchemaLogical creates the schema at the primary and at every
// replica, publishes each table to the replicas that receive it (with
// their row filters and column lists), sets each table's replica identity
// at the primary, and makes the subscriptions copy the new tables.
//
// Replica identity. PostgreSQL 15 checks, at the primary, every UPDATE and
// DELETE on a table published with a row filter or column list: it fails
// unless the replica identity covers every column a row filter reads, and
// unless every column list covers the replica identity. REPLICA IDENTITY
// FULL covers every row filter but does not go with any column list (even
// one naming every column). So, per table, over all replicas receiving it:
//
//   - every column list must include the primary key;
//   - if the row filters read only primary-key columns, the identity stays
//     the default (the primary key);
//   - otherwise, if no replica of the table has a column list, the table
//     gets REPLICA IDENTITY FULL: UPDATE and DELETE then log the whole old
//     row in the WAL and send it across the link, which is the price of a
//     row filter on a non-key column;
//   - otherwise the identity becomes a unique index replab_ri_<table> over
//     the primary key plus the filtered columns, which must be NOT NULL and
//     in every column list of the table.
//
// Anything else is refused before a publication changes, with the spec's
// file:line; a final UPDATE/DELETE … WHERE false at the primary lets
// PostgreSQL confirm the result.
func (c *cluster) applySchemaLogical(ctx context.Context, s engine.Schema) error {
	p := c.byName[c.plan.primaries[0]]
	replicas := c.replicas()
	if err := createTables(ctx, p, s); err != nil {
		return err
	}
	var plans []*tablePlan
	var problems []error
	for _, t := range s.Tables {
		tp, errs := c.planTable(ctx, p, replicas, t.Name, t.Everywhere)
		problems = append(problems, errs...)
		plans = append(plans, tp)
	}
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	c.warnUnmatched(replicas, s)

	// Replicas: the same tables, minus columns a column list leaves out.
	if err := eachNode(replicas, func(r *node) error {
		if err := createTables(ctx, r, s); err != nil {
			return err
		}
		for _, tp := range plans {
			fd := tp.feedOf(r)
			if fd == nil || fd.f == nil || len(fd.f.Columns) == 0 {
				continue
			}
			for _, col := range tp.cols {
				if !slices.Contains(lowerAll(fd.f.Columns), col.name) {
					if err := r.exec(ctx, "", fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s CASCADE", sqlName(tp.name), sqlName(col.name))); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}); err != nil {
		return err
	}

	// The primary: replica identity, publications, and a check.
	changed := map[string]bool{}
	for _, tp := range plans {
		if err := tp.setIdentity(ctx, p); err != nil {
			return err
		}
		for _, fd := range tp.feeds {
			sub := subName(fd.r)
			if err := p.exec(ctx, "", fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s%s", sub, sqlName(tp.name), pubFilter(fd.f))); err != nil {
				return fmt.Errorf("publish %s to %s: %w", tp.name, fd.r.Name, err)
			}
			changed[fd.r.Name] = true
		}
		if err := tp.check(ctx, p); err != nil {
			return err
		}
		if len(tp.feeds) > 0 && (tp.identity != "default" || tp.filtered()) {
			c.logf("node %s: table %s: replica identity %s\n", p.Name, tp.name, tp.identity)
		}
	}
	var targets []*node
	for _, r := range replicas {
		if changed[r.Name] {
			targets = append(targets, r)
		}
	}
	if len(targets) == 0 {
		return nil
	}

	// The replicas copy the new tables.
	refresh := func(ctx context.Context, r *node) error {
		if !changed[r.Name] {
			return nil
		}
		return r.exec(ctx, "", "ALTER SUBSCRIPTION "+subName(r)+" REFRESH PUBLICATION WITH (copy_data = true)")
	}
	start := time.Now()
	if c.plan.replication == Snapshot {
		return c.refreshRound(ctx, "new tables", refresh)
	}
	return eachNode(targets, func(r *node) error {
		if err := refresh(ctx, r); err != nil {
			return err
		}
		if err := c.waitSynced(ctx, p, r); err != nil {
			return err
		}
		var names []string
		for _, tp := range plans {
			if fd := tp.feedOf(r); fd != nil {
				names = append(names, tp.name+pubFilter(fd.f))
			}
		}
		c.logf("node %s: copied %s from %s in %.2f s\n", r.Name, strings.Join(names, ", "), p.Name, time.Since(start).Seconds())
		return nil
	})
}

// warnUnmatched notes filters that name no table of this schema: a
// misspelt name would leave a partial replica without the table.
func (c *cluster) warnUnmatched(replicas []*node, s engine.Schema) {
	var names []string
	for _, t := range s.Tables {
		names = append(names, t.Name)
	}
	for _, r := range replicas {
		for _, f := range r.Tables {
			if !slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, f.Table) }) {
				c.logf("node %s: note: table filter %q matches no table of this schema (%s)\n", r.Name, f.Table, strings.Join(names, ", "))
			}
		}
	}
}

// tablePlan is one table as logical replication sees it.
type tablePlan struct {
	name     string
	cols     []tableColumn // in attnum order
	pk       []string
	feeds    []feed // the replicas that receive it
	identity string // "default", "full" or "index replab_ri_<table> (a, b)"
	index    []string
}

type tableColumn struct {
	name    string
	notNull bool
	pk      bool
}

// feed is one replica's share of a table.
type feed struct {
	r     *node
	f     *spec.TableFilter // nil: the whole table
	field string            // the filter's spec field, for errors
	where []string          // columns the row filter reads
}

func (tp *tablePlan) feedOf(r *node) *feed {
	for i := range tp.feeds {
		if tp.feeds[i].r == r {
			return &tp.feeds[i]
		}
	}
	return nil
}

func (tp *tablePlan) filtered() bool {
	for _, fd := range tp.feeds {
		if fd.f != nil && (fd.f.Where != "" || len(fd.f.Columns) > 0) {
			return true
		}
	}
	return false
}

// planTable reads a new table's columns at the primary, finds the
// replicas receiving it and the columns their row filters read, and
// chooses its replica identity (see applySchemaLogical).
func (c *cluster) planTable(ctx context.Context, p *node, replicas []*node, name string, everywhere bool) (*tablePlan, []error) {
	tp := &tablePlan{name: name, identity: "default"}
	conn, err := p.connect(ctx, "")
	if err != nil {
		return tp, []error{err}
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT a.attname, a.attnotnull, coalesce(a.attnum = ANY(i.indkey), false)
		FROM pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
		WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, sqlName(name))
	if err != nil {
		return tp, []error{fmt.Errorf("node %s: read the columns of %s: %w", p.Name, name, err)}
	}
	for rows.Next() {
		var col tableColumn
		if err := rows.Scan(&col.name, &col.notNull, &col.pk); err != nil {
			rows.Close()
			return tp, []error{err}
		}
		tp.cols = append(tp.cols, col)
		if col.pk {
			tp.pk = append(tp.pk, col.name)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return tp, []error{err}
	}

	var errs []error
	sp := c.lab.Spec
	for _, r := range replicas {
		fd := feed{r: r}
		if len(r.Tables) > 0 && !everywhere {
			i := slices.IndexFunc(r.Tables, func(f spec.TableFilter) bool { return strings.EqualFold(f.Table, name) })
			if i < 0 {
				continue // a partial replica without this table
			}
			fd.f = &r.Tables[i]
			fd.field = fmt.Sprintf("node.%s.table[%d]", r.Name, i+1)
		}
		if fd.f != nil {
			for _, col := range lowerAll(fd.f.Columns) {
				if !slices.ContainsFunc(tp.cols, func(c tableColumn) bool { return c.name == col }) {
					errs = append(errs, sp.Errorf(fd.field+".columns", "table %s has no column %s; its columns: %s", name, col, strings.Join(tp.colNames(), ", ")))
				}
			}
			if fd.f.Where != "" {
				fd.where, err = whereColumns(ctx, conn, name, fd.f.Where)
				if err != nil {
					errs = append(errs, sp.Errorf(fd.field+".where", "table %s: where = %q: %v", name, fd.f.Where, err))
				}
			}
		}
		tp.feeds = append(tp.feeds, fd)
	}
	if len(tp.feeds) == 0 || len(errs) > 0 {
		return tp, errs
	}
	if len(tp.pk) == 0 {
		return tp, []error{fmt.Errorf("table %s has no primary key: logical replication matches rows by it", name)}
	}

	// Column lists must cover the primary key.
	var listed []feed
	for _, fd := range tp.feeds {
		if fd.f == nil || len(fd.f.Columns) == 0 {
			continue
		}
		listed = append(listed, fd)
		if miss := missingNames(tp.pk, lowerAll(fd.f.Columns)); len(miss) > 0 {
			errs = append(errs, sp.Errorf(fd.field+".columns", "table %s: the column list must include the primary key (%s): PostgreSQL 15 refuses UPDATE and DELETE at the primary when a column list does not cover the replica identity; add %s",
				name, strings.Join(tp.pk, ", "), strings.Join(miss, ", ")))
		}
	}
	// Row filters on columns outside the primary key widen the identity.
	var extra []string
	for _, col := range tp.cols {
		if col.pk {
			continue
		}
		for _, fd := range tp.feeds {
			if slices.Contains(fd.where, col.name) && !slices.Contains(extra, col.name) {
				extra = append(extra, col.name)
			}
		}
	}
	switch {
	case len(extra) == 0:
	case len(listed) == 0:
		tp.identity = "full"
	default:
		tp.index = append(slices.Clone(tp.pk), extra...)
		tp.identity = fmt.Sprintf("index replab_ri_%s (%s)", name, strings.Join(tp.index, ", "))
		var lists []string
		for _, fd := range listed {
			lists = append(lists, fd.r.Name)
		}
		for _, col := range tp.cols {
			if !slices.Contains(extra, col.name) || col.notNull {
				continue
			}
			for _, fd := range tp.feeds {
				if slices.Contains(fd.where, col.name) {
					errs = append(errs, sp.Errorf(fd.field+".where", "table %s: the row filter reads %s, which is not in the primary key, and %s has a column list on %s: PostgreSQL 15 allows no column list with REPLICA IDENTITY FULL, and a replica identity index over (%s) needs %s NOT NULL; declare it NOT NULL, filter on primary key columns, or drop the column list",
						name, col.name, strings.Join(lists, ", "), name, strings.Join(tp.index, ", "), col.name))
				}
			}
		}
		for _, fd := range listed {
			if miss := missingNames(extra, lowerAll(fd.f.Columns)); len(miss) > 0 {
				errs = append(errs, sp.Errorf(fd.field+".columns", "table %s: the column list must include %s: the row filters on %s read it, so it joins the replica identity (%s), and PostgreSQL 15 refuses UPDATE and DELETE when a column list does not cover the replica identity",
					name, strings.Join(miss, ", "), name, tp.identity))
			}
		}
	}
	return tp, errs
}

func (tp *tablePlan) colNames() []string {
	var out []string
	for _, c := range tp.cols {
		out = append(out, c.name)
	}
	return out
}

// setIdentity sets the chosen replica identity at the primary.
func (tp *tablePlan) setIdentity(ctx context.Context, p *node) error {
	t := sqlName(tp.name)
	switch {
	case tp.identity == "full":
		return p.exec(ctx, "", "ALTER TABLE "+t+" REPLICA IDENTITY FULL")
	case len(tp.index) > 0:
		ix := sqlName("replab_ri_" + tp.name)
		var cols []string
		for _, col := range tp.index {
			cols = append(cols, sqlName(col))
		}
		if err := p.exec(ctx, "", fmt.Sprintf("CREATE UNIQUE INDEX %s ON %s (%s)", ix, t, strings.Join(cols, ", "))); err != nil {
			return err
		}
		return p.exec(ctx, "", fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY USING INDEX %s", t, ix))
	}
	return nil
}

// check asks the primary whether UPDATE and DELETE on the table still
// work under its publications (PostgreSQL checks when a statement starts,
// even one touching no row).
func (tp *tablePlan) check(ctx context.Context, p *node) error {
	if len(tp.feeds) == 0 || len(tp.pk) == 0 {
		return nil
	}
	conn, err := p.connect(ctx, "")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	t, k := sqlName(tp.name), sqlName(tp.pk[0])
	for _, q := range []string{"UPDATE " + t + " SET " + k + " = " + k + " WHERE false", "DELETE FROM " + t + " WHERE false"} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("node %s: table %s is published but %s fails: %s", p.Name, tp.name, strings.Fields(q)[0], pgMessage(err))
		}
	}
	return nil
}

// whereColumns returns the columns a row filter reads, as PostgreSQL
// parses it: a throw-away publication records a dependency on each.
func whereColumns(ctx context.Context, conn *pgx.Conn, table, where string) ([]string, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, fmt.Sprintf("CREATE PUBLICATION replab_probe FOR TABLE %s WHERE (%s)", sqlName(table), where)); err != nil {
		return nil, errors.New(pgMessage(err))
	}
	rows, err := tx.Query(ctx, `SELECT DISTINCT a.attname FROM pg_publication p
		JOIN pg_publication_rel r ON r.prpubid = p.oid
		JOIN pg_depend d ON d.classid = 'pg_publication_rel'::regclass AND d.objid = r.oid
			AND d.refclassid = 'pg_class'::regclass AND d.refobjid = r.prrelid AND d.refobjsubid > 0
		JOIN pg_attribute a ON a.attrelid = r.prrelid AND a.attnum = d.refobjsubid
		WHERE p.pubname = 'replab_probe'`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// pgMessage is a server error's message with its detail and hint.
func pgMessage(err error) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err.Error()
	}
	msg := pe.Message
	if pe.Detail != "" {
		msg += ": " + strings.TrimSuffix(pe.Detail, ".")
	}
	if pe.Hint != "" {
		msg += " (" + strings.TrimSuffix(pe.Hint, ".") + ")"
	}
	return msg
}

// logicalReplicationState completes ReplicationState for logical and
// snapshot replicas: a walsender's row (named after the subscription) gets
// the replica's name, and a replica without a walsender (a snapshot
// replica between refreshes, or a stopped subscription) gets a row from its
// slot, with state "inactive".
func (c *cluster) logicalReplicationState(ctx context.Context, rows []engine.ReplicaState) ([]engine.ReplicaState, error) {
	seen := map[string]bool{}
	for i := range rows {
		if n := c.byName[strings.TrimPrefix(rows[i].Node, "replab_")]; n != nil && n.Role == "replica" && rows[i].Node == subName(n) && n.From == rows[i].From {
			rows[i].Node = n.Name
			rows[i].Kind = "logical"
			seen[n.Name] = true
		}
	}
	for _, r := range c.replicas() {
		if seen[r.Name] {
			continue
		}
		p := c.byName[r.From]
		st := engine.ReplicaState{Node: r.Name, From: p.Name, Kind: "logical", State: "inactive", ReplayLagMs: -1}
		err := queryRowOn(ctx, p, `SELECT coalesce(confirmed_flush_lsn::text, ''),
			coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint
			FROM pg_replication_slots WHERE slot_name = $1`, []any{subName(r)}, &st.FlushLSN, &st.BytesBehind)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("node %s: read slot %s: %w", p.Name, subName(r), err)
		}
		rows = append(rows, st)
	}
	return rows, nil
}

// checkFilters adds the checks of [[node.NAME.table]] that need no
// server to a logical or snapshot plan.
func checkFilters(s *spec.Spec, errs *engine.Errors) {
	for _, n := range s.Nodes {
		for i, f := range n.Tables {
			field := fmt.Sprintf("node.%s.table[%d]", n.Name, i+1)
			if strings.EqualFold(f.Table, "replab_marker") {
				errs.Add(field+".name", "replab_marker carries replab's markers and goes whole to every replica; it cannot be filtered")
			}
			if f.Where != "" && !balanced(f.Where) {
				errs.Add(field+".where", "unbalanced parentheses or quotes in %q", f.Where)
			}
			seen := map[string]bool{}
			for _, col := range lowerAll(f.Columns) {
				if seen[col] {
					errs.Add(field+".columns", "column %s listed twice", col)
				}
				seen[col] = true
			}
		}
	}
}

// balanced reports whether a SQL condition's parentheses and quotes pair
// up, so it cannot close the WHERE ( … ) it is written into.
func balanced(sql string) bool {
	depth := 0
	var quote rune
	for _, ch := range sql {
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0 // a doubled quote reopens at once: still balanced
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '(':
			depth++
		case ch == ')':
			depth--
			if depth < 0 {
				return false
			}
		}
	}
	return depth == 0 && quote == 0
}

// eachNode runs f for every node in parallel and joins the errors.
func eachNode(nodes []*node, f func(*node) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// queryRowOn scans one row of a query on n into dst.
func queryRowOn(ctx context.Context, n *node, sql string, args []any, dst ...any) error {
	conn, err := n.connect(ctx, "")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql, args...).Scan(dst...)
}

var plainName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// sqlName writes a name as SQL: plain lower-case names as they are (as a
// workload's DDL writes them), others quoted.
func sqlName(name string) string {
	if plainName.MatchString(name) {
		return name
	}
	return pgx.Identifier{name}.Sanitize()
}

// sqlString writes a SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// lowerAll lower-cases names from a spec: unquoted SQL identifiers.
func lowerAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.ToLower(n)
	}
	return out
}

// missingNames returns the names in want that have is lacks.
func missingNames(want, have []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}
