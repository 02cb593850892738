package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"

	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/spec"
)

// Target mode's MariaDB side (engine.Attacher): a primary and its binlog
// replicas, or the masters of a Galera cluster, that replab did not
// build, reached through go-sql-driver/mysql connection strings; replab's
// "schema" is a database of its own.

var _ engine.Attacher = Engine{}

// ValidateTarget implements engine.Attacher.
func (Engine) ValidateTarget(s *spec.Spec) error {
	errs := s.NewErrors()
	for _, n := range s.Target.Nodes {
		field := "target.node." + n.Name + ".dsn"
		cfg, err := parseDSN(n.DSN)
		switch {
		case err != nil:
			errs.Add(field, "%v", err)
		case cfg.Passwd != "":
			errs.Add(field, "the connection string carries a password, and the spec is kept with the results: remove it and give the password with [target] password_file")
		}
	}
	return errs.Err()
}

// parseDSN parses go-sql-driver/mysql's DSN form.
func parseDSN(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("not a MariaDB connection string (%v); want the form user@tcp(host:3306)/dbname", err)
	}
	if cfg.Net != "tcp" {
		return nil, fmt.Errorf("connection string uses %q; target mode reaches servers over tcp: user@tcp(host:3306)/dbname", cfg.Net)
	}
	return cfg, nil
}

// Opener implements engine.Attacher.
func (Engine) Opener(dsn string) (func() (*sql.DB, error), error) {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("not a MariaDB connection string (user@tcp(host:3306)/db): %v", err)
	}
	return func() (*sql.DB, error) {
		c, err := mysql.NewConnector(mc)
		if err != nil {
			return nil, err
		}
		return sql.OpenDB(c), nil
	}, nil
}

// Attach implements engine.Attacher.
func (Engine) Attach(t *spec.Target, password string) (engine.Attached, error) {
	a := &attached{t: t, cfg: map[string]*mysql.Config{}, kept: map[string]*sql.DB{}}
	for _, n := range t.Nodes {
		a.galera = a.galera || n.Role == "master"
		cfg, err := parseDSN(n.DSN)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		if password != "" {
			cfg.Passwd = password
		}
		cfg.Timeout = t.ConnectTimeout
		a.cfg[n.Name] = cfg
	}
	return a, nil
}

// attached is a MariaDB primary and its replicas (binlog replication), or
// a Galera cluster's masters.
type attached struct {
	t      *spec.Target
	cfg    map[string]*mysql.Config
	galera bool // the nodes are masters of a Galera cluster

	mu   sync.Mutex
	kept map[string]*sql.DB // one connection each, for the reads made every second
}

func (a *attached) Addr(node string) (string, int) {
	host, port, err := net.SplitHostPort(a.cfg[node].Addr)
	if err != nil {
		return a.cfg[node].Addr, 3306
	}
	p, _ := strconv.Atoi(port)
	return host, p
}

// db is node's kept pool of one connection.
func (a *attached) db(node string) (*sql.DB, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if db := a.kept[node]; db != nil {
		return db, nil
	}
	conn, err := mysql.NewConnector(a.cfg[node])
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(1)
	a.kept[node] = db
	return db, nil
}

// explain says a driver error in a user's words.
func explain(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1045 {
		return fmt.Errorf("the server refused the connection: %s (check the dsn's user, the password in the environment or password_file, and the user's host)", me.Message)
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, mysql.ErrInvalidConn) {
		return fmt.Errorf("cannot connect: %w (check the address, that the server runs and listens there, and that this host may reach it)", err)
	}
	return err
}

func (a *attached) Facts(ctx context.Context, node string) (engine.ServerFacts, error) {
	var f engine.ServerFacts
	db, err := a.db(node)
	if err != nil {
		return f, err
	}
	var user string
	if err := db.QueryRowContext(ctx, "SELECT VERSION(), CURRENT_USER()").Scan(&f.Version, &user); err != nil {
		return f, explain(err)
	}
	f.Version = "MariaDB " + f.Version
	ws, err := wsrep(ctx, db)
	if err != nil {
		return f, err
	}
	f.NotMaster = "the spec says master, but the server is not a Galera member (wsrep_on is OFF): target mode reads multi-master MariaDB as a Galera cluster"
	if ws["wsrep_ready"] == "ON" || ws["wsrep_cluster_state_uuid"] != "" {
		f.Group, f.GroupKind = ws["wsrep_cluster_state_uuid"], "Galera cluster"
		status, state := ws["wsrep_cluster_status"], ws["wsrep_local_state_comment"]
		switch {
		case f.Group == "":
		case status != "Primary" || state != "Synced":
			f.NotMaster = fmt.Sprintf("a Galera member that is %s in a %s component: measure a cluster whose members are all Synced in the Primary component", state, status)
		default:
			f.NotMaster = ""
		}
	}
	st, err := SlaveStatus(ctx, db)
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1227 || me.Number == 1142) {
		name, _, _ := strings.Cut(user, "@")
		return f, fmt.Errorf("user %s may not read where the server replicates from (SHOW ALL SLAVES STATUS): GRANT SLAVE MONITOR ON *.* TO %s", user, name)
	}
	if err != nil {
		return f, err
	}
	if len(st) == 0 {
		return f, nil
	}
	f.Replica = true
	f.UpstreamHost = st["Master_Host"]
	f.UpstreamPort, _ = strconv.Atoi(st["Master_Port"])
	f.Receiving = st["Slave_IO_Running"] == "Yes"
	return f, nil
}

func (a *attached) Schema(ctx context.Context, primary string) (engine.SchemaState, error) {
	st := engine.SchemaState{Word: "database"} // only CREATE DATABASE tells whether it may; refused, it changes nothing
	db, err := a.db(primary)
	if err != nil {
		return st, err
	}
	var n int
	var tables sql.NullString
	err = db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?),
		(SELECT GROUP_CONCAT(TABLE_NAME ORDER BY TABLE_NAME SEPARATOR ', ') FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?)`,
		a.t.Schema, a.t.Schema).Scan(&n, &tables)
	st.Exists, st.Objects = n > 0, tables.String
	return st, err
}

func (a *attached) Tables(ctx context.Context, primary string) ([]string, error) {
	db, err := a.db(primary)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, `SELECT LOWER(TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?`, a.t.Schema)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Create: MariaDB's DDL is not transactional, so the database is made
// first and, from then on, dropped at the end whatever fails.
func (a *attached) Create(ctx context.Context, primary string, s engine.Schema, exists bool, made func()) error {
	connector, err := mysql.NewConnector(a.cfg[primary])
	if err != nil {
		return err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return explain(err)
	}
	defer conn.Close()
	name := "`" + a.t.Schema + "`" // the spec's schema names allow no backquote
	if !exists {
		if _, err := conn.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == 1044 {
				user := a.cfg[primary].User
				return fmt.Errorf("user %s may not create databases: GRANT CREATE, DROP ON %s.* TO %s (and ALL on it, for the workload's tables), or create database %s with replab's tables yourself and set create_schema = false", user, name, user, a.t.Schema)
			}
			return fmt.Errorf("CREATE DATABASE %s: %w", name, err)
		}
		made()
	}
	stmts := []string{"USE " + name}
	for _, t := range s.Tables {
		ddl, ok := t.Create[engine.MySQL]
		if !ok {
			return fmt.Errorf("table %s has no MariaDB definition", t.Name)
		}
		stmts = append(stmts, ddl)
		stmts = append(stmts, t.Indexes[engine.MySQL]...)
	}
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", enginekit.FirstWords(q), err)
		}
	}
	return nil
}

func (a *attached) Open(node string) (*sql.DB, error) {
	cfg := a.cfg[node].Clone()
	cfg.DBName = a.t.Schema
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

// wsrep is a server's wsrep_% status; empty without Galera.
func wsrep(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS LIKE 'wsrep\\_%'")
	if err != nil {
		return nil, fmt.Errorf("read wsrep status: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[strings.ToLower(k)] = v
	}
	return out, rows.Err()
}

// Position is the primary's binlog GTID position; in a Galera cluster the
// cluster-wide sequence number of the last write-set committed.
func (a *attached) Position(ctx context.Context, primary string) (string, error) {
	db, err := a.db(primary)
	if err != nil {
		return "", err
	}
	if a.galera {
		ws, err := wsrep(ctx, db)
		return ws["wsrep_last_committed"], err
	}
	var pos string
	err = db.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos)
	return pos, err
}

func (a *attached) Reached(ctx context.Context, node, pos string) (bool, string, error) {
	db, err := a.db(node)
	if err != nil {
		return false, "", err
	}
	if a.galera {
		ws, err := wsrep(ctx, db)
		if err != nil {
			return false, "", err
		}
		at, want := ws["wsrep_last_committed"], pos
		x, errX := strconv.ParseInt(at, 10, 64)
		w, errW := strconv.ParseInt(want, 10, 64)
		return errX == nil && errW == nil && x >= w, at, nil
	}
	var res int
	var at string
	err = db.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, 0), @@gtid_slave_pos", pos).Scan(&res, &at)
	return err == nil && res == 0, at, err
}

func (a *attached) State(ctx context.Context, node, from, pos string) (engine.ReplicaState, error) {
	r := engine.ReplicaState{Node: node, From: from, Kind: "binlog", BacklogUnit: engine.UnitTransactions, ReplayLagMs: -1}
	db, err := a.db(node)
	if err != nil {
		return r, err
	}
	if a.galera {
		return attachedGaleraState(ctx, db, r)
	}
	st, err := SlaveStatus(ctx, db)
	if err != nil {
		return r, err
	}
	r.State = st["Slave_SQL_Running_State"]
	if st["Slave_SQL_Running"] != "Yes" || st["Slave_IO_Running"] != "Yes" {
		r.State = fmt.Sprintf("io %s, sql %s", st["Slave_IO_Running"], st["Slave_SQL_Running"])
		if e := firstNonEmpty(st["Last_SQL_Error"], st["Last_IO_Error"]); e != "" {
			r.State += ": " + e
			r.Error = e
		}
	}
	r.Backlog = GTIDBehind(pos, st["Gtid_Slave_Pos"])
	for _, p := range []engine.Position{
		{Name: "upstream_gtid_binlog_pos", Value: pos},
		{Name: "gtid_io_pos", Value: st["Gtid_IO_Pos"]},
		{Name: "gtid_slave_pos", Value: st["Gtid_Slave_Pos"]},
		{Name: "seconds_behind_master", Value: st["Seconds_Behind_Master"]},
	} {
		if p.Value != "" {
			r.Positions = append(r.Positions, p)
		}
	}
	return r, nil
}

func (a *attached) Drop(ctx context.Context, primary string) error {
	db, err := a.db(primary)
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, "DROP DATABASE `"+a.t.Schema+"`")
	return err
}

func (a *attached) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, db := range a.kept {
		db.Close()
	}
	clear(a.kept)
}

// attachedGaleraState is a Galera member's state: its receive queue in
// write-sets, and the counters that say why it lags (flow control,
// certification).
func attachedGaleraState(ctx context.Context, db *sql.DB, r engine.ReplicaState) (engine.ReplicaState, error) {
	ws, err := wsrep(ctx, db)
	if err != nil {
		return r, err
	}
	r.Kind, r.BacklogUnit, r.State = "galera", engine.UnitWriteSets, ws["wsrep_local_state_comment"]
	if cs := ws["wsrep_cluster_status"]; cs != "Primary" {
		r.State += " (" + cs + ")"
	}
	r.Backlog, _ = strconv.ParseInt(ws["wsrep_local_recv_queue"], 10, 64)
	for _, k := range []string{"wsrep_last_committed", "wsrep_cluster_size", "wsrep_flow_control_paused", "wsrep_local_cert_failures", "wsrep_local_bf_aborts"} {
		if v, ok := ws[k]; ok {
			r.Positions = append(r.Positions, engine.Position{Name: strings.TrimPrefix(k, "wsrep_"), Value: v})
		}
	}
	return r, nil
}
