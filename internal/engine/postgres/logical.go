package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"replab/internal/engine"
	"replab/internal/enginekit"
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
	mu sync.Mutex // one refresh round or subscription change at a time
	// started and rounds count the refresh rounds begun (under mu) and
	// completed without error: a test waits until a round begun after its
	// change has completed.
	started, rounds atomic.Int64
}

// retryInterval is the replicas' wal_retrieve_retry_interval. The default
// (5 s) is how long the logical replication launcher waits between starting
// workers: it delays every new subscription's apply worker and every
// snapshot refresh by up to 5 s. A spec's [node.NAME.settings] can still set
// it.
const retryInterval = "500ms"

// subName names a replica's publication, subscription and slot.
func subName(r *node) string { return "replab_" + r.Name }

// logf writes one progress line (c.log is a LockedWriter).
func (c *cluster) logf(format string, args ...any) {
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
	if err := enginekit.Each(c.replicas(), func(r *node) error { return c.createReplica(ctx, primary, r) }); err != nil {
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
	if err := enginekit.Each(replicas, func(r *node) error {
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
	return enginekit.Each(targets, func(r *node) error {
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
		st := engine.ReplicaState{Node: r.Name, From: p.Name, Kind: "logical", State: "inactive", ReplayLagMs: -1, BacklogUnit: engine.UnitBytes}
		var flush string
		err := queryRowOn(ctx, p, `SELECT coalesce(confirmed_flush_lsn::text, ''),
			coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint
			FROM pg_replication_slots WHERE slot_name = $1`, []any{subName(r)}, &flush, &st.Backlog)
		st.Positions = lsns("", "", flush, "")
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
func checkFilters(s *spec.Spec, errs *spec.Errors) {
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
