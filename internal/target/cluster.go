package target

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"replab/internal/engine"
	"replab/internal/spec"
)

// Cluster is a running PostgreSQL primary and its physical standbys that
// replab did not build: engine.Cluster, engine.SQL and engine.LagReaders.
type Cluster struct {
	t     *spec.Target
	log   io.Writer
	nodes []engine.Node
	cfg   map[string]*pgx.ConnConfig // by node; the password set, search_path replab's schema
	token string                     // for agents

	mu      sync.Mutex
	created bool // replab created t.Schema: Close drops it (unless keep_schema)
	closed  bool

	// stateMu guards state: one connection per node kept for the
	// monitor's reads each second (a new one would cost round trips).
	stateMu sync.Mutex
	state   map[string]*pgx.Conn
}

// fact is what a server says of itself.
type fact struct {
	version    string
	recovery   bool
	sysid      string
	user, db   string
	monitor    bool // may read pg_stat_wal_receiver's sender columns
	senderHost string
	senderPort int
	receiver   string // the WAL receiver's status, "" without one
}

// Connect reaches every node of s's [target], checks that the servers
// replicate as the spec says and that replab may do what it was asked to
// (create its schema), and returns the cluster. It changes nothing on the
// servers; on error nothing is left open.
func Connect(ctx context.Context, s *spec.Spec, log io.Writer) (*Cluster, error) {
	t := s.Target
	if t == nil {
		return nil, errors.New("the spec has no [target]")
	}
	if log == nil {
		log = io.Discard
	}
	c := &Cluster{t: t, log: log, cfg: map[string]*pgx.ConnConfig{}}
	password := ""
	if t.PasswordFile != "" {
		var err error
		if password, err = readSecret(t.PasswordFile, "[target] password_file"); err != nil {
			return nil, err
		}
	}
	for _, n := range t.Nodes {
		cfg, err := parseDSN(n.DSN)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		if password != "" {
			cfg.Password = password
		}
		cfg.ConnectTimeout = t.ConnectTimeout
		c.cfg[n.Name] = cfg
	}
	facts := make([]fact, len(t.Nodes))
	err := engine.Each(indices(len(t.Nodes)), func(i int) error {
		f, err := c.facts(ctx, t.Nodes[i])
		facts[i] = f
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := c.checkTopology(facts); err != nil {
		return nil, err
	}
	for i, n := range t.Nodes {
		cfg := c.cfg[n.Name]
		en := engine.Node{Name: n.Name, Site: n.Site, Role: n.Role, From: n.From, DSN: n.DSN, Version: facts[i].version,
			Writable: n.Role == "primary"}
		if n.From != "" {
			en.Upstreams = []string{n.From}
		}
		if a, err := netip.ParseAddr(cfg.Host); err == nil {
			en.Addr = netip.AddrPortFrom(a, cfg.Port)
		}
		c.nodes = append(c.nodes, en)
	}
	if err := c.checkSchema(ctx); err != nil {
		return nil, err
	}
	if t.AgentTokenFile != "" {
		if c.token, err = readSecret(t.AgentTokenFile, "[target] agent_token_file"); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func indices(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
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

// where names a node's server for messages: host:port, never the
// password.
func (c *Cluster) where(node string) string {
	cfg := c.cfg[node]
	return fmt.Sprintf("%s (%s)", node, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
}

// connect opens one connection to node, its failure said in a user's
// words.
func (c *Cluster) connect(ctx context.Context, node string) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, c.cfg[node])
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("node %s: the server refused the connection: %s (check the dsn's user and dbname, the password in the environment or password_file, and pg_hba.conf)", c.where(node), pe.Message)
		}
		return nil, fmt.Errorf("node %s: cannot connect: %w (check the address, that the server runs and listens there, and that this host may reach it)", c.where(node), unwrapConnect(err))
	}
	return conn, nil
}

// unwrapConnect keeps the cause of a failed connect, without pgconn's
// repetition of the whole connection string.
func unwrapConnect(err error) error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Unwrap() != nil {
		return ce.Unwrap()
	}
	return err
}

// facts reads what node says of itself.
func (c *Cluster) facts(ctx context.Context, n spec.TargetNode) (fact, error) {
	conn, err := c.connect(ctx, n.Name)
	if err != nil {
		return fact{}, err
	}
	defer conn.Close(context.Background())
	var f fact
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version'), pg_is_in_recovery(), current_user, current_database(),
		pg_has_role('pg_read_all_stats', 'USAGE')`).Scan(&f.version, &f.recovery, &f.user, &f.db, &f.monitor)
	if err != nil {
		return f, fmt.Errorf("node %s: read its state: %w", c.where(n.Name), err)
	}
	f.version = "PostgreSQL " + f.version
	if err := conn.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&f.sysid); err != nil {
		return f, fmt.Errorf("node %s: read the system identifier: %w (user %s needs EXECUTE on pg_control_system(): GRANT pg_monitor TO %s)", c.where(n.Name), err, f.user, f.user)
	}
	if !f.recovery {
		return f, nil
	}
	if !f.monitor {
		return f, fmt.Errorf("node %s: user %s may not read where the standby replicates from (pg_stat_wal_receiver's sender): GRANT pg_monitor TO %s", c.where(n.Name), f.user, f.user)
	}
	err = conn.QueryRow(ctx, `SELECT coalesce(sender_host, ''), coalesce(sender_port, 0), coalesce(status, '')
		FROM pg_stat_wal_receiver`).Scan(&f.senderHost, &f.senderPort, &f.receiver)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("node %s: read pg_stat_wal_receiver: %w", c.where(n.Name), err)
	}
	return f, nil
}

// checkTopology compares what the servers say with the spec: the primary
// takes writes, every replica is a standby of the same system and
// streams from the node named as its upstream.
func (c *Cluster) checkTopology(facts []fact) error {
	var errs []error
	byName := map[string]fact{}
	for i, n := range c.t.Nodes {
		byName[n.Name] = facts[i]
	}
	for i, n := range c.t.Nodes {
		f := facts[i]
		switch {
		case n.Role == "primary" && f.recovery:
			errs = append(errs, fmt.Errorf("node %s: the spec says primary, but the server is a standby (in recovery): name the server that takes writes as primary", c.where(n.Name)))
			continue
		case n.Role != "primary" && !f.recovery:
			errs = append(errs, fmt.Errorf("node %s: the spec says %s from %s, but the server takes writes (not in recovery): it replicates from nobody", c.where(n.Name), n.Role, n.From))
			continue
		case n.Role == "primary":
			continue
		}
		up, ok := byName[n.From]
		if !ok {
			continue // the spec refused it already
		}
		if f.sysid != up.sysid {
			errs = append(errs, fmt.Errorf("node %s: not a copy of %s: its system identifier is %s, %s's is %s", c.where(n.Name), n.From, f.sysid, n.From, up.sysid))
			continue
		}
		if f.receiver == "" {
			errs = append(errs, fmt.Errorf("node %s: a standby with no WAL receiver running: it does not stream from %s now (restoring from an archive?)", c.where(n.Name), n.From))
			continue
		}
		if !c.sameServer(f.senderHost, f.senderPort, n.From) {
			other := c.nodeAt(f.senderHost, f.senderPort)
			hint := ""
			if other != "" {
				hint = fmt.Sprintf(": that is node %s; write from = %q", other, other)
			}
			errs = append(errs, fmt.Errorf("node %s: the spec says it replicates from %s, but it streams from %s%s", c.where(n.Name), c.where(n.From),
				net.JoinHostPort(f.senderHost, strconv.Itoa(f.senderPort)), hint))
		}
	}
	return errors.Join(errs...)
}

// sameServer says whether host:port reaches node: the same port, and the
// same host by name or by any of its addresses.
func (c *Cluster) sameServer(host string, port int, node string) bool {
	cfg := c.cfg[node]
	if port != int(cfg.Port) {
		return false
	}
	if host == cfg.Host {
		return true
	}
	a, b := resolve(host), resolve(cfg.Host)
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// nodeAt is the node whose server is at host:port, or "".
func (c *Cluster) nodeAt(host string, port int) string {
	for _, n := range c.t.Nodes {
		if c.sameServer(host, port, n.Name) {
			return n.Name
		}
	}
	return ""
}

func resolve(host string) []string {
	if strings.HasPrefix(host, "/") {
		return []string{host} // a socket directory
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return []string{a.Unmap().String()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return nil
	}
	return addrs
}

// primary is the node that takes writes.
func (c *Cluster) primary() string {
	for _, n := range c.nodes {
		if n.Writable {
			return n.Name
		}
	}
	return ""
}

// checkSchema checks, before anything is created, that replab may create
// its schema (create_schema) and that it would overwrite nothing.
func (c *Cluster) checkSchema(ctx context.Context) error {
	p := c.primary()
	conn, err := c.connect(ctx, p)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var exists, mayCreate bool
	var tables string
	err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1),
		has_database_privilege(current_database(), 'CREATE'),
		coalesce((SELECT string_agg(relname, ', ' ORDER BY relname) FROM pg_class k JOIN pg_namespace s ON s.oid = k.relnamespace
			WHERE s.nspname = $1 AND k.relkind IN ('r', 'p', 'v', 'm', 'f')), '')`, c.t.Schema).Scan(&exists, &mayCreate, &tables)
	if err != nil {
		return fmt.Errorf("node %s: read schema %s: %w", c.where(p), c.t.Schema, err)
	}
	switch {
	case c.t.CreateSchema && exists && tables != "":
		return fmt.Errorf("node %s: schema %s exists and holds tables (%s): replab will not overwrite them; drop the schema, or set [target] schema to a new name, or use them as they are with create_schema = false", c.where(p), c.t.Schema, tables)
	case c.t.CreateSchema && exists:
		return fmt.Errorf("node %s: schema %s exists already: replab creates its own schema and drops it at the end; drop it, or set [target] schema to a new name, or use it as it is with create_schema = false", c.where(p), c.t.Schema)
	case c.t.CreateSchema && !mayCreate:
		return fmt.Errorf("node %s: user %s may not create schemas in database %s: GRANT CREATE ON DATABASE %s TO %s, or create schema %s with replab's tables yourself and set create_schema = false",
			c.where(p), c.cfg[p].User, c.cfg[p].Database, c.cfg[p].Database, c.cfg[p].User, c.t.Schema)
	case !c.t.CreateSchema && !exists:
		return fmt.Errorf("node %s: schema %s does not exist, and replab may not create it: set [target] create_schema = true (replab creates it and drops it at the end; keep_schema = true keeps it for later runs)", c.where(p), c.t.Schema)
	}
	return nil
}

// Nodes implements engine.Cluster.
func (c *Cluster) Nodes() []engine.Node { return slices.Clone(c.nodes) }

// Dialect implements engine.SQL.
func (c *Cluster) Dialect() string { return "postgres" }

// Open implements engine.SQL: a pool to node from this host, in replab's
// schema. fromSite is a label here: the driver runs where it was started.
func (c *Cluster) Open(ctx context.Context, node, fromSite string) (*sql.DB, error) {
	cfg := c.cfg[node]
	if cfg == nil {
		return nil, engine.NoSuchNode(node, c.nodes)
	}
	cc := cfg.Copy()
	cc.RuntimeParams["search_path"] = c.t.Schema
	return stdlib.OpenDB(*cc), nil
}

// ApplySchema implements engine.SQL: with create_schema, the schema and
// its tables at the primary in one transaction (the standbys get them
// through WAL); without, a check that every table is there.
func (c *Cluster) ApplySchema(ctx context.Context, s engine.Schema) error {
	p := c.primary()
	conn, err := c.connect(ctx, p)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if !c.t.CreateSchema {
		return c.checkTables(ctx, conn, s)
	}
	c.mu.Lock()
	created := c.created
	c.mu.Unlock()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	stmts := []string{}
	if !created {
		stmts = append(stmts, "CREATE SCHEMA "+pgx.Identifier{c.t.Schema}.Sanitize())
	}
	stmts = append(stmts, "SET LOCAL search_path = "+pgx.Identifier{c.t.Schema}.Sanitize())
	for _, t := range s.Tables {
		ddl, ok := t.Create["postgres"]
		if !ok {
			return fmt.Errorf("table %s has no PostgreSQL definition", t.Name)
		}
		stmts = append(stmts, ddl)
		stmts = append(stmts, t.Indexes["postgres"]...)
	}
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("node %s: %s: %w", c.where(p), firstWords(q), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("node %s: create schema %s: %w", c.where(p), c.t.Schema, err)
	}
	c.mu.Lock()
	c.created = true
	c.mu.Unlock()
	fmt.Fprintf(c.log, "target: created schema %s at %s with %d tables%s\n", c.t.Schema, p, len(s.Tables), c.dropNote())
	return nil
}

func (c *Cluster) dropNote() string {
	if c.t.KeepSchema {
		return " (kept at the end: keep_schema = true)"
	}
	return " (dropped at the end)"
}

// checkTables says which of s's tables schema lacks.
func (c *Cluster) checkTables(ctx context.Context, conn *pgx.Conn, s engine.Schema) error {
	rows, err := conn.Query(ctx, `SELECT relname FROM pg_class k JOIN pg_namespace s ON s.oid = k.relnamespace WHERE s.nspname = $1 AND k.relkind IN ('r', 'p')`, c.t.Schema)
	if err != nil {
		return err
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	var missing []string
	for _, t := range s.Tables {
		if !slices.Contains(have, strings.ToLower(t.Name)) {
			missing = append(missing, t.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("node %s: schema %s lacks table(s) %s, and create_schema = false: run once with create_schema = true and keep_schema = true to have replab create and load them", c.where(c.primary()), c.t.Schema, strings.Join(missing, ", "))
	}
	return nil
}

func firstWords(q string) string {
	f := strings.Fields(q)
	return strings.Join(f[:min(len(f), 4)], " ")
}

// Loads reports whether replab loads the workload's data: only into
// tables it created.
func (c *Cluster) Loads() bool { return c.t.CreateSchema }

// WaitFlowing implements engine.Cluster: every standby replays at least
// the primary's WAL position as of now, within two minutes.
func (c *Cluster) WaitFlowing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	lsn, err := c.primaryLSN(ctx)
	if err != nil {
		return err
	}
	return engine.Each(engine.Replicas(c.nodes), func(n engine.Node) error {
		conn, err := c.connect(ctx, n.Name)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		var at string
		for {
			var done bool
			err := conn.QueryRow(ctx, `SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false), coalesce(pg_last_wal_replay_lsn()::text, '')`, lsn).Scan(&done, &at)
			if err != nil {
				return fmt.Errorf("node %s: wait until it replays %s: %w (it replays %s)", c.where(n.Name), lsn, err, at)
			}
			if done {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("node %s: did not replay the primary's position %s within 2 minutes (it replays %s)", c.where(n.Name), lsn, at)
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
}

func (c *Cluster) primaryLSN(ctx context.Context) (string, error) {
	p := c.primary()
	var lsn string
	err := c.withState(ctx, p, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn()::text`).Scan(&lsn)
	})
	if err != nil {
		return "", fmt.Errorf("node %s: read its WAL position: %w", c.where(p), err)
	}
	return lsn, nil
}

// withState runs f on node's kept connection, made on first use and
// dropped when f fails (the next call makes a new one).
func (c *Cluster) withState(ctx context.Context, node string, f func(*pgx.Conn) error) error {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.state == nil {
		c.state = map[string]*pgx.Conn{}
	}
	conn := c.state[node]
	if conn == nil {
		var err error
		if conn, err = c.connect(ctx, node); err != nil {
			return err
		}
		c.state[node] = conn
	}
	if err := f(conn); err != nil {
		conn.Close(context.Background())
		delete(c.state, node)
		return err
	}
	return nil
}

// ReplicationState implements engine.Cluster, read at each standby: what
// it received and replayed, and how many bytes of the primary's WAL it
// has yet to replay.
func (c *Cluster) ReplicationState(ctx context.Context) ([]engine.ReplicaState, error) {
	lsn, err := c.primaryLSN(ctx)
	if err != nil {
		return nil, err
	}
	var out []engine.ReplicaState
	for _, n := range engine.Replicas(c.nodes) {
		r := engine.ReplicaState{Node: n.Name, From: n.From, Kind: "physical", BacklogUnit: engine.UnitBytes, ReplayLagMs: -1}
		var recv, replay string
		err := c.withState(ctx, n.Name, func(conn *pgx.Conn) error {
			return conn.QueryRow(ctx, `SELECT coalesce((SELECT status FROM pg_stat_wal_receiver), 'stopped'),
			coalesce(pg_last_wal_receive_lsn()::text, ''), coalesce(pg_last_wal_replay_lsn()::text, ''),
			coalesce(pg_wal_lsn_diff($1::pg_lsn, pg_last_wal_replay_lsn()), 0)::bigint`, lsn).Scan(&r.State, &recv, &replay, &r.Backlog)
		})
		if err != nil {
			return nil, fmt.Errorf("node %s: read its replication state: %w", c.where(n.Name), err)
		}
		r.Backlog = max(r.Backlog, 0)
		for _, p := range []engine.Position{{Name: "receive_lsn", Value: recv}, {Name: "replay_lsn", Value: replay}} {
			if p.Value != "" {
				r.Positions = append(r.Positions, p)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// Processes implements engine.Cluster: the servers run on other hosts,
// whose processes replab cannot see.
func (c *Cluster) Processes(context.Context) ([]engine.Process, error) { return nil, nil }

// Close implements engine.Cluster: drops the schema replab created
// (unless keep_schema). Safe to call more than once.
func (c *Cluster) Close() error {
	c.stateMu.Lock()
	for _, conn := range c.state {
		conn.Close(context.Background())
	}
	c.state = nil
	c.stateMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.created || c.t.KeepSchema {
		c.closed = true
		return nil
	}
	c.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := c.primary()
	conn, err := c.connect(ctx, p)
	if err != nil {
		return fmt.Errorf("drop schema %s: %w", c.t.Schema, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{c.t.Schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("node %s: drop schema %s: %w (drop it by hand)", c.where(p), c.t.Schema, err)
	}
	fmt.Fprintf(c.log, "target: dropped schema %s at %s\n", c.t.Schema, p)
	return nil
}
