package target

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"replab/internal/engine"
	"replab/internal/engine/pgpipe"
	"replab/internal/enginekit"
	"replab/internal/spec"
)

// postgres is a PostgreSQL primary and its physical standbys.
type postgres struct {
	t   *spec.Target
	cfg map[string]*pgx.ConnConfig // by node; the password set

	// mu guards kept: one connection per node for the reads made every
	// second (a new one would cost round trips each time).
	mu   sync.Mutex
	kept map[string]*pgx.Conn
}

func newPostgres(t *spec.Target, password string) (*postgres, error) {
	p := &postgres{t: t, cfg: map[string]*pgx.ConnConfig{}, kept: map[string]*pgx.Conn{}}
	for _, n := range t.Nodes {
		cfg, err := parseDSN(n.DSN)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		if password != "" {
			cfg.Password = password
		}
		cfg.ConnectTimeout = t.ConnectTimeout
		p.cfg[n.Name] = cfg
	}
	return p, nil
}

// parseDSN parses a libpq connection string (key=value or URL).
func parseDSN(dsn string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		var pe *pgconn.ParseConfigError
		if errors.As(err, &pe) && pe.Unwrap() != nil {
			err = pe.Unwrap() // its own text repeats the DSN
		}
		return nil, fmt.Errorf("not a PostgreSQL connection string (%v); want key=value pairs like \"host=10.0.0.5 port=5432 user=replab dbname=app\" or a postgres:// URL", err)
	}
	return cfg, nil
}

func (p *postgres) dialect() engine.Dialect { return engine.Postgres }

func (p *postgres) addr(node string) (string, int) {
	cfg := p.cfg[node]
	return cfg.Host, int(cfg.Port)
}

func (p *postgres) user(node string) (string, string) {
	return p.cfg[node].User, p.cfg[node].Database
}

// connect opens one connection to node, its failure said in a user's
// words.
func (p *postgres) connect(ctx context.Context, node string) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, p.cfg[node])
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("the server refused the connection: %s (check the dsn's user and dbname, the password in the environment or password_file, and pg_hba.conf)", pe.Message)
		}
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) && ce.Unwrap() != nil {
			err = ce.Unwrap() // without pgconn's repetition of the DSN
		}
		return nil, fmt.Errorf("cannot connect: %w (check the address, that the server runs and listens there, and that this host may reach it)", err)
	}
	return conn, nil
}

// with runs f on node's kept connection, made on first use and dropped
// when f fails (the next call makes a new one).
func (p *postgres) with(ctx context.Context, node string, f func(*pgx.Conn) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	conn := p.kept[node]
	if conn == nil {
		var err error
		if conn, err = p.connect(ctx, node); err != nil {
			return err
		}
		p.kept[node] = conn
	}
	if err := f(conn); err != nil {
		conn.Close(context.Background())
		delete(p.kept, node)
		return err
	}
	return nil
}

func (p *postgres) facts(ctx context.Context, node string) (fact, error) {
	conn, err := p.connect(ctx, node)
	if err != nil {
		return fact{}, err
	}
	defer conn.Close(context.Background())
	var f fact
	var user string
	var monitor bool
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version'), pg_is_in_recovery(), current_user,
		pg_has_role('pg_read_all_stats', 'USAGE')`).Scan(&f.version, &f.replica, &user, &monitor)
	if err != nil {
		return f, fmt.Errorf("read its state: %w", err)
	}
	f.version = "PostgreSQL " + f.version
	if err := conn.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&f.sysid); err != nil {
		return f, fmt.Errorf("read the system identifier: %w (user %s needs EXECUTE on pg_control_system(): GRANT pg_monitor TO %s)", err, user, user)
	}
	if !f.replica {
		return f, nil
	}
	if !monitor {
		return f, fmt.Errorf("user %s may not read where the standby replicates from (pg_stat_wal_receiver's sender): GRANT pg_monitor TO %s", user, user)
	}
	err = conn.QueryRow(ctx, `SELECT coalesce(sender_host, ''), coalesce(sender_port, 0), coalesce(status, '')
		FROM pg_stat_wal_receiver`).Scan(&f.senderHost, &f.senderPort, &f.receiver)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("read pg_stat_wal_receiver: %w", err)
	}
	return f, nil
}

func (p *postgres) schema(ctx context.Context, primary string) (schemaState, error) {
	var st schemaState
	err := p.with(ctx, primary, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1),
			has_database_privilege(current_database(), 'CREATE'),
			coalesce((SELECT string_agg(relname, ', ' ORDER BY relname) FROM pg_class k JOIN pg_namespace s ON s.oid = k.relnamespace
				WHERE s.nspname = $1 AND k.relkind IN ('r', 'p', 'v', 'm', 'f')), '')`, p.t.Schema).Scan(&st.exists, &st.mayCreate, &st.tables)
	})
	return st, err
}

func (p *postgres) tables(ctx context.Context, primary string) ([]string, error) {
	var have []string
	err := p.with(ctx, primary, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT relname FROM pg_class k JOIN pg_namespace s ON s.oid = k.relnamespace WHERE s.nspname = $1 AND k.relkind IN ('r', 'p')`, p.t.Schema)
		if err != nil {
			return err
		}
		have, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return have, err
}

// create runs in one transaction: all of it or nothing.
func (p *postgres) create(ctx context.Context, primary string, s engine.Schema, exists bool, made func()) error {
	conn, err := p.connect(ctx, primary)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	schema := pgx.Identifier{p.t.Schema}.Sanitize()
	var stmts []string
	if !exists {
		stmts = append(stmts, "CREATE SCHEMA "+schema)
	}
	stmts = append(stmts, "SET LOCAL search_path = "+schema)
	for _, t := range s.Tables {
		ddl, ok := t.Create[engine.Postgres]
		if !ok {
			return fmt.Errorf("table %s has no PostgreSQL definition", t.Name)
		}
		stmts = append(stmts, ddl)
		stmts = append(stmts, t.Indexes[engine.Postgres]...)
	}
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", enginekit.FirstWords(q), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("create schema %s: %w", p.t.Schema, err)
	}
	made()
	return nil
}

func (p *postgres) open(node string) (*sql.DB, error) {
	cc := p.cfg[node].Copy()
	cc.RuntimeParams["search_path"] = p.t.Schema
	return stdlib.OpenDB(*cc), nil
}

// pipe is pgpipe's, as in the lab (a TLS connection cannot: ErrNoPipeline).
func (p *postgres) pipe(ctx context.Context, db *sql.DB, stmts []string) (engine.Pipe, error) {
	return pgpipe.Open(ctx, db, stmts)
}

// position is the primary's flushed WAL: what the standbys can have.
func (p *postgres) position(ctx context.Context, primary string) (string, error) {
	var lsn string
	err := p.with(ctx, primary, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn()::text`).Scan(&lsn)
	})
	return lsn, err
}

func (p *postgres) reached(ctx context.Context, node, pos string) (bool, string, error) {
	var done bool
	var at string
	err := p.with(ctx, node, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false), coalesce(pg_last_wal_replay_lsn()::text, '')`, pos).Scan(&done, &at)
	})
	return done, at, err
}

func (p *postgres) state(ctx context.Context, node, from, pos string) (engine.ReplicaState, error) {
	r := engine.ReplicaState{Node: node, From: from, Kind: "physical", BacklogUnit: engine.UnitBytes, ReplayLagMs: -1}
	var recv, replay string
	err := p.with(ctx, node, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT coalesce((SELECT status FROM pg_stat_wal_receiver), 'stopped'),
			coalesce(pg_last_wal_receive_lsn()::text, ''), coalesce(pg_last_wal_replay_lsn()::text, ''),
			coalesce(pg_wal_lsn_diff($1::pg_lsn, pg_last_wal_replay_lsn()), 0)::bigint`, pos).Scan(&r.State, &recv, &replay, &r.Backlog)
	})
	if err != nil {
		return r, err
	}
	r.Backlog = max(r.Backlog, 0)
	for _, ps := range []engine.Position{{Name: "receive_lsn", Value: recv}, {Name: "replay_lsn", Value: replay}} {
		if ps.Value != "" {
			r.Positions = append(r.Positions, ps)
		}
	}
	return r, nil
}

func (p *postgres) drop(ctx context.Context, primary string) error {
	return p.with(ctx, primary, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{p.t.Schema}.Sanitize()+" CASCADE")
		return err
	})
}

func (p *postgres) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, conn := range p.kept {
		conn.Close(context.Background())
	}
	clear(p.kept)
}
