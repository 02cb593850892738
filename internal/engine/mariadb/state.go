package mariadb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"

	"replab/internal/engine"
)

// ApplySchema implements engine.SQL: DDL at the first source replicates to
// every node (replicas and, around the ring, the other masters); it
// returns once the tables are everywhere, so any master may write to them.
func (c *cluster) ApplySchema(ctx context.Context, s engine.Schema) error {
	n := c.byName[c.plan.sources[0]]
	for _, t := range s.Tables {
		ddl, ok := t.Create[engine.MySQL]
		if !ok {
			return fmt.Errorf("table %s has no MySQL definition", t.Name)
		}
		if err := n.exec(ctx, ddl); err != nil {
			return err
		}
		for _, ix := range t.Indexes[engine.MySQL] {
			if err := n.exec(ctx, ix); err != nil {
				return err
			}
		}
	}
	return c.WaitFlowing(ctx)
}

// ReplicationState implements engine.Cluster: for every replica stream
// (a replica's, a ring master's) what SHOW ALL SLAVES STATUS says, the
// GTID positions verbatim, and the backlog in transactions: per GTID
// domain, the upstream's last binlogged sequence number minus the
// replica's last one, summed (each GTID is one transaction). The server's
// Seconds_Behind_Master counts whole seconds: it is kept as a position,
// not as ReplayLagMs.
func (c *cluster) ReplicationState(ctx context.Context) ([]engine.ReplicaState, error) {
	if c.plan.replication == Galera {
		return c.galeraState(ctx)
	}
	var out []engine.ReplicaState
	for _, n := range c.nodes {
		up := c.upstream(n)
		if up == nil || n.pid() == 0 {
			continue
		}
		r := engine.ReplicaState{Node: n.Name, From: up.Name, Kind: "binlog", BacklogUnit: engine.UnitTransactions, ReplayLagMs: -1}
		st, err := slaveStatus(ctx, n)
		if err != nil {
			return nil, err
		}
		var current, upPos string
		if err := n.query1(ctx, "SELECT @@gtid_current_pos", nil, &current); err != nil {
			return nil, err
		}
		if up.pid() != 0 {
			if err := up.query1(ctx, "SELECT @@gtid_binlog_pos", nil, &upPos); err != nil {
				upPos = ""
			}
		}
		r.State = st["Slave_IO_State"]
		if st["Slave_SQL_Running"] != "Yes" || st["Slave_IO_Running"] != "Yes" {
			r.State = fmt.Sprintf("io %s, sql %s", st["Slave_IO_Running"], st["Slave_SQL_Running"])
			if e := firstNonEmpty(st["Last_SQL_Error"], st["Last_IO_Error"]); e != "" {
				r.State += ": " + e
				r.Error = e
			}
		}
		if c.plan.replication == Semisync && up.Role == "primary" {
			r.SyncState = "async"
			if rep, ok := c.Semisync(); ok {
				r.SyncState = "semi-sync"
				if !rep.On {
					r.SyncState = "async-fallback"
				}
			}
		}
		if upPos != "" {
			r.Backlog = GTIDBehind(upPos, current)
		}
		for _, p := range []engine.Position{
			{Name: "upstream_gtid_binlog_pos", Value: upPos},
			{Name: "gtid_io_pos", Value: st["Gtid_IO_Pos"]},
			{Name: "gtid_slave_pos", Value: st["Gtid_Slave_Pos"]},
			{Name: "gtid_current_pos", Value: current},
			{Name: "seconds_behind_master", Value: st["Seconds_Behind_Master"]},
		} {
			if p.Value != "" {
				r.Positions = append(r.Positions, p)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// slaveStatus is SlaveStatus at node n.
func slaveStatus(ctx context.Context, n *node) (map[string]string, error) {
	db, err := n.db()
	if err != nil {
		return nil, err
	}
	st, err := SlaveStatus(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	return st, nil
}

// SlaveStatus is SHOW ALL SLAVES STATUS's first row by column, empty on a
// server that replicates from nobody.
func SlaveStatus(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW ALL SLAVES STATUS")
	if err != nil {
		return nil, fmt.Errorf("SHOW ALL SLAVES STATUS: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if !rows.Next() {
		return out, rows.Err()
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, fmt.Errorf("SHOW ALL SLAVES STATUS: %w", err)
	}
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out, rows.Err()
}

// gtidSeqs maps each GTID domain of a position ("0-1-42,2-3-7") to its
// sequence number.
func gtidSeqs(pos string) map[string]int64 {
	out := map[string]int64{}
	for _, g := range strings.Split(pos, ",") {
		f := strings.Split(strings.TrimSpace(g), "-")
		if len(f) != 3 {
			continue
		}
		seq, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		out[f[0]] = max(out[f[0]], seq)
	}
	return out
}

// GTIDBehind is how many transactions of ahead (a GTID position,
// "0-1-42,2-3-7") are missing from behind: per domain the sequence gap,
// summed.
func GTIDBehind(ahead, behind string) int64 {
	b := gtidSeqs(behind)
	var n int64
	for d, s := range gtidSeqs(ahead) {
		if s > b[d] {
			n += s - b[d]
		}
	}
	return n
}

// Processes implements engine.Cluster: each running mariadbd's threads by
// role, from performance_schema.threads (THREAD_OS_ID is the thread's
// Linux TID).
func (c *cluster) Processes(ctx context.Context) ([]engine.Process, error) {
	var out []engine.Process
	for _, n := range c.nodes {
		pid := n.pid()
		if pid == 0 {
			continue
		}
		db, err := n.db()
		if err != nil {
			continue
		}
		rows, err := db.QueryContext(ctx, `SELECT THREAD_OS_ID, NAME, coalesce(PROCESSLIST_COMMAND, '')
			FROM performance_schema.threads WHERE THREAD_OS_ID IS NOT NULL`)
		if err != nil {
			return nil, fmt.Errorf("node %s: read performance_schema.threads: %w", n.Name, err)
		}
		listed := map[int]bool{}
		for rows.Next() {
			var tid int
			var name, command string
			if err := rows.Scan(&tid, &name, &command); err != nil {
				rows.Close()
				return nil, err
			}
			role := threadRole(name, command)
			listed[tid] = true
			out = append(out, engine.Process{Node: n.Name, Role: role, PID: pid, TID: tid, Apply: applyRoles[role]})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		out = append(out, unlistedThreads(n.Name, pid, listed, c.plan.replication == Galera)...)
	}
	return out, nil
}

// unlistedThreads are the process's threads performance_schema does not
// list, so that their CPU counts somewhere: under Galera the provider's
// own (group communication, receiving write-sets, its service thread),
// otherwise a few of the server's (signal handler, timers).
func unlistedThreads(node string, pid int, listed map[int]bool, galera bool) []engine.Process {
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil // the server has just exited
	}
	role := "unlisted"
	if galera {
		role = "galera-provider"
	}
	var out []engine.Process
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || listed[tid] {
			continue
		}
		r := role
		if tid == pid {
			r = "server" // the main thread
		}
		out = append(out, engine.Process{Node: node, Role: r, PID: pid, TID: tid})
	}
	return out
}

// applyRoles receive or apply changes at a replica.
var applyRoles = map[string]bool{"replica-io": true, "replica-sql": true, "replica-worker": true, "wsrep-applier": true}

// threadRole maps a performance_schema thread name (and, for client
// connections, its command) to a role.
func threadRole(name, command string) string {
	switch {
	case name == "thread/sql/one_connection" && strings.HasPrefix(command, "Binlog Dump"):
		return "binlog-dump"
	case name == "thread/sql/one_connection":
		return "connection"
	case name == "thread/sql/slave_io":
		return "replica-io"
	case name == "thread/sql/slave_sql":
		return "replica-sql"
	case name == "thread/sql/rpl_parallel_thread":
		return "replica-worker"
	case strings.Contains(name, "wsrep") && strings.Contains(name, "applier"):
		return "wsrep-applier"
	case strings.Contains(name, "wsrep"):
		return "wsrep"
	case strings.HasPrefix(name, "thread/innodb/"):
		return "innodb"
	}
	return "server"
}

// Checksums runs CHECKSUM TABLE on every node that is up, for tables (every
// table of the replab database when none are given): node -> table ->
// checksum. Equal checksums at every node mean the copies agree.
func (c *cluster) Checksums(ctx context.Context, tables ...string) (map[string]map[string]int64, error) {
	out := map[string]map[string]int64{}
	for _, n := range c.nodes {
		if n.pid() == 0 {
			continue
		}
		db, err := n.db()
		if err != nil {
			return nil, err
		}
		list := tables
		if len(list) == 0 {
			if list, err = tableNames(ctx, db); err != nil {
				return nil, fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
		if len(list) == 0 {
			out[n.Name] = map[string]int64{}
			continue
		}
		q := make([]string, len(list))
		for i, t := range list {
			q[i] = "`" + strings.ReplaceAll(t, "`", "``") + "`"
		}
		rows, err := db.QueryContext(ctx, "CHECKSUM TABLE "+strings.Join(q, ", ")+" EXTENDED")
		if err != nil {
			return nil, fmt.Errorf("node %s: CHECKSUM TABLE: %w", n.Name, err)
		}
		sums := map[string]int64{}
		for rows.Next() {
			var name string
			var sum sql.NullInt64
			if err := rows.Scan(&name, &sum); err != nil {
				rows.Close()
				return nil, err
			}
			sums[strings.TrimPrefix(name, Database+".")] = sum.Int64
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		out[n.Name] = sums
	}
	return out, nil
}

func tableNames(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_type = 'BASE TABLE' ORDER BY table_name", Database)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
