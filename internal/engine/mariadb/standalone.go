package mariadb

import (
	"context"
	"database/sql"
	"fmt"
	"io"

	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/lab"
)

// Servers are MariaDB servers that another engine's cluster runs in its
// lab: the targets of PostgreSQL's pipeline scheme (heterogeneous
// replication). Each node is installed, started, controlled and stopped
// as this engine does its own, with full durability
// (innodb_flush_log_at_trx_commit = 1, sync_binlog = 1) and its spec's
// [node.NAME.settings], and none replicates from another.
type Servers struct{ c *cluster }

// StartServers installs and starts the named nodes of l's spec, in
// parallel, as the replab user with generated credentials. Close stops
// them (also after an error, which has stopped what started).
func StartServers(ctx context.Context, l *lab.Lab, names []string, log io.Writer) (_ *Servers, err error) {
	c, err := newCluster(ctx, l, &plan{replication: Async, flushLog: 1, syncBinlog: 1}, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if err := c.layout(names...); err != nil {
		return nil, err
	}
	if len(c.nodes) != len(names) {
		return nil, fmt.Errorf("mariadb: %d of the nodes %v are in the spec", len(c.nodes), names)
	}
	if err := enginekit.Each(c.nodes, func(n *node) error { return c.createNode(ctx, n) }); err != nil {
		return nil, err
	}
	return &Servers{c: c}, nil
}

// Version is the servers' MariaDB version.
func (s *Servers) Version() string { return s.c.version }

// Has says whether node is one of the servers.
func (s *Servers) Has(node string) bool { return s.c.byName[node] != nil }

// DSN is node's go-sql-driver/mysql connection string (database replab),
// with its password: it works from every site.
func (s *Servers) DSN(node string) string { return s.c.byName[node].dsn() }

// Exec runs one statement at node.
func (s *Servers) Exec(ctx context.Context, node, q string, args ...any) error {
	return s.c.byName[node].exec(ctx, q, args...)
}

// QueryInt64 reads one integer at node.
func (s *Servers) QueryInt64(ctx context.Context, node, q string, args ...any) (int64, error) {
	var v int64
	err := s.c.byName[node].query1(ctx, q, args, &v)
	return v, err
}

// Open is a pool to node for clients in fromSite.
func (s *Servers) Open(ctx context.Context, node, fromSite string) (*sql.DB, error) {
	return s.c.Open(ctx, node, fromSite)
}

// PID is node's server process, 0 when it is not running.
func (s *Servers) PID(node string) int { return s.c.byName[node].pid() }

// LagReader reads replab_lag at node (engine.LagReaders).
func (s *Servers) LagReader(ctx context.Context, node string) (engine.LagReader, error) {
	return s.c.LagReader(ctx, node)
}

// Processes are the servers' threads by role (engine.Cluster's).
func (s *Servers) Processes(ctx context.Context) ([]engine.Process, error) { return s.c.Processes(ctx) }

// Control kills, stops, starts, restarts, pauses and resumes the servers.
func (s *Servers) Control() interface {
	engine.NodeControl
	engine.Pauser
} {
	return s.c
}

// Close stops every server.
func (s *Servers) Close() error { return s.c.Close() }
