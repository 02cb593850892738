package postgres

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
)

// Multi-master with pglogical (replication = "multimaster").
//
// Every master is a pglogical node. Its default replication set carries
// replab_marker and the workload's tables, and it subscribes to every
// other master with one subscription named "<me>_from_<other>"
// (replication_sets = {default}, synchronize_data = false,
// forward_origins = '{}'). Because no master forwards what it received
// from another, each change travels exactly one hop, from the master
// where it was committed to each of the others, and never loops back: n
// masters make n·(n-1) subscriptions, each a walsender at the provider
// and an apply worker at the subscriber, connected across the emulated
// link between their sites.
//
// Conflicts (the same row changed at two masters before either change
// reached the other, including an INSERT of a key another master also
// inserted) are resolved by each subscriber's apply worker with
// pglogical.conflict_resolution, set from [scheme] conflict:
//
//   - last_update_wins (the default): the row version with the later
//     commit timestamp wins everywhere (track_commit_timestamp = on). All
//     sites share one clock, so masters converge; pglogical applies the
//     remote version on an exact tie (same microsecond), which can leave
//     two masters swapped.
//   - first_update_wins: the version with the earlier commit timestamp wins.
//   - apply_remote: an incoming change always overwrites the local row, so
//     concurrent updates end up swapped between masters (they diverge).
//   - keep_local: the local row always stays: concurrent updates diverge.
//   - error: the apply worker stops at the first conflict; changes from that
//     master stop arriving until someone resolves it by hand.
//
// Schema (ApplySchema): pglogical replicates rows, not DDL. Each table is
// created locally at every master, and only when it exists everywhere is
// it added to every master's default replication set, so no master ever
// sends a row for a table another master lacks. The alternative,
// pglogical.replicate_ddl_command, would run the DDL asynchronously at
// each subscriber through the ddl_sql set: a master could then write (and
// send) rows before the table exists at the others, stopping their apply
// workers. Tables need a primary key: that is how rows are matched.
// Workloads must also keep keys unique per master (no shared sequences):
// a key inserted at two masters is a conflict, resolved as above.

// mmSubscription is pglogical's name for one master's subscription to
// another. pglogical names are PostgreSQL names (at most 63 bytes); the
// walsender serving it reports the same name as its application_name.
func mmSubscription(me, other string) string {
	s := me + "_from_" + other
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}

// mmConflictPolicy describes each pglogical.conflict_resolution in a few words.
var mmConflictPolicy = map[string]string{
	"last_update_wins":  "the later commit timestamp wins (track_commit_timestamp = on)",
	"first_update_wins": "the earlier commit timestamp wins (track_commit_timestamp = on)",
	"apply_remote":      "the incoming change always wins: concurrent updates diverge",
	"keep_local":        "the local row always wins: concurrent updates diverge",
	"error":             "the apply worker stops at the first conflict until resolved by hand",
}

// masters returns the masters in spec order.
func (c *cluster) masters() []*node {
	out := make([]*node, 0, len(c.plan.primaries))
	for _, name := range c.plan.primaries {
		out = append(out, c.byName[name])
	}
	return out
}

// upMultimaster creates every master, makes each a pglogical node and
// subscribes each to every other, then waits until every subscription
// replicates.
func (c *cluster) upMultimaster(ctx context.Context) error {
	ms := c.masters()
	names := map[string]string{}
	for _, me := range ms {
		for _, other := range ms {
			if me == other {
				continue
			}
			sub := mmSubscription(me.Name, other.Name)
			if prev, dup := names[sub]; dup {
				return fmt.Errorf("nodes %s and %s: subscription names %q clash once cut to PostgreSQL's 63 bytes: shorten the node names", prev, other.Name, sub)
			}
			names[sub] = other.Name
		}
	}
	fmt.Fprintf(c.log, "multimaster: %d masters (%s), each subscribing to every other with pglogical, forward_origins '{}' (a change travels one hop and never loops back)\n",
		len(ms), strings.Join(c.plan.primaries, ", "))
	fmt.Fprintf(c.log, "multimaster: conflicts: %s: %s\n", c.plan.conflict, mmConflictPolicy[c.plan.conflict])

	if err := enginekit.Each(c.masters(), func(n *node) error { return c.createPrimary(ctx, n) }); err != nil {
		return err
	}
	var version string
	var vmu sync.Mutex
	err := enginekit.Each(c.masters(), func(n *node) error {
		if err := n.exec(ctx, "", "CREATE EXTENSION IF NOT EXISTS pglogical"); err != nil {
			return err
		}
		if err := n.exec(ctx, "", "SELECT pglogical.create_node(node_name := $1, dsn := $2)", n.Name, n.conninfo("")); err != nil {
			return err
		}
		if err := mmAddTable(ctx, n, "replab_marker"); err != nil {
			return err
		}
		var v string
		if err := n.query1(ctx, "", "SELECT extversion FROM pg_extension WHERE extname = 'pglogical'", &v); err == nil {
			vmu.Lock()
			version = v
			vmu.Unlock()
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.log, "multimaster: pglogical %s node on every master; subscribing\n", version)

	// Subscriptions last: create_subscription asks the provider for its
	// node, so every master must be a node first.
	start := time.Now()
	err = enginekit.Each(c.masters(), func(n *node) error {
		for _, other := range ms {
			if other == n {
				continue
			}
			err := n.exec(ctx, "", `SELECT pglogical.create_subscription(subscription_name := $1, provider_dsn := $2,
				replication_sets := ARRAY['default'], synchronize_structure := false, synchronize_data := false,
				forward_origins := '{}')`, mmSubscription(n.Name, other.Name), other.conninfo(""))
			if err != nil {
				return fmt.Errorf("subscribe %s to %s (%s -> %s): %w", n.Name, other.Name, other.Site, n.Site, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := enginekit.Each(c.masters(), func(n *node) error { return c.waitSubscriptions(ctx, n, start) }); err != nil {
		return err
	}
	fmt.Fprintf(c.log, "multimaster: %d subscriptions replicating (%.2f s)\n", len(ms)*(len(ms)-1), time.Since(start).Seconds())
	return nil
}

// waitSubscriptions polls n until each of its subscriptions replicates,
// logging each as it does; bounded by flowTimeout.
func (c *cluster) waitSubscriptions(ctx context.Context, n *node, start time.Time) error {
	pending := map[string]string{} // subscription -> last status
	for _, other := range c.masters() {
		if other != n {
			pending[mmSubscription(n.Name, other.Name)] = "not yet listed"
		}
	}
	_, err := enginekit.Poll{Interval: 100 * time.Millisecond, Stall: c.flowTimeout()}.Until(ctx, func(ctx context.Context) (bool, string, error) {
		conn, err := n.connect(ctx, "")
		if err != nil {
			return false, "", err
		}
		defer conn.Close(context.Background())
		rows, err := conn.Query(ctx, "SELECT subscription_name, status FROM pglogical.show_subscription_status()")
		if err != nil {
			return false, "", err
		}
		for rows.Next() {
			var sub, status string
			if rows.Scan(&sub, &status) != nil {
				continue
			}
			if _, ok := pending[sub]; !ok {
				continue
			}
			if status == "replicating" {
				delete(pending, sub)
				fmt.Fprintf(c.log, "node %s: subscription %s replicating (%.2f s)\n", n.Name, sub, time.Since(start).Seconds())
			} else {
				pending[sub] = status
			}
		}
		rows.Close()
		var left []string
		for sub, status := range pending {
			left = append(left, fmt.Sprintf("%s is %s", sub, status))
		}
		sort.Strings(left)
		return len(pending) == 0, strings.Join(left, ", "), rows.Err()
	})
	if err != nil {
		return fmt.Errorf("node %s: subscriptions not replicating: %w: %s", n.Name, err, n.logTail())
	}
	return nil
}

// applySchemaMultimaster creates every table at every master, then adds
// each to every master's default replication set (see the comment at
// the top of this file for why not replicate_ddl_command).
func (c *cluster) applySchemaMultimaster(ctx context.Context, s engine.Schema) error {
	if err := enginekit.Each(c.masters(), func(n *node) error { return createTables(ctx, n, s) }); err != nil {
		return err
	}
	first := c.masters()[0]
	for _, t := range s.Tables {
		var pk bool
		if err := first.query1(ctx, "", `SELECT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = $1::text::regclass AND indisprimary)`, &pk, t.Name); err != nil {
			return err
		}
		if !pk {
			return fmt.Errorf("table %s has no primary key: multi-master matches rows by primary key", t.Name)
		}
	}
	err := enginekit.Each(c.masters(), func(n *node) error {
		for _, t := range s.Tables {
			if err := mmAddTable(ctx, n, t.Name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.log, "multimaster: %d tables created at every master and added to every default replication set\n", len(s.Tables))
	return nil
}

// mmAddTable adds a table to n's default replication set unless it is
// there already.
func mmAddTable(ctx context.Context, n *node, table string) error {
	return n.exec(ctx, "", `SELECT pglogical.replication_set_add_table('default', $1::text::regclass, synchronize_data := false)
		WHERE NOT EXISTS (SELECT 1 FROM pglogical.tables WHERE relid = $1::text::regclass AND set_name = 'default')`, table)
}

// mmSubscriber names the master a walsender on up serves, from its
// application_name (the subscription's name).
func (c *cluster) mmSubscriber(up, appName string) (string, bool) {
	if c.plan.replication != Multimaster {
		return "", false
	}
	for _, m := range c.plan.primaries {
		if m != up && mmSubscription(m, up) == appName {
			return m, true
		}
	}
	return "", false
}
