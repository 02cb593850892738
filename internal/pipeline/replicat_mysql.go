package pipeline

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"replab/internal/pipeline/trail"
)

// The MariaDB sink: heterogeneous replication, PostgreSQL to MariaDB.
//
// The DSN is go-sql-driver/mysql's ("user:pass@tcp(host:port)/db?…") and
// must name a database: the checkpoint table lives there, and the source
// schema "public" maps to it (tables are named unqualified, so one DSN
// points a whole PostgreSQL database at one MariaDB database); a table of
// any other source schema S is named `S`.`table`, a database of that name.
// The replicat turns on interpolateParams and multiStatements itself.
//
// Values go as the text the trail carries (PostgreSQL's text form) in
// string parameters, which the driver interpolates client-side with its
// own escaping (it refuses the character sets where that is unsafe, and
// follows NO_BACKSLASH_ESCAPES): integers, numerics, varchar and text
// convert as they are; NULL stays NULL. Types whose PostgreSQL text MariaDB
// does not read (booleans "t"/"f", timestamps with a time zone, arrays …)
// are not converted: strict mode (MariaDB's default) rejects them, and the
// replicat stops on the error. Text keys compare as PostgreSQL's do only
// under a binary collation (utf8mb4_bin): the default _ci ones fold case
// and ignore trailing spaces. The tables, like the checkpoint table, must
// be transactional (InnoDB) for the checkpoint to move with the changes.

// mysqlMaxQuery bounds the text of one batched round trip (estimated
// before escaping doubles anything), well below MariaDB's default
// max_allowed_packet (16 MiB): a larger transaction takes several.
const mysqlMaxQuery = 4 << 20

// mysqlDialect is MariaDB's (and MySQL's): backticks, ? placeholders,
// "public" as the connection's database.
var mysqlDialect = dialect{
	ident: mysqlIdent,
	table: mysqlTable,
	param: func(int) string { return "?" },
	// MariaDB's range optimizer handles OR-ed key conditions and IN lists
	// of one column; row constructors in IN it may scan for.
	orKeys: true,
}

func mysqlIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// mysqlTable names a source table at the sink: see above for why
// "public" is the current database.
func mysqlTable(schema, name string) string {
	if schema == "public" {
		return mysqlIdent(name)
	}
	return mysqlIdent(schema) + "." + mysqlIdent(name)
}

// mysqlCheckpointMax is the longest replicat name the checkpoint table's
// key (VARCHAR(200)) holds.
const mysqlCheckpointMax = 200

// mysqlSink is a MariaDB sink: one dedicated connection, so that the
// transaction and the session's state stay on it.
type mysqlSink struct {
	cfg  ReplicatConfig
	c    *ReplicatCounters
	db   *sql.DB
	conn *sql.Conn
}

// connectMariaDB connects to a MariaDB sink.
func connectMariaDB(ctx context.Context, cfg ReplicatConfig, c *ReplicatCounters) (sink, error) {
	mc, err := mysql.ParseDSN(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("replicat %s: sink connection string: %w", cfg.Name, err)
	}
	if mc.DBName == "" {
		return nil, fmt.Errorf("replicat %s: the MariaDB connection string names no database (…/dbname): the checkpoint table and the tables of schema public are there", cfg.Name)
	}
	if utf8.RuneCountInString(cfg.Name) > mysqlCheckpointMax {
		return nil, fmt.Errorf("replicat %s: name longer than the %d characters of its checkpoint key", cfg.Name, mysqlCheckpointMax)
	}
	// Client-side interpolation: a statement with parameters is one round
	// trip (no prepare, execute, close), and a batch can go as one text
	// of several statements.
	mc.InterpolateParams = true
	mc.MultiStatements = true
	if cfg.Dial != nil {
		// The connector's own dialer, not mysql.RegisterDialContext,
		// which would be global to the process.
		mc.DialFunc = cfg.Dial
	}
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("replicat %s: sink connection string: %w", cfg.Name, err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("replicat %s: connect to the sink: %w", cfg.Name, err)
	}
	// READ COMMITTED takes no gap locks: under InnoDB's default REPEATABLE
	// READ, replicats sharing a table by key (Parts) deadlock on each
	// other's gaps, though their rows are disjoint (PostgreSQL locks rows
	// only). The replicat reads nothing, so nothing else changes; but a
	// statement-format binlog refuses READ COMMITTED's writes, so it then
	// keeps the default and relies on retries (apply).
	var format sql.NullString
	err = conn.QueryRowContext(ctx, "SELECT @@SESSION.binlog_format").Scan(&format)
	if err == nil && format.String != "STATEMENT" {
		_, err = conn.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
	}
	if err != nil {
		conn.Close()
		db.Close()
		return nil, fmt.Errorf("replicat %s: set up the sink session: %w", cfg.Name, err)
	}
	return &mysqlSink{cfg: cfg, c: c, db: db, conn: conn}, nil
}

func (m *mysqlSink) close() {
	m.conn.Close()
	m.db.Close()
}

// mysqlLockWait bounds how long a replicat waits for another to create
// the checkpoint table.
const mysqlLockWait = 30 * time.Second

// checkpoint creates the checkpoint table and this replicat's row if
// needed, and reads where the replicat stopped.
func (m *mysqlSink) checkpoint(ctx context.Context) (trail.Pos, error) {
	fail := func(err error) (trail.Pos, error) {
		return 0, fmt.Errorf("replicat %s: checkpoint table at the sink: %w", m.cfg.Name, err)
	}
	// Replicats starting together take turns, as on PostgreSQL. The lock
	// is the server's, by name, held by this session until released (or
	// the connection ends).
	var got sql.NullInt64
	if err := m.conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", checkpointTable, int64(mysqlLockWait/time.Second)).Scan(&got); err != nil {
		return fail(err)
	}
	if got.Int64 != 1 {
		return fail(fmt.Errorf("lock %s not granted within %v", checkpointTable, mysqlLockWait))
	}
	defer func() {
		// A failure here leaves the lock to the end of the connection.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = m.conn.ExecContext(rctx, "DO RELEASE_LOCK(?)", checkpointTable)
	}()
	for _, q := range []string{
		// Binary collation: names are case-sensitive, as PostgreSQL's text.
		"CREATE TABLE IF NOT EXISTS " + mysqlIdent(checkpointTable) + " (name VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY," +
			" pos BIGINT NOT NULL, lsn BIGINT NOT NULL, applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB",
		// Not INSERT IGNORE: that would turn other errors into warnings.
		"INSERT INTO " + mysqlIdent(checkpointTable) + " (name, pos, lsn) VALUES (?, 0, 0) ON DUPLICATE KEY UPDATE name = name",
	} {
		var args []any
		if strings.Contains(q, "?") {
			args = []any{m.cfg.Name}
		}
		if _, err := m.conn.ExecContext(ctx, q, args...); err != nil {
			return fail(err)
		}
	}
	var pos int64
	if err := m.conn.QueryRowContext(ctx, "SELECT pos FROM "+mysqlIdent(checkpointTable)+" WHERE name = ?", m.cfg.Name).Scan(&pos); err != nil {
		return 0, fmt.Errorf("replicat %s: read its checkpoint: %w", m.cfg.Name, err)
	}
	return trail.Pos(pos), nil
}

// mysqlCheckpoint moves the checkpoint, in the changes' transaction.
func mysqlCheckpoint(name string, last trail.Record, end trail.Pos) stmt {
	return stmt{
		sql:  "UPDATE " + mysqlIdent(checkpointTable) + " SET pos = ?, lsn = ?, applied_at = CURRENT_TIMESTAMP(6) WHERE name = ?",
		args: [][]byte{[]byte(strconv.FormatInt(int64(end), 10)), []byte(strconv.FormatUint(last.LSN, 10)), []byte(name)},
	}
}

// mysqlStatements is statements in MariaDB's SQL, with the sink table
// of each statement (for errors).
func mysqlStatements(changes []trail.Record, batch bool) ([]stmt, []string) {
	var out []stmt
	var tables []string
	for _, rows := range runs(changes, batch) {
		out = append(out, mysqlDialect.statement(rows))
		tables = append(tables, mysqlTable(rows[0].Schema, rows[0].Table))
	}
	return out, tables
}

// mysqlQuery is one round trip's text and its parameters.
type mysqlQuery struct {
	sql  string
	args []any
}

// mysqlBatches joins a transaction's statements, between START
// TRANSACTION and COMMIT, into as few multi-statement texts as
// mysqlMaxQuery allows: one for most transactions.
func mysqlBatches(stmts []stmt) []mysqlQuery {
	var out []mysqlQuery
	var b strings.Builder
	var args []any
	size := 0
	b.WriteString("START TRANSACTION")
	for _, s := range stmts {
		n := len(s.sql) + 2
		for _, a := range s.args {
			n += 2*len(a) + 4 // escaped at worst to twice, quoted; or NULL
		}
		if size > 0 && size+n > mysqlMaxQuery {
			out = append(out, mysqlQuery{sql: b.String(), args: args})
			b.Reset()
			args, size = nil, 0
		} else if size > 0 || b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s.sql)
		args = append(args, textArgs(s.args)...)
		size += n
	}
	b.WriteString("; COMMIT")
	return append(out, mysqlQuery{sql: b.String(), args: args})
}

// textArgs is args as the driver's parameters: text as strings (bytes
// would be sent as _binary literals), nil as NULL.
func textArgs(args [][]byte) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if a != nil {
			out[i] = string(a)
		}
	}
	return out
}

// mysqlRetries bounds how often a transaction chosen as a deadlock's
// victim is begun again.
const mysqlRetries = 5

// erLockDeadlock is MariaDB's error for a deadlock's victim, whose whole
// transaction InnoDB has rolled back.
const erLockDeadlock = 1213

// apply is sink's. A deadlock's victim is applied again, a few times:
// InnoDB rolled it back whole, checkpoint included, so nothing is applied
// twice (GoldenGate's replicat retries deadlocks too).
func (m *mysqlSink) apply(ctx context.Context, changes []trail.Record, last trail.Record, end trail.Pos) (int, error) {
	stmts, tables := mysqlStatements(changes, m.cfg.Batch)
	ck := mysqlCheckpoint(m.cfg.Name, last, end)
	for try := 1; ; try++ {
		err := m.try(ctx, stmts, tables, ck)
		var me *mysql.MySQLError
		if err == nil || try > mysqlRetries || !errors.As(err, &me) || me.Number != erLockDeadlock {
			if err != nil {
				return 0, m.failed(ctx, last, err)
			}
			return len(stmts), nil
		}
		m.rollback(ctx)
		m.c.Retries.Add(1)
		select {
		case <-ctx.Done():
			return 0, m.failed(ctx, last, err)
		case <-time.After(time.Duration(try) * 10 * time.Millisecond):
		}
	}
}

// try applies a transaction once: with Batch as one text of several
// statements (a round trip, or a few for a huge transaction), else START
// TRANSACTION, each statement, the checkpoint and COMMIT as a round trip
// each, as on PostgreSQL. Its errors say where.
func (m *mysqlSink) try(ctx context.Context, stmts []stmt, tables []string, ck stmt) error {
	if m.cfg.Batch {
		for _, q := range mysqlBatches(append(slices.Clip(stmts), ck)) {
			m.c.RoundTrips.Add(1)
			if _, err := m.conn.ExecContext(ctx, q.sql, q.args...); err != nil {
				// The server stops at the failing statement and does not
				// say which: name every table the transaction touches.
				return fmt.Errorf("tables %s: %w", strings.Join(distinct(tables), ", "), err)
			}
		}
		return nil
	}
	exec := func(sql string, args []any) error {
		m.c.RoundTrips.Add(1)
		_, err := m.conn.ExecContext(ctx, sql, args...)
		return err
	}
	if err := exec("START TRANSACTION", nil); err != nil {
		return err
	}
	for i, s := range stmts {
		if err := exec(s.sql, textArgs(s.args)); err != nil {
			return fmt.Errorf("table %s: %w", tables[i], err)
		}
	}
	if err := exec(ck.sql, textArgs(ck.args)); err != nil {
		return fmt.Errorf("table %s: %w", mysqlIdent(checkpointTable), err)
	}
	return exec("COMMIT", nil)
}

// rollback ends what a failed try began: a failed statement, of a
// multi-statement text too, leaves the transaction open. On a broken
// connection it fails too, and the server rolls back as the session ends.
func (m *mysqlSink) rollback(ctx context.Context) {
	_, _ = m.conn.ExecContext(ctx, "ROLLBACK")
}

// failed rolls back and says which source transaction failed.
func (m *mysqlSink) failed(ctx context.Context, last trail.Record, err error) error {
	m.rollback(ctx)
	return fmt.Errorf("replicat %s: apply the transaction(s) ending at source commit %X/%X: %w", m.cfg.Name, last.LSN>>32, uint32(last.LSN), err)
}

// distinct is ss without repeats, in order.
func distinct(ss []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
