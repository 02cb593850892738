package mariadb

import (
	"context"
	"database/sql"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/spec"
)

// DefaultPort is the first port of the nodes in a site.
const DefaultPort = 3306

// User and Database are what every DSN connects as and to.
const (
	User     = "replab"
	Database = "replab"
)

// node is one mariadbd in a site.
type node struct {
	spec.Node
	c        *cluster
	index    int // spec order, from 0: server_id is index+1
	site     *lab.Site
	addr     netip.AddrPort
	dataDir  string
	tmpDir   string // each instance its own, or parallel installs collide
	sockDir  string // unique per node, outside the data directory
	cnfPath  string // the server's --defaults-file, written by replab
	cliPath  string // a client option file for `mariadb --defaults-file=…`
	initPath string // SQL run at every start (the replab user and database)
	logPath  string

	proc atomic.Pointer[enginekit.Proc] // nil before the first start

	adminMu sync.Mutex
	admin   *sql.DB // over the unix socket
}

func (n *node) socket() string { return filepath.Join(n.sockDir, "mariadbd.sock") }

// dsn works from every site: go-sql-driver/mysql's form, naming the
// node's lab address.
func (n *node) dsn() string {
	cfg := n.tcpConfig()
	return cfg.FormatDSN()
}

func (n *node) tcpConfig() *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = User, n.c.password
	cfg.Net, cfg.Addr = "tcp", n.addr.String()
	cfg.DBName = Database
	return cfg
}

// settings is the node's [mysqld] section: the cluster's choices, then
// the spec's [node.NAME.settings], which win.
func (n *node) settings() map[string]string {
	p := n.c.plan
	s := map[string]string{
		"datadir":           n.dataDir,
		"tmpdir":            n.tmpDir,
		"socket":            n.socket(),
		"pid_file":          filepath.Join(n.sockDir, "mariadbd.pid"),
		"port":              strconv.Itoa(int(n.addr.Port())),
		"bind_address":      n.addr.Addr().String(),
		"log_error":         n.logPath,
		"server_id":         strconv.Itoa(n.index + 1),
		"log_bin":           n.Name + "-bin",
		"relay_log":         n.Name + "-relay",
		"binlog_format":     "ROW",
		"log_slave_updates": "ON", // cascading and rings forward what they apply
		"skip_name_resolve": "ON",
		// A replica notices a dead upstream (a cut link) after this many
		// seconds without data or heartbeat, then reconnects every second.
		"slave_net_timeout":              "10",
		"character_set_server":           "utf8mb4",
		"collation_server":               "utf8mb4_general_ci",
		"innodb_buffer_pool_size":        "64M",
		"innodb_log_file_size":           "64M",
		"max_connections":                "300",
		"max_allowed_packet":             "64M",
		"local_infile":                   "ON",
		"performance_schema":             "ON", // threads' OS ids and roles (Processes)
		"innodb_flush_log_at_trx_commit": strconv.FormatInt(p.flushLog, 10),
		"sync_binlog":                    strconv.FormatInt(p.syncBinlog, 10),
		"slave_parallel_threads":         strconv.FormatInt(p.parThreads, 10),
	}
	if p.parMode != "" {
		s["slave_parallel_mode"] = p.parMode
	}
	switch p.replication {
	case Semisync:
		if n.Role == "primary" {
			// Off until the replicas are connected (armSemisync): the
			// commits of the set-up would each wait for the timeout.
			s["rpl_semi_sync_master_enabled"] = onOff(n.c.semiArmed.Load())
			s["rpl_semi_sync_master_timeout"] = strconv.FormatInt(p.timeout.Milliseconds(), 10)
			s["rpl_semi_sync_master_wait_point"] = p.waitPoint
		}
		if up := n.c.lab.Spec.Node(n.From); up != nil && up.Role == "primary" {
			s["rpl_semi_sync_slave_enabled"] = "ON"
		}
	case Multimaster:
		if i := indexOf(p.sources, n.Name); i >= 0 {
			// Keys generated at different masters never collide, and each
			// master's transactions have a GTID domain of their own.
			s["auto_increment_increment"] = strconv.Itoa(len(p.sources))
			s["auto_increment_offset"] = strconv.Itoa(i + 1)
			s["gtid_domain_id"] = strconv.Itoa(i + 1)
			// Two masters without replicas of their own: a master need not
			// log what it applies from the other, and if it did, its binlog
			// dump would send every change back to where it came from (to
			// be dropped there by server id): twice the bytes on the link.
			// A ring of three or more relays, and a replica below a master
			// reads what it applies, so they keep it.
			if len(p.sources) == 2 && !n.hasReplicas() {
				s["log_slave_updates"] = "OFF"
			}
		}
	case Galera:
		n.galeraSettings(s)
	}
	for k, v := range n.Settings {
		s[k] = v
	}
	return s
}

// hasReplicas says whether a node of the spec replicates from n.
func (n *node) hasReplicas() bool {
	for _, o := range n.c.lab.Spec.Nodes {
		if o.From == n.Name {
			return true
		}
	}
	return false
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// writeFiles writes the server's option file, the init SQL and the
// client option file.
func (n *node) writeFiles() error {
	m := n.settings()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# written by replab: the only option file this server reads\n[mysqld]\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, m[k])
	}
	if err := n.writeOwned(n.cnfPath, b.String()); err != nil {
		return err
	}
	// Run at every start, outside the binlog: each node creates its own
	// user and database, so replicas start from the same empty state as
	// their upstream and GTID positions count only the workload's changes.
	pw := sqlString(n.c.password)
	var local string
	if n.c.plan.replication == Galera {
		// Nor through Galera: a joiner runs it before it is a member.
		local = "SET SESSION wsrep_on = OFF;\n"
	}
	init := local + strings.Join([]string{
		"SET sql_log_bin = 0;",
		"DELETE FROM mysql.global_priv WHERE User = '';", // anonymous users would shadow replab@'%' locally
		"CREATE USER IF NOT EXISTS 'replab'@'%' IDENTIFIED BY " + pw + ";",
		"CREATE USER IF NOT EXISTS 'replab'@'localhost' IDENTIFIED BY " + pw + ";",
		"GRANT ALL PRIVILEGES ON *.* TO 'replab'@'%' WITH GRANT OPTION;",
		"GRANT ALL PRIVILEGES ON *.* TO 'replab'@'localhost' WITH GRANT OPTION;",
		"FLUSH PRIVILEGES;",
		"CREATE DATABASE IF NOT EXISTS " + Database + ";",
		"",
	}, "\n")
	if err := n.writeOwned(n.initPath, init); err != nil {
		return err
	}
	cli := fmt.Sprintf("# written by replab: replab exec %s -- mariadb --defaults-file=%s\n[client]\nhost = %s\nport = %d\nuser = %s\npassword = %s\ndatabase = %s\n",
		n.Site, n.cliPath, n.addr.Addr(), n.addr.Port(), User, n.c.password, Database)
	return os.WriteFile(n.cliPath, []byte(cli), 0o600)
}

func (n *node) writeOwned(path, text string) error {
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return err
	}
	return os.Chown(path, n.c.uid, n.c.gid)
}

// run runs a program as the servers' OS user inside the node's site,
// bounded by ctx, and returns its error with the program's output.
func (n *node) run(ctx context.Context, bin string, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	n.c.asServerUser(cmd)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	name := filepath.Base(bin)
	if err := n.site.Start(cmd); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w (%s)", name, ctx.Err(), enginekit.LastLines(out.String(), 3))
		}
		return fmt.Errorf("%s: %v: %s", name, err, errorLines(out.String()))
	}
	return nil
}

// errorLines picks the server's [ERROR] lines out of a program's output
// (mariadb-install-db ends with several lines of advice), or its last
// lines.
func errorLines(out string) string {
	var errs []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "[ERROR]") {
			if i := strings.Index(l, "[ERROR]"); i >= 0 {
				l = l[i:]
			}
			errs = append(errs, strings.TrimSpace(l))
		}
	}
	if len(errs) == 0 {
		return enginekit.LastLines(out, 5)
	}
	if len(errs) > 3 {
		errs = errs[:3]
	}
	return strings.Join(errs, " | ")
}

// installDB creates a fresh data directory.
func (n *node) installDB(ctx context.Context) error {
	for _, d := range []string{n.dataDir, n.tmpDir, n.sockDir} {
		if err := enginekit.MkdirOwned(d, n.c.uid, n.c.gid); err != nil {
			return err
		}
	}
	_ = os.Chmod(n.sockDir, 0o755) // clients (root, other users) connect through it
	if err := n.writeOwned(n.logPath, ""); err != nil {
		return err
	}
	if err := n.writeFiles(); err != nil {
		return fmt.Errorf("write option files: %w", err)
	}
	// --defaults-file first: no /etc/mysql file is read. root@localhost
	// keeps socket authentication (root only); replab's user comes from
	// the init file.
	err := n.run(ctx, installBin, "--defaults-file="+n.cnfPath, "--skip-test-db",
		"--auth-root-authentication-method=socket", "--skip-name-resolve")
	if err != nil {
		// The bootstrap server writes its reasons to the error log.
		if e := errorLines(readFile(n.logPath)); strings.Contains(e, "[ERROR]") {
			return fmt.Errorf("mariadb-install-db: %s", e)
		}
	}
	return err
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// start runs mariadbd in the node's site and waits until it accepts
// connections.
func (n *node) start(ctx context.Context) error { return n.startWith(ctx, nil) }

// startWith is start with more arguments for mariadbd (once:
// --wsrep-new-cluster).
func (n *node) startWith(ctx context.Context, args []string) error {
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(serverBin, append([]string{"--defaults-file=" + n.cnfPath, "--init-file=" + n.initPath}, args...)...)
	n.c.asServerUser(cmd)
	cmd.Stdout, cmd.Stderr = logf, logf
	sv, err := enginekit.StartProc(n.site, cmd)
	if err != nil {
		return fmt.Errorf("start mariadbd: %w", err)
	}
	n.proc.Store(sv)

	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = User, n.c.password
	cfg.Net, cfg.Addr = "unix", n.socket()
	cfg.DBName = Database
	cfg.Timeout = 5 * time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(30 * time.Second)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := db.PingContext(pctx)
		cancel()
		if err == nil {
			n.adminMu.Lock()
			n.admin = db
			n.adminMu.Unlock()
			return nil
		}
		select {
		case <-sv.Exited():
			db.Close()
			return fmt.Errorf("mariadbd exited during start-up: %s", n.logTail())
		case <-ctx.Done():
			db.Close()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			db.Close()
			return fmt.Errorf("mariadbd did not accept connections within 2 minutes: %v: %s", err, n.logTail())
		}
	}
}

func (n *node) logTail() string {
	b, _ := os.ReadFile(n.logPath)
	if e := errorLines(string(b)); strings.Contains(e, "[ERROR]") {
		return e
	}
	return enginekit.LastLines(string(b), 4)
}

// pid is mariadbd's PID while it runs; 0 when the node is down.
func (n *node) pid() int { return n.proc.Load().PID() }

// stop shuts the server down (SIGTERM: a clean shutdown), killing it if
// it has not stopped within the timeout.
func (n *node) stop(timeout time.Duration) {
	n.closeAdmin()
	n.proc.Load().Stop(syscall.SIGTERM, timeout)
}

func (n *node) closeAdmin() {
	n.adminMu.Lock()
	defer n.adminMu.Unlock()
	if n.admin != nil {
		n.admin.Close()
		n.admin = nil
	}
}

// db is the node's admin pool; an error when the node is down.
func (n *node) db() (*sql.DB, error) {
	n.adminMu.Lock()
	defer n.adminMu.Unlock()
	if n.admin == nil {
		return nil, fmt.Errorf("node %s is not running", n.Name)
	}
	return n.admin, nil
}

// exec runs SQL on the node as the replab user, bounded by ctx.
func (n *node) exec(ctx context.Context, q string, args ...any) error {
	db, err := n.db()
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("node %s: %s: %w", n.Name, enginekit.FirstWords(q), err)
	}
	return nil
}

// query1 scans the single row of a query into dst.
func (n *node) query1(ctx context.Context, q string, args []any, dst ...any) error {
	db, err := n.db()
	if err != nil {
		return err
	}
	if err := db.QueryRowContext(ctx, q, args...).Scan(dst...); err != nil {
		return fmt.Errorf("node %s: %s: %w", n.Name, enginekit.FirstWords(q), err)
	}
	return nil
}

// sqlString writes a SQL string literal.
func sqlString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(s) + "'"
}
