package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"replab/internal/engine"
	"replab/internal/enginekit"
)

// Open implements engine.SQL: a pgx pool (through database/sql) whose
// connections are dialled from inside fromSite.
func (c *cluster) Open(ctx context.Context, name, fromSite string) (*sql.DB, error) {
	if c.isSink(name) {
		// A MariaDB sink: for readers whose SQL both dialects speak
		// (the check of acknowledged commits); the workload runs at the
		// primary.
		return c.sinks.Open(ctx, name, fromSite)
	}
	cfg, err := c.connConfig(name, fromSite)
	if err != nil {
		return nil, err
	}
	return stdlib.OpenDB(*cfg), nil
}

// connConfig is node name's pgx configuration for a client in fromSite.
func (c *cluster) connConfig(name, fromSite string) (*pgx.ConnConfig, error) {
	n := c.byName[name]
	if n == nil {
		return nil, fmt.Errorf("no node %q", name)
	}
	site := c.lab.Site(fromSite)
	if site == nil {
		return nil, fmt.Errorf("no site %q", fromSite)
	}
	cfg, err := pgx.ParseConfig(n.dsn())
	if err != nil {
		return nil, err
	}
	cfg.DialFunc = dialer(site)
	return cfg, nil
}

// Loader implements engine.BulkLoader: COPY … FROM STDIN in the binary
// format over one connection from fromSite.
func (c *cluster) Loader(ctx context.Context, node, fromSite string) (engine.Loader, error) {
	cfg, err := c.connConfig(node, fromSite)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s from %s: %w", node, fromSite, err)
	}
	return &copyLoader{conn: conn}, nil
}

// copyLoader is PostgreSQL's bulk path.
type copyLoader struct {
	conn *pgx.Conn
}

// RowSource has exactly pgx.CopyFromSource's methods, so a workload's rows
// go to COPY as they are.
var _ pgx.CopyFromSource = engine.RowSource(nil)

// Copy implements engine.Loader. table may be schema-qualified ("s.t").
func (l *copyLoader) Copy(ctx context.Context, table string, columns []string, rows engine.RowSource) (int64, error) {
	n, err := l.conn.CopyFrom(ctx, pgIdentifier(table), columns, rows)
	if err != nil {
		return n, fmt.Errorf("copy into %s: %w", table, err)
	}
	return n, nil
}

// Exec implements engine.Loader.
func (l *copyLoader) Exec(ctx context.Context, q string) error {
	if _, err := l.conn.Exec(ctx, q); err != nil {
		return fmt.Errorf("%s: %w", enginekit.FirstWords(q), err)
	}
	return nil
}

// Close implements engine.Loader.
func (l *copyLoader) Close() error { return l.conn.Close(context.Background()) }

// pgIdentifier splits a possibly schema-qualified table name.
func pgIdentifier(table string) pgx.Identifier {
	return pgx.Identifier(strings.Split(table, "."))
}
