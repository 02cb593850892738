package postgres

import (
	"context"
	"database/sql"

	"replab/internal/engine"
	"replab/internal/engine/pgpipe"
)

// Pipe implements engine.Pipeliner: pgpipe's pipelined transactions on a
// connection taken out of db.
func (c *cluster) Pipe(ctx context.Context, db *sql.DB, stmts []string) (engine.Pipe, error) {
	return pgpipe.Open(ctx, db, stmts)
}
