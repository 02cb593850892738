package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"replab/internal/engine"
	"replab/internal/engine/pgpipe"
	"replab/internal/enginekit"
	"replab/internal/spec"
)

// Target mode's PostgreSQL side (engine.Attacher): a primary and its
// physical standbys that replab did not build, reached through libpq
// connection strings; replab's tables go in a schema of their own.

var (
	_ engine.Attacher  = Engine{}
	_ engine.Pipeliner = (*attached)(nil)
)

// ValidateTarget implements engine.Attacher.
func (Engine) ValidateTarget(s *spec.Spec) error {
	errs := s.NewErrors()
	for _, n := range s.Target.Nodes {
		if n.Role == "master" {
			errs.Add("target.node."+n.Name+".role", `masters are read from a MariaDB Galera cluster (engine = "mariadb"); PostgreSQL multi-master targets (pglogical) are not supported yet`)
		}
		field := "target.node." + n.Name + ".dsn"
		if hasPassword(n.DSN) {
			errs.Add(field, "the connection string carries a password, and the spec is kept with the results: remove it and give the password in the environment (PGPASSWORD, ~/.pgpass) or with [target] password_file")
			continue
		}
		if _, err := parseDSN(n.DSN); err != nil {
			errs.Add(field, "%v", err)
		}
	}
	return errs.Err()
}

var kvPasswordRE = regexp.MustCompile(`(^|\s)password\s*=`)

// hasPassword says whether a libpq connection string (key=value or URL)
// carries a password.
func hasPassword(dsn string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return strings.Contains(dsn, "password")
		}
		if _, set := u.User.Password(); set {
			return true
		}
		return u.Query().Has("password")
	}
	return kvPasswordRE.MatchString(dsn)
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

// Opener implements engine.Attacher.
func (Engine) Opener(dsn string) (func() (*sql.DB, error), error) {
	pc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("not a PostgreSQL connection string: %v", errors.Unwrap(err))
	}
	return func() (*sql.DB, error) { return stdlib.OpenDB(*pc), nil }, nil
}

// Attach implements engine.Attacher.
func (Engine) Attach(t *spec.Target, password string) (engine.Attached, error) {
	a := &attached{t: t, cfg: map[string]*pgx.ConnConfig{}, kept: map[string]*pgx.Conn{}}
	for _, n := range t.Nodes {
		cfg, err := parseDSN(n.DSN)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		if password != "" {
			cfg.Password = password
		}
		cfg.ConnectTimeout = t.ConnectTimeout
		a.cfg[n.Name] = cfg
	}
	return a, nil
}

// attached is a PostgreSQL primary and its physical standbys.
type attached struct {
	t   *spec.Target
	cfg map[string]*pgx.ConnConfig // by node; the password set

	// mu guards kept: one connection per node for the reads made every
	// second (a new one would cost round trips each time).
	mu   sync.Mutex
	kept map[string]*pgx.Conn
}

func (a *attached) Addr(node string) (string, int) {
	cfg := a.cfg[node]
	return cfg.Host, int(cfg.Port)
}

// connect opens one connection to node, its failure said in a user's
// words.
func (a *attached) connect(ctx context.Context, node string) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, a.cfg[node])
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
func (a *attached) with(ctx context.Context, node string, f func(*pgx.Conn) error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	conn := a.kept[node]
	if conn == nil {
		var err error
		if conn, err = a.connect(ctx, node); err != nil {
			return err
		}
		a.kept[node] = conn
	}
	if err := f(conn); err != nil {
		conn.Close(context.Background())
		delete(a.kept, node)
		return err
	}
	return nil
}

func (a *attached) Facts(ctx context.Context, node string) (engine.ServerFacts, error) {
	conn, err := a.connect(ctx, node)
	if err != nil {
		return engine.ServerFacts{}, err
	}
	defer conn.Close(context.Background())
	var f engine.ServerFacts
	var user string
	var monitor bool
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version'), pg_is_in_recovery(), current_user,
		pg_has_role('pg_read_all_stats', 'USAGE')`).Scan(&f.Version, &f.Replica, &user, &monitor)
	if err != nil {
		return f, fmt.Errorf("read its state: %w", err)
	}
	f.Version = "PostgreSQL " + f.Version
	if err := conn.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&f.SystemID); err != nil {
		return f, fmt.Errorf("read the system identifier: %w (user %s needs EXECUTE on pg_control_system(): GRANT pg_monitor TO %s)", err, user, user)
	}
	if !f.Replica {
		return f, nil
	}
	if !monitor {
		return f, fmt.Errorf("user %s may not read where the standby replicates from (pg_stat_wal_receiver's sender): GRANT pg_monitor TO %s", user, user)
	}
	var receiver string
	err = conn.QueryRow(ctx, `SELECT coalesce(sender_host, ''), coalesce(sender_port, 0), coalesce(status, '')
		FROM pg_stat_wal_receiver`).Scan(&f.UpstreamHost, &f.UpstreamPort, &receiver)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("read pg_stat_wal_receiver: %w", err)
	}
	f.Receiving = receiver != ""
	return f, nil
}

func (a *attached) Schema(ctx context.Context, primary string) (engine.SchemaState, error) {
	st := engine.SchemaState{Word: "schema"}
	var mayCreate bool
	err := a.with(ctx, primary, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1),
			has_database_privilege(current_database(), 'CREATE'),
			coalesce((SELECT string_agg(relname, ', ' ORDER BY relname) FROM pg_class k JOIN pg_namespace s ON s.oid = k.relnamespace
				WHERE s.nspname = $1 AND k.relkind IN ('r', 'p', 'v', 'm', 'f')), '')`, a.t.Schema).Scan(&st.Exists, &mayCreate, &st.Objects)
	})
	if err == nil && !mayCreate {
		user, db := a.cfg[primary].User, a.cfg[primary].Database
		st.CannotCreate = fmt.Sprintf("user %s may not create schemas in database %s: GRANT CREATE ON DATABASE %s TO %s, or create schema %s with replab's tables yourself and set create_schema = false",
			user, db, db, user, a.t.Schema)
	}
	return st, err
}

func (a *attached) Tables(ctx context.Context, primary string) ([]string, error) {
	var have []string
	err := a.with(ctx, primary, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT relname FROM pg_class k JOIN pg_namespace s ON s.oid = k.relnamespace WHERE s.nspname = $1 AND k.relkind IN ('r', 'p')`, a.t.Schema)
		if err != nil {
			return err
		}
		have, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return have, err
}

// Create runs in one transaction: all of it or nothing.
func (a *attached) Create(ctx context.Context, primary string, s engine.Schema, exists bool, made func()) error {
	conn, err := a.connect(ctx, primary)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	schema := pgx.Identifier{a.t.Schema}.Sanitize()
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
		return fmt.Errorf("create schema %s: %w", a.t.Schema, err)
	}
	made()
	return nil
}

func (a *attached) Open(node string) (*sql.DB, error) {
	cc := a.cfg[node].Copy()
	cc.RuntimeParams["search_path"] = a.t.Schema
	return stdlib.OpenDB(*cc), nil
}

// Pipe implements engine.Pipeliner: pgpipe's, as in the lab (a TLS
// connection cannot: engine.ErrNoPipeline).
func (a *attached) Pipe(ctx context.Context, db *sql.DB, stmts []string) (engine.Pipe, error) {
	return pgpipe.Open(ctx, db, stmts)
}

// Position is the primary's flushed WAL: what the standbys can have.
func (a *attached) Position(ctx context.Context, primary string) (string, error) {
	var lsn string
	err := a.with(ctx, primary, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn()::text`).Scan(&lsn)
	})
	return lsn, err
}

func (a *attached) Reached(ctx context.Context, node, pos string) (bool, string, error) {
	var done bool
	var at string
	err := a.with(ctx, node, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false), coalesce(pg_last_wal_replay_lsn()::text, '')`, pos).Scan(&done, &at)
	})
	return done, at, err
}

func (a *attached) State(ctx context.Context, node, from, pos string) (engine.ReplicaState, error) {
	r := engine.ReplicaState{Node: node, From: from, Kind: "physical", BacklogUnit: engine.UnitBytes, ReplayLagMs: -1}
	var recv, replay string
	err := a.with(ctx, node, func(conn *pgx.Conn) error {
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

func (a *attached) Drop(ctx context.Context, primary string) error {
	return a.with(ctx, primary, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{a.t.Schema}.Sanitize()+" CASCADE")
		return err
	})
}

func (a *attached) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, conn := range a.kept {
		conn.Close(context.Background())
	}
	clear(a.kept)
}
