package lagprobe

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SQLQuerier polls replab_lag over one connection taken from a pool that
// connects to the replica from the replica's own site (for a lab:
// engine.Cluster.Open(ctx, replica, replicaSite)). With pgx's database/sql
// driver it queries through pgx directly, which costs about a third less
// CPU per poll. A failed poll drops the connection; the next one takes a
// new one. Close it when its watcher has stopped.
type SQLQuerier struct {
	db   *sql.DB
	conn *sql.Conn
	pgx  bool
	// noPgx forces the database/sql path (tests).
	noPgx bool
	stmt  *sql.Stmt // drivers other than pgx
	w     int32
	seq   int64
}

// NewSQLQuerier polls through db.
func NewSQLQuerier(db *sql.DB) *SQLQuerier { return &SQLQuerier{db: db} }

// pgxConner is pgx's database/sql connection (stdlib.Conn).
type pgxConner interface{ Conn() *pgx.Conn }

// Positions implements Querier.
func (q *SQLQuerier) Positions(ctx context.Context, dst []int64) error {
	if q.conn == nil {
		if err := q.connect(ctx); err != nil {
			return err
		}
	}
	var err error
	if q.pgx {
		err = q.conn.Raw(func(dc any) error { return q.pgxPositions(ctx, dc.(pgxConner).Conn(), dst) })
	} else {
		err = q.sqlPositions(ctx, dst)
	}
	if err != nil {
		q.Close()
	}
	return err
}

func (q *SQLQuerier) connect(ctx context.Context) error {
	c, err := q.db.Conn(ctx)
	if err != nil {
		return err
	}
	_ = c.Raw(func(dc any) error {
		_, q.pgx = dc.(pgxConner)
		q.pgx = q.pgx && !q.noPgx
		return nil
	})
	q.conn = c
	if !q.pgx {
		if q.stmt, err = c.PrepareContext(ctx, SelectStatement); err != nil {
			q.Close()
			return fmt.Errorf("prepare %s: %w", SelectStatement, err)
		}
	}
	return nil
}

func (q *SQLQuerier) pgxPositions(ctx context.Context, c *pgx.Conn, dst []int64) error {
	rows, err := c.Query(ctx, SelectStatement)
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

func (q *SQLQuerier) sqlPositions(ctx context.Context, dst []int64) error {
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

// Close returns the connection to the pool. Positions may be called again
// afterwards; it takes a new one.
func (q *SQLQuerier) Close() error {
	if q.stmt != nil {
		q.stmt.Close()
		q.stmt = nil
	}
	var err error
	if q.conn != nil {
		err = q.conn.Close()
		q.conn = nil
	}
	return err
}
