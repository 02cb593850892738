package target

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
	emariadb "replab/internal/engine/mariadb"
	"replab/internal/enginekit"
	"replab/internal/spec"
)

// mariadb is a MariaDB primary and its replicas (binlog replication);
// replab's "schema" is a database of its own.
type mariadb struct {
	t      *spec.Target
	cfg    map[string]*mysql.Config
	galera bool // the nodes are masters of a Galera cluster

	mu   sync.Mutex
	kept map[string]*sql.DB // one connection each, for the reads made every second
}

func newMariaDB(t *spec.Target, password string) (*mariadb, error) {
	m := &mariadb{t: t, cfg: map[string]*mysql.Config{}, kept: map[string]*sql.DB{}}
	for _, n := range t.Nodes {
		m.galera = m.galera || n.Role == "master"
		cfg, err := parseMySQLDSN(n.DSN)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		if password != "" {
			cfg.Passwd = password
		}
		cfg.Timeout = t.ConnectTimeout
		m.cfg[n.Name] = cfg
	}
	return m, nil
}

// parseMySQLDSN parses go-sql-driver/mysql's DSN form.
func parseMySQLDSN(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("not a MariaDB connection string (%v); want the form user@tcp(host:3306)/dbname", err)
	}
	if cfg.Net != "tcp" {
		return nil, fmt.Errorf("connection string uses %q; target mode reaches servers over tcp: user@tcp(host:3306)/dbname", cfg.Net)
	}
	return cfg, nil
}

func (m *mariadb) dialect() engine.Dialect { return engine.MySQL }

func (m *mariadb) addr(node string) (string, int) {
	host, port, err := net.SplitHostPort(m.cfg[node].Addr)
	if err != nil {
		return m.cfg[node].Addr, 3306
	}
	p, _ := strconv.Atoi(port)
	return host, p
}

func (m *mariadb) user(node string) (string, string) { return m.cfg[node].User, m.cfg[node].DBName }

// db is node's kept pool of one connection.
func (m *mariadb) db(node string) (*sql.DB, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if db := m.kept[node]; db != nil {
		return db, nil
	}
	conn, err := mysql.NewConnector(m.cfg[node])
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(1)
	m.kept[node] = db
	return db, nil
}

// explain says a driver error in a user's words.
func explainMySQL(err error) error {
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

func (m *mariadb) facts(ctx context.Context, node string) (fact, error) {
	db, err := m.db(node)
	if err != nil {
		return fact{}, err
	}
	var f fact
	var user string
	if err := db.QueryRowContext(ctx, "SELECT VERSION(), CURRENT_USER()").Scan(&f.version, &user); err != nil {
		return f, explainMySQL(err)
	}
	f.version = "MariaDB " + f.version
	ws, err := wsrep(ctx, db)
	if err != nil {
		return f, err
	}
	if ws["wsrep_ready"] == "ON" || ws["wsrep_cluster_state_uuid"] != "" {
		f.galera, f.galeraStatus, f.galeraState = ws["wsrep_cluster_state_uuid"], ws["wsrep_cluster_status"], ws["wsrep_local_state_comment"]
	}
	st, err := emariadb.SlaveStatus(ctx, db)
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
	f.replica = true
	f.senderHost = st["Master_Host"]
	f.senderPort, _ = strconv.Atoi(st["Master_Port"])
	if st["Slave_IO_Running"] == "Yes" {
		f.receiver = "Yes"
	}
	return f, nil
}

func (m *mariadb) schema(ctx context.Context, primary string) (schemaState, error) {
	st := schemaState{mayCreate: true} // only CREATE DATABASE tells; refused, it changes nothing
	db, err := m.db(primary)
	if err != nil {
		return st, err
	}
	var n int
	var tables sql.NullString
	err = db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?),
		(SELECT GROUP_CONCAT(TABLE_NAME ORDER BY TABLE_NAME SEPARATOR ', ') FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?)`,
		m.t.Schema, m.t.Schema).Scan(&n, &tables)
	st.exists, st.tables = n > 0, tables.String
	return st, err
}

func (m *mariadb) tables(ctx context.Context, primary string) ([]string, error) {
	db, err := m.db(primary)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, `SELECT LOWER(TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?`, m.t.Schema)
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

// create: MariaDB's DDL is not transactional, so the database is made
// first and, from then on, dropped at the end whatever fails.
func (m *mariadb) create(ctx context.Context, primary string, s engine.Schema, exists bool, made func()) error {
	connector, err := mysql.NewConnector(m.cfg[primary])
	if err != nil {
		return err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return explainMySQL(err)
	}
	defer conn.Close()
	name := "`" + m.t.Schema + "`" // schemaRE allows no backquote
	if !exists {
		if _, err := conn.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == 1044 {
				user, _ := m.user(primary)
				return fmt.Errorf("user %s may not create databases: GRANT CREATE, DROP ON %s.* TO %s (and ALL on it, for the workload's tables), or create database %s with replab's tables yourself and set create_schema = false", user, name, user, m.t.Schema)
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

func (m *mariadb) open(node string) (*sql.DB, error) {
	cfg := m.cfg[node].Clone()
	cfg.DBName = m.t.Schema
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

// position is the primary's binlog GTID position; in a Galera cluster the
// cluster-wide sequence number of the last write-set committed.
func (m *mariadb) position(ctx context.Context, primary string) (string, error) {
	db, err := m.db(primary)
	if err != nil {
		return "", err
	}
	if m.galera {
		ws, err := wsrep(ctx, db)
		return ws["wsrep_last_committed"], err
	}
	var pos string
	err = db.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos)
	return pos, err
}

func (m *mariadb) reached(ctx context.Context, node, pos string) (bool, string, error) {
	db, err := m.db(node)
	if err != nil {
		return false, "", err
	}
	if m.galera {
		ws, err := wsrep(ctx, db)
		if err != nil {
			return false, "", err
		}
		at, want := ws["wsrep_last_committed"], pos
		a, errA := strconv.ParseInt(at, 10, 64)
		w, errW := strconv.ParseInt(want, 10, 64)
		return errA == nil && errW == nil && a >= w, at, nil
	}
	var res int
	var at string
	err = db.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, 0), @@gtid_slave_pos", pos).Scan(&res, &at)
	return err == nil && res == 0, at, err
}

func (m *mariadb) state(ctx context.Context, node, from, pos string) (engine.ReplicaState, error) {
	r := engine.ReplicaState{Node: node, From: from, Kind: "binlog", BacklogUnit: engine.UnitTransactions, ReplayLagMs: -1}
	db, err := m.db(node)
	if err != nil {
		return r, err
	}
	if m.galera {
		return galeraState(ctx, db, r)
	}
	st, err := emariadb.SlaveStatus(ctx, db)
	if err != nil {
		return r, err
	}
	r.State = st["Slave_SQL_Running_State"]
	if st["Slave_SQL_Running"] != "Yes" || st["Slave_IO_Running"] != "Yes" {
		r.State = fmt.Sprintf("io %s, sql %s", st["Slave_IO_Running"], st["Slave_SQL_Running"])
	}
	r.Backlog = emariadb.GTIDBehind(pos, st["Gtid_Slave_Pos"])
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

func (m *mariadb) drop(ctx context.Context, primary string) error {
	db, err := m.db(primary)
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, "DROP DATABASE `"+m.t.Schema+"`")
	return err
}

func (m *mariadb) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, db := range m.kept {
		db.Close()
	}
	clear(m.kept)
}

// galeraState is a Galera member's state: its receive queue in
// write-sets, and the counters that say why it lags (flow control,
// certification).
func galeraState(ctx context.Context, db *sql.DB, r engine.ReplicaState) (engine.ReplicaState, error) {
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
