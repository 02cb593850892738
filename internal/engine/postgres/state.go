package postgres

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"replab/internal/engine"
	"replab/internal/enginekit"
)

// ApplySchema implements engine.Cluster.
func (c *cluster) ApplySchema(ctx context.Context, s engine.Schema) error {
	switch c.plan.replication {
	case Logical, Snapshot:
		return c.applySchemaLogical(ctx, s)
	case Multimaster:
		return c.applySchemaMultimaster(ctx, s)
	case Pipeline:
		// DDL is not carried: the tables are created at every node, and
		// the publication (FOR ALL TABLES) takes them in.
		return enginekit.Each(c.nodes, func(n *node) error {
			if c.isSink(n.Name) {
				return c.createSinkTables(ctx, n.Name, s)
			}
			return createTables(ctx, n, s)
		})
	}
	// Physical: DDL at the primary replicates to every standby.
	p := c.byName[c.plan.primaries[0]]
	return createTables(ctx, p, s)
}

// createTables runs a schema's PostgreSQL statements on one node.
func createTables(ctx context.Context, n *node, s engine.Schema) error {
	for _, t := range s.Tables {
		ddl, ok := t.Create[engine.Postgres]
		if !ok {
			return fmt.Errorf("table %s has no PostgreSQL definition", t.Name)
		}
		if err := n.exec(ctx, "", ddl); err != nil {
			return err
		}
		for _, ix := range t.Indexes[engine.Postgres] {
			if err := n.exec(ctx, "", ix); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReplicationState implements engine.Cluster: for physical standbys what
// each upstream's pg_stat_replication says, for logical replicas what
// their slot on the source says.
func (c *cluster) ReplicationState(ctx context.Context) ([]engine.ReplicaState, error) {
	var out []engine.ReplicaState
	for _, up := range c.nodes {
		if up.pid() == 0 {
			continue // down (killed, stopped): no state to read
		}
		conn, err := up.connect(ctx, "")
		if err != nil {
			return nil, err
		}
		rows, err := conn.Query(ctx, `SELECT application_name, coalesce(state, ''), coalesce(sent_lsn::text, ''),
			coalesce(write_lsn::text, ''), coalesce(flush_lsn::text, ''), coalesce(replay_lsn::text, ''),
			coalesce(pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END, replay_lsn), 0)::bigint,
			coalesce(sync_state, ''),
			coalesce(extract(epoch FROM replay_lag) * 1000, -1)::float8
			FROM pg_stat_replication`)
		if err != nil {
			conn.Close(ctx)
			return nil, fmt.Errorf("node %s: read pg_stat_replication: %w", up.Name, err)
		}
		for rows.Next() {
			r := engine.ReplicaState{BacklogUnit: engine.UnitBytes}
			var sent, write, flush, replay string
			if err := rows.Scan(&r.Node, &r.State, &sent, &write, &flush, &replay, &r.Backlog, &r.SyncState, &r.ReplayLagMs); err != nil {
				rows.Close()
				conn.Close(ctx)
				return nil, err
			}
			r.Node = c.nodeOfApp(r.Node)
			r.Positions = lsns(sent, write, flush, replay)
			r.From = up.Name
			r.Kind = "physical"
			if sub, ok := c.mmSubscriber(up.Name, r.Node); ok {
				// A pglogical subscription's walsender, named "<subscriber>_from_<up>".
				r.Node, r.Kind = sub, "pglogical"
			} else if n := c.byName[r.Node]; n == nil || c.fromOf(n) != up.Name {
				// A logical subscription's walsender, named after the subscription.
				r.Kind = "logical"
			}
			out = append(out, r)
		}
		rows.Close()
		conn.Close(ctx)
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	if c.plan.replication == Logical || c.plan.replication == Snapshot {
		return c.logicalReplicationState(ctx, out)
	}
	if c.plan.replication == Pipeline {
		return c.pipelineReplicationState(ctx)
	}
	return out, nil
}

// lsns are a stream's positions as pg_stat_replication names them.
func lsns(sent, write, flush, replay string) []engine.Position {
	var out []engine.Position
	for _, p := range []engine.Position{{Name: "sent_lsn", Value: sent}, {Name: "write_lsn", Value: write}, {Name: "flush_lsn", Value: flush}, {Name: "replay_lsn", Value: replay}} {
		if p.Value != "" {
			out = append(out, p)
		}
	}
	return out
}

// Processes implements engine.Cluster: the postmaster's children, named by
// the role PostgreSQL gives them in their process title. A node that is
// down (stopped or killed) has none.
func (c *cluster) Processes(ctx context.Context) ([]engine.Process, error) {
	var out []engine.Process
	if c.sinks != nil {
		sp, err := c.sinks.Processes(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, sp...)
	}
	children := childrenByParent()
	for _, n := range c.nodes {
		pm := n.pid()
		if pm == 0 {
			continue
		}
		out = append(out, engine.Process{Node: n.Name, Role: "postmaster", PID: pm})
		for _, pid := range children[pm] {
			role := roleOf(cmdline(pid))
			out = append(out, engine.Process{Node: n.Name, Role: role, PID: pid, Apply: applyRoles[role]})
		}
	}
	out = append(out, c.managerProcesses()...)
	return append(out, c.pipelineProcesses()...), nil
}

// applyRoles receive or apply changes at a replica.
var applyRoles = map[string]bool{"walreceiver": true, "startup": true, "logical-apply": true, "pglogical-apply": true}

// childrenByParent maps each PID to its children's PIDs.
func childrenByParent() map[int][]int {
	out := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		out[ppid] = append(out[ppid], pid)
	}
	return out
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// roleOf maps a PostgreSQL process title ("postgres: walsender …") to a
// role name.
func roleOf(title string) string {
	t := strings.TrimPrefix(title, "postgres: ")
	if i := strings.Index(t, ": "); i >= 0 && !strings.HasPrefix(t, "logical replication") && !strings.HasPrefix(t, "pglogical") {
		t = t[i+2:] // "cluster_name: role …" when cluster_name is set
	}
	prefixes := []struct{ prefix, role string }{
		{"walsender", "walsender"},
		{"walreceiver", "walreceiver"},
		{"startup", "startup"},
		{"checkpointer", "checkpointer"},
		{"background writer", "bgwriter"},
		{"walwriter", "walwriter"},
		{"autovacuum launcher", "autovacuum"},
		{"autovacuum worker", "autovacuum"},
		{"archiver", "archiver"},
		{"stats collector", "stats"},
		{"logical replication launcher", "logical-launcher"},
		{"logical replication apply worker", "logical-apply"},
		{"logical replication worker", "logical-apply"},
		{"logical replication tablesync worker", "logical-sync"},
		{"pglogical manager", "pglogical-manager"},
		{"pglogical supervisor", "pglogical-supervisor"},
		{"pglogical apply", "pglogical-apply"},
		{"pglogical sync", "pglogical-sync"},
	}
	for _, p := range prefixes {
		if strings.HasPrefix(t, p.prefix) {
			return p.role
		}
	}
	return "backend"
}

// fromOf is n's upstream now (a failover changes it).
func (c *cluster) fromOf(n *node) string {
	c.topo.RLock()
	defer c.topo.RUnlock()
	return n.From
}
