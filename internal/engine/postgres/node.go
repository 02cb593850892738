package postgres

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/spec"
)

// DefaultPort is the first port of the nodes in a site.
const DefaultPort = 5432

// Superuser and Database are what every DSN connects as and to.
const (
	Superuser = "postgres"
	Database  = "replab"
)

// node is one PostgreSQL server in a site.
type node struct {
	spec.Node
	c       *cluster
	site    *lab.Site
	addr    netip.AddrPort
	dataDir string
	sockDir string // unique per node, outside the data directory
	logPath string

	// proc is the running postmaster; nil before the first start. Node
	// control replaces it while monitors read it.
	proc  atomic.Pointer[postmaster]
	admin *pgxpool.Pool // over the unix socket, as the superuser

	// failedOver: a standby of this (primary) node was promoted; it is out
	// of the cluster (cluster.topo guards it, with Role and From).
	failedOver bool
	// ha is the manager's side of a node an HA manager runs (patroni.go);
	// nil: replab runs the server itself (proc).
	ha *haNode
}

// postmaster is one run of a node's server.
type postmaster struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when it has exited and been reaped
}

// dsn works from every site: it names the node's lab address.
func (n *node) dsn() string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", n.addr.Addr(), n.addr.Port(), Superuser, Database)
}

// conninfo is how another node (a standby, a subscriber) reaches this one.
func (n *node) conninfo(appName string) string {
	s := fmt.Sprintf("host=%s port=%d user=%s dbname=%s", n.addr.Addr(), n.addr.Port(), Superuser, Database)
	if appName != "" {
		s += " application_name=" + appName
	}
	return s
}

// run runs a PostgreSQL program as the servers' OS user inside the node's
// site, bounded by ctx, and returns its error with the program's output.
func (n *node) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, n.c.inst.bin(name), args...)
	n.c.asServerUser(cmd)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := n.site.Start(cmd); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w (%s)", name, ctx.Err(), enginekit.LastLines(out.String(), 3))
		}
		return fmt.Errorf("%s: %v: %s", name, err, enginekit.LastLines(out.String(), 5))
	}
	return nil
}

// initdb creates a fresh data directory.
func (n *node) initdb(ctx context.Context) error {
	if err := enginekit.MkdirOwned(n.dataDir, n.c.uid, n.c.gid); err != nil {
		return err
	}
	// --no-sync: a lab's data is thrown away; trust: the lab's network is
	// private to this machine. --wal-segsize=1 (MB, not 16): a segment
	// switch (every base backup starts and ends with one) pads the rest of
	// the segment with zeros that every standby streaming at the time
	// receives across its link; at 16 MB that was 16 MB per backup per
	// standby, more than a compressed copy of the cluster.
	return n.run(ctx, "initdb", "-D", n.dataDir, "-U", Superuser, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--wal-segsize=1")
}

// writeConfig writes the cluster-wide settings and this node's own, and
// opens the lab subnet in pg_hba.conf. It is re-run after pg_basebackup,
// which copies the upstream's files.
func (n *node) writeConfig(extra map[string]string) error {
	conf := filepath.Join(n.dataDir, "postgresql.conf")
	b, err := os.ReadFile(conf)
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), "include 'replab.conf'") {
		b = append(b, "\n# replab: cluster-wide, then this node's own settings\ninclude 'replab.conf'\ninclude 'node.conf'\n"...)
		if err := os.WriteFile(conf, b, 0o600); err != nil {
			return err
		}
	}
	if err := n.writeSettings("replab.conf", n.c.clusterSettings()); err != nil {
		return err
	}
	own := map[string]string{
		"listen_addresses":        n.addr.Addr().String(),
		"port":                    strconv.Itoa(int(n.addr.Port())),
		"unix_socket_directories": n.sockDir,
		"cluster_name":            n.Name,
		// Which node a connection reached, whatever route it took.
		"replab.node": n.Name,
	}
	for k, v := range extra {
		own[k] = v
	}
	for k, v := range n.Settings { // the spec's [node.NAME.settings] win
		own[k] = v
	}
	if err := n.writeSettings("node.conf", own); err != nil {
		return err
	}
	hba := filepath.Join(n.dataDir, "pg_hba.conf")
	hb, err := os.ReadFile(hba)
	if err != nil {
		return err
	}
	if !strings.Contains(string(hb), "# replab lab subnet") {
		line := fmt.Sprintf("\n# replab lab subnet\nhost all all %s trust\nhost replication all %s trust\n", n.c.lab.Spec.Lab.Subnet, n.c.lab.Spec.Lab.Subnet)
		if err := os.WriteFile(hba, append(hb, line...), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (n *node) writeSettings(file string, m map[string]string) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# written by replab\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = '%s'\n", k, strings.ReplaceAll(m[k], "'", "''"))
	}
	path := filepath.Join(n.dataDir, file)
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Chown(path, n.c.uid, n.c.gid)
}

// start runs the postmaster in the node's site and waits until it accepts
// connections.
func (n *node) start(ctx context.Context) error {
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(n.c.inst.bin("postgres"), "-D", n.dataDir)
	n.c.asServerUser(cmd)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := n.site.Start(cmd); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	pm := &postmaster{cmd: cmd, exited: make(chan struct{})}
	n.proc.Store(pm)
	go func() { _ = cmd.Wait(); close(pm.exited) }()

	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("host=%s port=%d user=%s dbname=postgres", n.sockDir, n.addr.Port(), Superuser))
	if err != nil {
		return err
	}
	cfg.MaxConns = 4
	cfg.MinConns = 0
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = pool.Ping(pctx)
			cancel()
			if err == nil {
				n.admin = pool
				return nil
			}
			pool.Close()
		}
		select {
		case <-pm.exited:
			return fmt.Errorf("postgres exited during start-up: %s", n.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within 2 minutes: %s", n.logTail())
		}
	}
}

func (n *node) logTail() string {
	b, _ := os.ReadFile(n.logPath)
	return enginekit.LastLines(string(b), 4)
}

// stop shuts the server down (fast mode: SIGINT), killing it if it has
// not stopped within the timeout.
func (n *node) stop(timeout time.Duration) {
	if n.ha != nil {
		n.c.stopManaged(n, timeout)
		return
	}
	n.closeAdmin()
	pm := n.proc.Load()
	if pm == nil {
		return
	}
	_ = n.signalAll(syscall.SIGCONT) // a paused node would not see the SIGINT
	enginekit.StopServer(pm.cmd, pm.exited, syscall.SIGINT, timeout)
	// A server that had to be killed, or was killed before, left its
	// shared memory (nothing to do after a clean shutdown).
	_ = n.releaseIPC(pm.cmd.Process.Pid)
}

// exec runs SQL on the node as the superuser in the replab database, with
// a bounded wait: a statement stuck waiting (a synchronous commit whose
// standby is partitioned) is cancelled when ctx ends, and pgx then sends
// the server a cancel request (pg_cancel_backend for this backend).
func (n *node) exec(ctx context.Context, db, sql string, args ...any) error {
	conn, err := n.connect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("node %s: %s: %w", n.Name, enginekit.FirstWords(sql), err)
	}
	return nil
}

// query1 returns the single value of a one-row query.
func (n *node) query1(ctx context.Context, db, sql string, dst any, args ...any) error {
	conn, err := n.connect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, sql, args...).Scan(dst); err != nil {
		return fmt.Errorf("node %s: %s: %w", n.Name, enginekit.FirstWords(sql), err)
	}
	return nil
}

// connect opens an admin connection over the node's unix socket.
func (n *node) connect(ctx context.Context, db string) (*pgx.Conn, error) {
	if db == "" {
		db = Database
	}
	c, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=%s dbname=%s", n.sockDir, n.addr.Port(), Superuser, db))
	if err != nil {
		return nil, fmt.Errorf("connect to node %s: %w", n.Name, err)
	}
	return c, nil
}

// dialer returns a pgx dial function that connects from inside site.
func dialer(site *lab.Site) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return site.DialContext
}
