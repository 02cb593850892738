package workload

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// pgLoader is PostgreSQL's bulk path: COPY … FROM STDIN in the binary
// format, over one connection.
type pgLoader struct {
	conn *pgx.Conn
}

// RowSource has exactly pgx.CopyFromSource's methods, so a workload's rows
// go to COPY as they are.
var _ pgx.CopyFromSource = RowSource(nil)

// PostgresLoader loads through conn with COPY (binary). conn is used by
// one Load at a time; the caller connects it (from the site the load
// should come from) and closes it. Copy is one COPY statement, committed
// on its own; RowSource.Next runs on pgx's encoding goroutine, one call
// after another.
func PostgresLoader(conn *pgx.Conn) Loader {
	return &pgLoader{conn: conn}
}

// Copy implements Loader. table may be schema-qualified ("s.t").
func (l *pgLoader) Copy(ctx context.Context, table string, columns []string, rows RowSource) (int64, error) {
	n, err := l.conn.CopyFrom(ctx, pgIdentifier(table), columns, rows)
	if err != nil {
		return n, fmt.Errorf("copy into %s: %w", table, err)
	}
	return n, nil
}

// Exec implements Loader.
func (l *pgLoader) Exec(ctx context.Context, sql string) error {
	if _, err := l.conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", firstWords(sql), err)
	}
	return nil
}

// pgIdentifier splits a possibly schema-qualified table name.
func pgIdentifier(table string) pgx.Identifier {
	return pgx.Identifier(strings.Split(table, "."))
}

// firstWords shortens a statement for an error message.
func firstWords(sql string) string {
	s := strings.Join(strings.Fields(sql), " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}
