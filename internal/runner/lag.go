package runner

import (
	"context"

	"github.com/jackc/pgx/v5"

	"replab/internal/engine"
)

// pgQuerier reads a replica's replab_lag rows over a connection made in
// the replica's own site, so a poll does not cross a WAN link.
type pgQuerier struct {
	conn *pgx.Conn
}

func (r *run) querier(ctx context.Context, n engine.Node) (*pgQuerier, error) {
	c, err := r.pgConn(ctx, n, n.Site)
	if err != nil {
		return nil, err
	}
	return &pgQuerier{conn: c}, nil
}

// Positions implements lagprobe.Querier: dst[writer] = visible seq.
func (q *pgQuerier) Positions(ctx context.Context, dst []int64) error {
	rows, err := q.conn.Query(ctx, "SELECT writer, seq FROM replab_lag")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var w int
		var seq int64
		if err := rows.Scan(&w, &seq); err != nil {
			return err
		}
		if w >= 0 && w < len(dst) {
			dst[w] = seq
		}
	}
	return rows.Err()
}

func (q *pgQuerier) close() { _ = q.conn.Close(context.Background()) }
