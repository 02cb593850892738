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

// MariaDB servers that another engine's cluster runs in its lab
// (engine.SinkRunner): the sinks of PostgreSQL's pipeline scheme
// (heterogeneous replication). Each node is installed, started,
// controlled and stopped as this engine does its own, with full
// durability (innodb_flush_log_at_trx_commit = 1, sync_binlog = 1) and
// its spec's [node.NAME.settings], and none replicates from another.

var (
	_ engine.SinkRunner = Engine{}
	_ engine.Sinks      = (*sinks)(nil)
)

// StartSinks implements engine.SinkRunner: the named nodes of l's spec,
// started in parallel as the replab user with generated credentials.
// Close stops them (also after an error, which has stopped what started).
func (Engine) StartSinks(ctx context.Context, l *lab.Lab, names []string, log io.Writer) (_ engine.Sinks, err error) {
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
	return &sinks{cluster: c}, nil
}

// sinks are the servers; the cluster's own LagReader, Processes, node
// control and pausing serve them as they are.
type sinks struct{ *cluster }

// Version implements engine.Sinks.
func (s *sinks) Version() string { return s.version }

// DSN implements engine.Sinks: go-sql-driver/mysql's form, database
// replab.
func (s *sinks) DSN(node string) string { return s.byName[node].dsn() }

// Running implements engine.Sinks.
func (s *sinks) Running(node string) bool { return s.byName[node].pid() != 0 }

// Exec implements engine.Sinks.
func (s *sinks) Exec(ctx context.Context, node, q string, args ...any) error {
	return s.byName[node].exec(ctx, q, args...)
}

// QueryInt64 implements engine.Sinks.
func (s *sinks) QueryInt64(ctx context.Context, node, q string, args ...any) (int64, error) {
	var v int64
	err := s.byName[node].query1(ctx, q, args, &v)
	return v, err
}

// Open implements engine.Sinks.
func (s *sinks) Open(ctx context.Context, node, fromSite string) (*sql.DB, error) {
	return s.cluster.Open(ctx, node, fromSite)
}
