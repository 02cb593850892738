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
// driver it takes the connection over and speaks the wire protocol itself
// (see wireConn); other drivers go through database/sql. A failed poll
// drops the connection; the next one takes a new one. Close it when its
// watcher has stopped.
type SQLQuerier struct {
	db   *sql.DB
	conn *sql.Conn // database/sql path
	wire *wireConn // pgx path
	// noWire forces the database/sql path (tests).
	noWire bool
	stmt   *sql.Stmt
	w      int32
	seq    int64
}

// NewSQLQuerier polls through db.
func NewSQLQuerier(db *sql.DB) *SQLQuerier { return &SQLQuerier{db: db} }

// pgxConner is pgx's database/sql connection (stdlib.Conn).
type pgxConner interface{ Conn() *pgx.Conn }

// Positions implements Querier.
func (q *SQLQuerier) Positions(ctx context.Context, dst []int64) error {
	if q.conn == nil && q.wire == nil {
		if err := q.connect(ctx); err != nil {
			return err
		}
	}
	if q.wire != nil {
		err := q.wire.poll(ctx, func(w int32, seq int64) {
			if w >= 0 && int(w) < len(dst) {
				dst[w] = seq
			}
		})
		if q.wire.fd < 0 {
			q.wire = nil
		}
		return err
	}
	err := q.sqlPositions(ctx, dst)
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
	isPgx := false
	_ = c.Raw(func(dc any) error {
		_, isPgx = dc.(pgxConner)
		return nil
	})
	if isPgx && !q.noWire {
		// The pool gets back a connection pgx reports closed, and drops it.
		defer c.Close()
		return c.Raw(func(dc any) error {
			w, err := hijackWire(ctx, dc.(pgxConner).Conn().PgConn(), SelectStatement)
			q.wire = w
			return err
		})
	}
	q.conn = c
	if q.stmt, err = c.PrepareContext(ctx, SelectStatement); err != nil {
		q.Close()
		return fmt.Errorf("prepare %s: %w", SelectStatement, err)
	}
	return nil
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

// Close ends the connection (or returns it to the pool). Positions may be
// called again afterwards; it takes a new one.
func (q *SQLQuerier) Close() error {
	if q.wire != nil {
		q.wire.close()
		q.wire = nil
	}
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
