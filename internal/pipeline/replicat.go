package pipeline

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"replab/internal/pipeline/trail"
)

// ReplicatConfig configures a replicat.
type ReplicatConfig struct {
	// Trail is the trail to apply (local to the replicat's site, or the
	// source's in the "remote" configuration).
	Trail string
	// Engine is the sink's kind: EnginePostgres (also "") or
	// EngineMariaDB (heterogeneous replication: PostgreSQL to MariaDB).
	Engine string `json:"engine,omitempty"`
	// DSN is the sink database's connection string: libpq form for
	// PostgreSQL; go-sql-driver/mysql form for MariaDB
	// ("user:pass@tcp(host:port)/db?…"), which must name the database
	// (see replicat_mysql.go).
	DSN string
	// Name keys the replicat's checkpoint row at the sink.
	Name string
	// Batch is GoldenGate's BATCHSQL: consecutive inserts (or deletes) of
	// one table become one multi-row statement, and a whole sink
	// transaction goes in one round trip. Without it every statement is a
	// round trip of its own, as a plain replicat applies them.
	Batch bool
	// GroupOps groups source transactions into one sink transaction
	// until it holds at least this many changes (GoldenGate's
	// GROUPTRANSOPS), or until the trail has nothing more for now. 0 or 1
	// applies each source transaction on its own.
	GroupOps int
	// Parts > 1 makes this replicat one of Parts sharing the trail
	// (GoldenGate's "more replicats" with @RANGE): it applies only the
	// changes of partition Part (0 … Parts-1), chosen by SplitBy, and
	// keeps a checkpoint of its own. A source transaction is then applied
	// in pieces, one per replicat, each committed on its own.
	Parts int
	Part  int
	// SplitBy is "key" (a hash of the table and the row's primary key: a
	// row's changes stay on one replicat, in order; a change of key may
	// move a row to another replicat, which can then apply it out of
	// order) or "table" (whole tables: every change in order).
	SplitBy string
	// Dial, when set, opens the connection (a lab site's dialer).
	Dial DialFunc `json:"-"`
}

// Sink engines (ReplicatConfig.Engine).
const (
	EnginePostgres = "postgres"
	EngineMariaDB  = "mariadb"
)

// owns says whether this replicat applies r.
func (cfg *ReplicatConfig) owns(r *trail.Record) bool {
	if cfg.Parts <= 1 {
		return true
	}
	h := fnv.New32a()
	h.Write([]byte(r.Schema))
	h.Write([]byte{0})
	h.Write([]byte(r.Table))
	if cfg.SplitBy != "table" {
		for j, k := range r.Key {
			h.Write([]byte{0})
			v := r.Values[k]
			if r.Old != nil {
				v = r.Old[j] // the row as the others knew it
			}
			h.Write([]byte(v.Text))
		}
	}
	return int(h.Sum32()%uint32(cfg.Parts)) == cfg.Part
}

// Checkpoint table at the sink: the trail position applied, updated in
// the same transaction as the changes, so a restart neither loses nor
// repeats one.
const checkpointTable = "replab_replicat_checkpoint"

// ReplicatCounters are Counters plus what only a replicat has.
type ReplicatCounters struct {
	Counters
	RoundTrips atomic.Int64 // round trips to the sink (statements or batches)
	Statements atomic.Int64 // SQL statements executed for changes
	// Retries counts sink transactions begun again after the sink
	// chose them as a deadlock's victim (MariaDB); their round trips
	// count in RoundTrips, their statements once.
	Retries atomic.Int64
}

// Replicat applies the trail to the sink until ctx ends (it then returns
// nil) or something fails. It resumes from its checkpoint at the sink.
func Replicat(ctx context.Context, cfg ReplicatConfig, c *ReplicatCounters) error {
	if c == nil {
		c = new(ReplicatCounters)
	}
	if cfg.Name == "" {
		return errors.New("replicat: no name for its checkpoint")
	}
	var t sink
	var err error
	switch cfg.Engine {
	case "", EnginePostgres:
		t, err = connectPostgres(ctx, cfg, c)
	case EngineMariaDB:
		t, err = connectMariaDB(ctx, cfg, c)
	default:
		return fmt.Errorf("replicat %s: unknown sink engine %q (want %q or %q)", cfg.Name, cfg.Engine, EnginePostgres, EngineMariaDB)
	}
	if err != nil {
		return err
	}
	defer t.close()
	a := &applier{t: t, c: c}
	from, err := t.checkpoint(ctx)
	if err != nil {
		return stopped(ctx, err)
	}
	r, err := openTrail(ctx, cfg.Trail, from)
	if err != nil {
		return stopped(ctx, err)
	}
	defer func() { r.Close() }() // r is replaced after a cut
	c.Bytes.Store(int64(from))

	// group holds the changes of complete transactions not applied yet;
	// cur those of the transaction whose commit has not been read.
	var group, cur []trail.Record
	var txs int
	var last trail.Record // the group's last commit
	var end trail.Pos     // where it ends in the trail
	applied := from       // the trail position applied at the sink
	apply := func() error {
		if len(group) == 0 {
			// Nothing of ours (another replicat's partition, or tables not
			// carried): no sink transaction. The checkpoint stays
			// behind; after a restart these are read again and again
			// hold nothing.
			a.advance(txs, last, end)
			group, txs, applied = group[:0], 0, end
			return nil
		}
		if err := a.finish(ctx, group, txs, last, end); err != nil {
			return err
		}
		group, txs, applied = group[:0], 0, end
		return nil
	}
	for {
		// Wait for the next record only when no complete transaction is
		// in hand: with one, an empty trail means apply now.
		var rec trail.Record
		var pos trail.Pos
		if txs == 0 {
			rec, pos, err = r.Next(ctx)
		} else {
			var ok bool
			rec, pos, ok, err = r.TryNext()
			if err == nil && !ok {
				if err := apply(); err != nil {
					return err
				}
				continue
			}
		}
		if errors.Is(err, trail.ErrCut) {
			// The writer restarted and cut an unfinished transaction we
			// had begun to read (a collector or extract killed while it
			// wrote one); it will be written again. Drop it and read on
			// from the last commit.
			if txs > 0 {
				if err := apply(); err != nil {
					return err
				}
			}
			r.Close()
			cur = cur[:0]
			if r, err = openTrail(ctx, cfg.Trail, applied); err != nil {
				return stopped(ctx, err)
			}
			continue
		}
		if err != nil {
			return stopped(ctx, err)
		}
		switch rec.Op {
		case trail.OpBegin:
			cur = cur[:0]
		case trail.OpCommit:
			group = append(group, cur...)
			cur = cur[:0]
			txs++
			last, end = rec, pos
			if len(group) >= max(cfg.GroupOps, 1) {
				if err := apply(); err != nil {
					return err
				}
			}
		default:
			if cfg.owns(&rec) {
				cur = append(cur, rec)
			}
		}
	}
}

// openTrail opens a trail for reading, waiting for it to be created (a
// stage may start before the one that writes its trail) and to reach
// from.
func openTrail(ctx context.Context, path string, from trail.Pos) (*trail.Reader, error) {
	for {
		// A trail shorter than from is one whose writer restarted and
		// has not written again what it cut.
		r, err := trail.Open(path, from)
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, trail.ErrCut) {
			return r, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// finish applies a group even when ctx ends meanwhile: a stop lets the
// transaction in flight commit (and its counters count it), as
// GoldenGate's STOP REPLICAT does, within a bound.
func (a *applier) finish(ctx context.Context, changes []trail.Record, txs int, last trail.Record, end trail.Pos) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishWithin)
	defer cancel()
	return a.apply(actx, changes, txs, last, end)
}

// finishWithin bounds how long a stop waits for the transaction in flight.
const finishWithin = 30 * time.Second

// stopped is nil when ctx has ended (a stop, not a failure), else err.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// sink is a sink database as a replicat uses it: what differs between
// engines (connection, SQL dialect, round trips) stays behind it, while
// reading, partitioning and grouping the trail are shared.
type sink interface {
	// checkpoint creates the checkpoint table and this replicat's row if
	// needed, and reads where the replicat stopped.
	checkpoint(ctx context.Context) (trail.Pos, error)
	// apply runs changes and moves the checkpoint to end (source commit
	// last) as one sink transaction, rolled back if anything fails. It
	// counts its round trips and returns the number of statements the
	// changes took; its errors name the replicat.
	apply(ctx context.Context, changes []trail.Record, last trail.Record, end trail.Pos) (int, error)
	// close ends the connection.
	close()
}

// applier applies groups to the sink and keeps the counters.
type applier struct {
	t sink
	c *ReplicatCounters
}

// pgSink is a PostgreSQL sink: its connection and statement cache.
type pgSink struct {
	cfg      ReplicatConfig
	conn     *pgconn.PgConn
	c        *ReplicatCounters
	prepared map[string]string // SQL text -> prepared statement name
}

// connectPostgres connects to a PostgreSQL sink.
func connectPostgres(ctx context.Context, cfg ReplicatConfig, c *ReplicatCounters) (sink, error) {
	pc, err := pgconn.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("replicat %s: sink connection string: %w", cfg.Name, err)
	}
	if cfg.Dial != nil {
		pc.DialFunc = pgconn.DialFunc(cfg.Dial)
	}
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("replicat %s: connect to the sink: %w", cfg.Name, err)
	}
	return &pgSink{cfg: cfg, conn: conn, c: c, prepared: map[string]string{}}, nil
}

func (a *pgSink) close() { a.conn.Close(context.Background()) }

// checkpoint creates the checkpoint table if needed and reads where this
// replicat stopped.
func (a *pgSink) checkpoint(ctx context.Context) (trail.Pos, error) {
	// Several replicats may start at once: CREATE TABLE IF NOT EXISTS is
	// not safe against itself, so they take turns.
	sql := "BEGIN; SELECT pg_advisory_xact_lock(hashtext(" + quoteLiteral(checkpointTable) + "));" +
		"CREATE TABLE IF NOT EXISTS " + checkpointTable + " (name text PRIMARY KEY, pos bigint NOT NULL, lsn bigint NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());" +
		"INSERT INTO " + checkpointTable + " (name, pos, lsn) VALUES (" + quoteLiteral(a.cfg.Name) + ", 0, 0) ON CONFLICT (name) DO NOTHING; COMMIT"
	if err := a.conn.Exec(ctx, sql).Close(); err != nil {
		return 0, fmt.Errorf("replicat %s: checkpoint table at the sink: %w", a.cfg.Name, err)
	}
	res := a.conn.ExecParams(ctx, "SELECT pos FROM "+checkpointTable+" WHERE name = $1", [][]byte{[]byte(a.cfg.Name)}, nil, nil, nil).Read()
	if res.Err != nil || len(res.Rows) != 1 {
		return 0, fmt.Errorf("replicat %s: read its checkpoint: %v", a.cfg.Name, res.Err)
	}
	pos, err := strconv.ParseInt(string(res.Rows[0][0]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("replicat %s: checkpoint position %q: %w", a.cfg.Name, res.Rows[0][0], err)
	}
	return trail.Pos(pos), nil
}

// stmt is one statement to run with its text parameters (nil is NULL).
type stmt struct {
	sql  string
	args [][]byte
}

// apply runs the changes of txs source transactions, ending with commit
// record last at trail position end, as one sink transaction.
func (a *applier) apply(ctx context.Context, changes []trail.Record, txs int, last trail.Record, end trail.Pos) error {
	n, err := a.t.apply(ctx, changes, last, end)
	if err != nil {
		return err
	}
	a.c.Statements.Add(int64(n))
	a.c.Records.Add(int64(len(changes)))
	a.c.Syncs.Add(1)
	a.advance(txs, last, end)
	return nil
}

// apply is sink's: the whole transaction in one pgconn batch, or
// statement by statement.
func (a *pgSink) apply(ctx context.Context, changes []trail.Record, last trail.Record, end trail.Pos) (int, error) {
	stmts := statements(changes, a.cfg.Batch)
	ck := stmt{
		sql:  "UPDATE " + checkpointTable + " SET pos = $1, lsn = $2, applied_at = now() WHERE name = $3",
		args: [][]byte{[]byte(strconv.FormatInt(int64(end), 10)), []byte(strconv.FormatUint(last.LSN, 10)), []byte(a.cfg.Name)},
	}
	for _, s := range append(stmts, ck) {
		if _, err := a.prepare(ctx, s.sql); err != nil {
			return 0, err
		}
	}
	if a.cfg.Batch {
		b := &pgconn.Batch{}
		b.ExecParams("BEGIN", nil, nil, nil, nil)
		for _, s := range stmts {
			b.ExecPrepared(a.prepared[s.sql], s.args, nil, nil)
		}
		b.ExecPrepared(a.prepared[ck.sql], ck.args, nil, nil)
		b.ExecParams("COMMIT", nil, nil, nil, nil)
		results, err := a.conn.ExecBatch(ctx, b).ReadAll()
		a.c.RoundTrips.Add(1)
		if err == nil {
			for _, r := range results {
				if r.Err != nil {
					err = r.Err
					break
				}
			}
		}
		if err != nil {
			return 0, a.failed(ctx, last, err)
		}
	} else {
		// Statement by statement: BEGIN, each change, the checkpoint and
		// COMMIT are a round trip each.
		if err := a.exec(ctx, "BEGIN"); err != nil {
			return 0, a.failed(ctx, last, err)
		}
		for _, s := range append(stmts, ck) {
			a.c.RoundTrips.Add(1)
			if _, err := a.conn.ExecPrepared(ctx, a.prepared[s.sql], s.args, nil, nil).Close(); err != nil {
				return 0, a.failed(ctx, last, err)
			}
		}
		if err := a.exec(ctx, "COMMIT"); err != nil {
			return 0, a.failed(ctx, last, err)
		}
	}
	return len(stmts), nil
}

// advance counts txs source transactions done with, up to commit record
// last ending at trail position end.
func (a *applier) advance(txs int, last trail.Record, end trail.Pos) {
	a.c.Transactions.Add(int64(txs))
	a.c.Bytes.Store(int64(end))
	a.c.Position.Store(last.LSN)
	a.c.LastCommitNs.Store(last.Time)
}

// exec runs one statement without parameters as a round trip of its own.
func (a *pgSink) exec(ctx context.Context, sql string) error {
	a.c.RoundTrips.Add(1)
	_, err := a.conn.Exec(ctx, sql).ReadAll()
	return err
}

// failed rolls back what a failed apply began and says which source
// transaction it was.
func (a *pgSink) failed(ctx context.Context, last trail.Record, err error) error {
	if a.conn.TxStatus() != 'I' && !a.conn.IsClosed() {
		_ = a.conn.Exec(ctx, "ROLLBACK").Close()
	}
	return fmt.Errorf("replicat %s: apply the transaction(s) ending at source commit %X/%X: %w", a.cfg.Name, last.LSN>>32, uint32(last.LSN), err)
}

// prepare prepares sql once per connection.
func (a *pgSink) prepare(ctx context.Context, sql string) (string, error) {
	if name, ok := a.prepared[sql]; ok {
		return name, nil
	}
	name := "r" + strconv.Itoa(len(a.prepared))
	if _, err := a.conn.Prepare(ctx, name, sql, nil); err != nil {
		return "", fmt.Errorf("replicat %s: prepare %q: %w", a.cfg.Name, sql, err)
	}
	a.prepared[sql] = name
	return name, nil
}

// maxRows bounds a multi-row statement (and the number of distinct
// statement texts the cache can hold per table: one per row count).
const maxRows = 64

// statements turns changes into PostgreSQL's SQL. With batch, runs of
// inserts (or deletes) into one table with the same columns become
// multi-row statements, up to maxRows rows each.
func statements(changes []trail.Record, batch bool) []stmt {
	var out []stmt
	for _, rows := range runs(changes, batch) {
		out = append(out, pgDialect.statement(rows))
	}
	return out
}

// runs cuts changes into the rows of one statement each: one change, or
// with batch a run of inserts (or deletes) of one shape, up to maxRows.
func runs(changes []trail.Record, batch bool) [][]trail.Record {
	var out [][]trail.Record
	for i := 0; i < len(changes); {
		r := &changes[i]
		n := 1
		if batch && (r.Op == trail.OpInsert || r.Op == trail.OpDelete) {
			for n < maxRows && i+n < len(changes) && sameShape(r, &changes[i+n]) {
				n++
			}
		}
		out = append(out, changes[i:i+n])
		i += n
	}
	return out
}

// dialect is how a sink's SQL spells the statements statement builds.
type dialect struct {
	ident func(name string) string         // a quoted identifier
	table func(schema, name string) string // a table's name at the sink
	param func(n int) string               // the nth parameter's placeholder, from 1
	// orKeys: a multi-row delete finds its rows by "k IN (…)" for a
	// one-column key and by OR-ed conditions for a composite key, rather
	// than by a row constructor "(k1, k2) IN ((…), …)".
	orKeys bool
}

// pgDialect is PostgreSQL's: "schema"."table", $n.
var pgDialect = dialect{
	ident: quoteIdent,
	table: func(schema, name string) string { return quoteIdent(schema) + "." + quoteIdent(name) },
	param: func(n int) string { return "$" + strconv.Itoa(n) },
}

// sameShape says whether two changes can share one multi-row statement.
func sameShape(a, b *trail.Record) bool {
	return a.Op == b.Op && a.Schema == b.Schema && a.Table == b.Table && slices.Equal(a.Columns, b.Columns)
}

// statement builds one statement for rows (one row unless they are
// inserts or deletes of the same shape).
func (d dialect) statement(rows []trail.Record) stmt {
	r := &rows[0]
	var b strings.Builder
	var args [][]byte
	param := func(v trail.Value) {
		if v.Null {
			args = append(args, nil)
		} else {
			args = append(args, []byte(v.Text))
		}
		b.WriteString(d.param(len(args)))
	}
	table := d.table(r.Schema, r.Table)
	// whereKey finds r's row by its key as the sink has it: an update
	// that changed the key carries the old one.
	whereKey := func(r *trail.Record) {
		for j, k := range r.Key {
			if j > 0 {
				b.WriteString(" AND ")
			}
			b.WriteString(d.ident(r.Columns[k]) + " = ")
			if r.Old != nil {
				param(r.Old[j])
			} else {
				param(r.Values[k])
			}
		}
	}
	// names writes "(a, b)"; tuple "($1, $2)" with vals as parameters.
	names := func(cols []string) {
		b.WriteString("(")
		for i, c := range cols {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(d.ident(c))
		}
		b.WriteString(")")
	}
	tuple := func(vals []trail.Value) {
		b.WriteString("(")
		for i, v := range vals {
			if i > 0 {
				b.WriteString(", ")
			}
			param(v)
		}
		b.WriteString(")")
	}
	switch r.Op {
	case trail.OpInsert:
		b.WriteString("INSERT INTO " + table + " ")
		names(r.Columns)
		b.WriteString(" VALUES ")
		for j := range rows {
			if j > 0 {
				b.WriteString(", ")
			}
			tuple(rows[j].Values)
		}
	case trail.OpUpdate:
		b.WriteString("UPDATE " + table + " SET ")
		for i, c := range r.Columns {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(d.ident(c) + " = ")
			param(r.Values[i])
		}
		b.WriteString(" WHERE ")
		whereKey(r)
	case trail.OpDelete:
		b.WriteString("DELETE FROM " + table + " WHERE ")
		if len(rows) == 1 {
			whereKey(r)
			break
		}
		if d.orKeys && len(r.Key) > 1 {
			for j := range rows {
				if j > 0 {
					b.WriteString(" OR ")
				}
				b.WriteString("(")
				whereKey(&rows[j])
				b.WriteString(")")
			}
			break
		}
		if d.orKeys {
			b.WriteString(d.ident(r.Columns[r.Key[0]]) + " IN ")
			tuple(keyOf(rows, 0))
			break
		}
		keyCols := make([]string, len(r.Key))
		for j, k := range r.Key {
			keyCols[j] = r.Columns[k]
		}
		names(keyCols)
		b.WriteString(" IN (")
		key := make([]trail.Value, len(r.Key))
		for j := range rows {
			if j > 0 {
				b.WriteString(", ")
			}
			for jj, k := range rows[j].Key {
				key[jj] = rows[j].Values[k]
			}
			tuple(key)
		}
		b.WriteString(")")
	}
	return stmt{sql: b.String(), args: args}
}

// keyOf is the values of key column j of rows.
func keyOf(rows []trail.Record, j int) []trail.Value {
	out := make([]trail.Value, len(rows))
	for i := range rows {
		out[i] = rows[i].Values[rows[i].Key[j]]
	}
	return out
}

func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// WaitApplied polls c until the replicat has applied the source commit
// lsn or ctx ends.
func WaitApplied(ctx context.Context, c *ReplicatCounters, lsn uint64) error {
	for c.Position.Load() < lsn {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}
