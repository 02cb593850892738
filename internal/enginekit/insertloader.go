package enginekit

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"replab/internal/engine"
)

// maxParams bounds the parameters of one INSERT: PostgreSQL and MySQL
// both take at most 65535.
const maxParams = 60000

// maxInsertRows bounds the rows of one INSERT, so that one statement
// stays a few hundred kilobytes.
const maxInsertRows = 1000

// InsertLoader loads through multi-row INSERTs over db: the bulk path of
// an SQL engine without a faster one (engine.BulkLoader). dialect gives
// the placeholders: engine.Postgres ($1, $2, …) or engine.MySQL (?).
func InsertLoader(db *sql.DB, dialect engine.Dialect) engine.Loader {
	return &insertLoader{db: db, dialect: dialect}
}

type insertLoader struct {
	db      *sql.DB
	dialect engine.Dialect
}

// Copy implements engine.Loader: rows go in statements of up to maxInsertRows
// rows, all in one transaction.
func (l *insertLoader) Copy(ctx context.Context, table string, columns []string, rows engine.RowSource) (n int64, err error) {
	if len(columns) == 0 {
		return 0, fmt.Errorf("copy into %s: no columns", table)
	}
	per := max(1, min(maxInsertRows, maxParams/len(columns)))
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("copy into %s: %w", table, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	args := make([]any, 0, per*len(columns))
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		k := len(args) / len(columns)
		res, err := tx.ExecContext(ctx, l.statement(table, columns, k), args...)
		if err != nil {
			return fmt.Errorf("copy into %s: %w", table, err)
		}
		if got, err := res.RowsAffected(); err == nil && got != int64(k) {
			return fmt.Errorf("copy into %s: %d rows stored of %d sent", table, got, k)
		}
		n += int64(k)
		args = args[:0]
		return nil
	}
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			return n, fmt.Errorf("copy into %s: %w", table, err)
		}
		if len(v) != len(columns) {
			return n, fmt.Errorf("copy into %s: a row of %d values for %d columns", table, len(v), len(columns))
		}
		args = append(args, v...)
		if len(args) == per*len(columns) {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("copy into %s: %w", table, err)
	}
	if err := flush(); err != nil {
		return n, err
	}
	if err := tx.Commit(); err != nil {
		return n, fmt.Errorf("copy into %s: commit: %w", table, err)
	}
	return n, nil
}

// statement is an INSERT of k rows with the dialect's placeholders.
func (l *insertLoader) statement(table string, columns []string, k int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES ", table, strings.Join(columns, ", "))
	p := 0
	for i := range k {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for j := range columns {
			if j > 0 {
				b.WriteString(", ")
			}
			p++
			if l.dialect == engine.Postgres {
				fmt.Fprintf(&b, "$%d", p)
			} else {
				b.WriteByte('?')
			}
		}
		b.WriteByte(')')
	}
	return b.String()
}

// Exec implements engine.Loader.
func (l *insertLoader) Exec(ctx context.Context, q string) error {
	if _, err := l.db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("%s: %w", FirstWords(q), err)
	}
	return nil
}

// Close implements engine.Loader; the pool belongs to the caller.
func (l *insertLoader) Close() error { return nil }
