package enginekit

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"replab/internal/engine"
)

// The lag probe's stamps in SQL: the table replab_lag holds one row per
// writer with the sequence number of its last committed tracked
// transaction. Every tracked transaction updates its writer's row, the
// table replicates like the workload's, and a reader at a replica selects
// it. This is the LagStamps of every SQL cluster that brings none of its
// own.

// LagTableName is the SQL stamps' table.
const LagTableName = "replab_lag"

// LagTable is replab_lag, for a Schema: created with the workload's tables
// and replicated whole to every replica (a partial one too, or its lag
// would be unknowable).
func LagTable() engine.Table {
	return engine.Table{
		Name:       LagTableName,
		Everywhere: true,
		Create: map[engine.Dialect]string{
			engine.Postgres: "CREATE TABLE " + LagTableName + " (writer int PRIMARY KEY, seq bigint NOT NULL)",
			engine.MySQL:    "CREATE TABLE " + LagTableName + " (writer INT PRIMARY KEY, seq BIGINT NOT NULL) ENGINE=InnoDB",
		},
	}
}

// LagSelectSQL is what a reader runs at a replica: (writer, seq) rows.
const LagSelectSQL = "SELECT writer, seq FROM " + LagTableName

// lagSeedBatch is how many rows one seed statement inserts.
const lagSeedBatch = 1000

// LagSeedSQL are the statements that (re)set one row per writer to seq 0,
// in batches, in dialect (engine.Postgres or engine.MySQL).
func LagSeedSQL(dialect engine.Dialect, writers int) ([]string, error) {
	var tail string
	switch dialect {
	case engine.Postgres:
		tail = " ON CONFLICT (writer) DO UPDATE SET seq = 0"
	case engine.MySQL:
		tail = " ON DUPLICATE KEY UPDATE seq = 0"
	default:
		return nil, unknownDialect(dialect)
	}
	var out []string
	for lo := 0; lo < writers; lo += lagSeedBatch {
		var b strings.Builder
		b.WriteString("INSERT INTO " + LagTableName + " (writer, seq) VALUES ")
		for w := lo; w < min(lo+lagSeedBatch, writers); w++ {
			if w > lo {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "(%d, 0)", w)
		}
		b.WriteString(tail)
		out = append(out, b.String())
	}
	return out, nil
}

// LagUpdateSQL is the statement a tracked transaction runs once, with the
// arguments (seq, writer).
func LagUpdateSQL(dialect engine.Dialect) (string, error) {
	switch dialect {
	case engine.Postgres:
		return "UPDATE " + LagTableName + " SET seq = $1 WHERE writer = $2", nil
	case engine.MySQL:
		return "UPDATE " + LagTableName + " SET seq = ? WHERE writer = ?", nil
	}
	return "", unknownDialect(dialect)
}

func unknownDialect(d engine.Dialect) error {
	return fmt.Errorf("the lag probe's table has no SQL for dialect %q (it knows postgres, mysql)", d)
}

// StampsOf is how lag is stamped and read on c: its own LagStamps, or
// replab_lag through its SQL (with its own LagReaders when it has them).
// update is the SQL a tracked transaction runs ("" for a cluster with its
// own stamps: its sessions stamp). It fails when c has neither.
func StampsOf(c engine.Cluster) (stamps engine.LagStamps, update string, err error) {
	if ls, ok := c.(engine.LagStamps); ok {
		return ls, "", nil
	}
	sc, ok := c.(engine.SQL)
	if !ok {
		return nil, "", fmt.Errorf("the cluster (%T) has neither SQL nor lag stamps of its own: replication lag cannot be measured", c)
	}
	if update, err = LagUpdateSQL(sc.Dialect()); err != nil {
		return nil, "", err
	}
	return &sqlStamps{c: c, sql: sc}, update, nil
}

// sqlStamps is engine.LagStamps over replab_lag.
type sqlStamps struct {
	c   engine.Cluster
	sql engine.SQL
}

// ResetLag implements engine.LagStamps: the seed statements run at every root
// source (the first master of a multi-master cluster: the reset
// replicates to the others).
func (s *sqlStamps) ResetLag(ctx context.Context, writers int) error {
	stmts, err := LagSeedSQL(s.sql.Dialect(), writers)
	if err != nil {
		return err
	}
	for _, n := range engine.Roots(s.c.Nodes()) {
		db, err := s.sql.Open(ctx, n.Name, n.Site)
		if err != nil {
			return err
		}
		for _, q := range stmts {
			if _, err := db.ExecContext(ctx, q); err != nil {
				db.Close()
				return fmt.Errorf("reset lag table at %s: %w", n.Name, err)
			}
		}
		db.Close()
	}
	return nil
}

// LagReader implements engine.LagReaders: the cluster's own reader, or one over
// database/sql from the replica's own site.
func (s *sqlStamps) LagReader(ctx context.Context, node string) (engine.LagReader, error) {
	if lr, ok := s.c.(engine.LagReaders); ok {
		return lr.LagReader(ctx, node)
	}
	site := ""
	for _, n := range s.c.Nodes() {
		if n.Name == node {
			site = n.Site
		}
	}
	db, err := s.sql.Open(ctx, node, site)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return &SQLLagReader{DB: db, CloseDB: true}, nil
}

// SQLLagReader reads replab_lag through database/sql, over one connection
// of DB kept between polls; a failed poll drops it and the next takes a
// new one.
type SQLLagReader struct {
	DB      *sql.DB
	CloseDB bool // Close closes DB too

	conn *sql.Conn
	stmt *sql.Stmt
	w    int32
	seq  int64
}

// Positions implements engine.LagReader.
func (q *SQLLagReader) Positions(ctx context.Context, dst []int64) error {
	if q.conn == nil {
		c, err := q.DB.Conn(ctx)
		if err != nil {
			return err
		}
		st, err := c.PrepareContext(ctx, LagSelectSQL)
		if err != nil {
			c.Close()
			return fmt.Errorf("prepare %s: %w", LagSelectSQL, err)
		}
		q.conn, q.stmt = c, st
	}
	err := q.read(ctx, dst)
	if err != nil {
		q.drop()
	}
	return err
}

func (q *SQLLagReader) read(ctx context.Context, dst []int64) error {
	rows, err := q.stmt.QueryContext(ctx)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(&q.w, &q.seq); err != nil {
			return err
		}
		if q.w >= 0 && int(q.w) < len(dst) {
			dst[q.w] = q.seq
		}
	}
	return rows.Err()
}

func (q *SQLLagReader) drop() {
	if q.stmt != nil {
		q.stmt.Close()
		q.stmt = nil
	}
	if q.conn != nil {
		q.conn.Close()
		q.conn = nil
	}
}

// Close implements engine.LagReader.
func (q *SQLLagReader) Close() error {
	q.drop()
	if q.CloseDB {
		return q.DB.Close()
	}
	return nil
}
