package postgres

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/lab"
)

// pg_auto_failover (Debian's pg-auto-failover-cli and
// postgresql-15-auto-failover 2.0) runs each node: a monitor node (its own
// PostgreSQL with the pgautofailover extension, run by `pg_autoctl run`)
// in the site the spec names, and a keeper (`pg_autoctl run`) beside every
// node's server. replab initialises the primary as it does its own
// (initdb with 1 MB WAL segments, its settings in replab.conf) and
// registers it (`pg_autoctl create postgres` on the existing data
// directory); every standby is created by `pg_autoctl create postgres`
// run in its site, which copies the primary with pg_basebackup across the
// link. The monitor decides: it health-checks every node, fails over when
// the primary is unhealthy, and sets each keeper's goal state; the keepers
// promote, demote, rewind and rejoin (pg_rewind, else a new base backup).
// pg_autoctl starts the postmaster as its grandchild (not detached); replab
// finds it through postmaster.pid as under the other managers.
//
// Every pg_autoctl runs as the server user with its configuration, state
// and pid files in the node's own directory (XDG_CONFIG_HOME,
// XDG_DATA_HOME, XDG_RUNTIME_DIR: pg_autoctl writes to ~/.config,
// ~/.local/share and /tmp otherwise) and the server's socket in the
// node's socket directory (PG_REGRESS_SOCK_DIR, which pg_autoctl passes to
// postgres as -k).

const (
	pgautoctlBin = "/usr/bin/pg_autoctl"
	// pgafMonitorPort is the monitor's PostgreSQL port on its site's
	// address (the nodes use 5432 and up).
	pgafMonitorPort = 5431
	pgafMonitorDB   = "pg_auto_failover"
	pgafMonitorUser = "autoctl_node"
	pgafFormation   = "default"
)

// pgafPrimaryStates are the states in which the monitor lets a node take
// writes.
var pgafPrimaryStates = []string{"single", "wait_primary", "primary", "join_primary", "apply_settings"}

// pgafMonitor is the monitor node.
type pgafMonitor struct {
	site    *lab.Site
	addr    netip.AddrPort
	dir     string // owned by the server user: XDG directories, logs
	pgdata  string
	sockDir string
	logPath string // pg_autoctl's output
	proc    *enginekit.Proc
}

// uri is how keepers and pg_autoctl commands reach the monitor.
func (m *pgafMonitor) uri() string {
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", pgafMonitorUser, m.addr, pgafMonitorDB)
}

// connect opens a connection to the monitor's database over its unix
// socket (it answers whatever the lab's links do).
func (m *pgafMonitor) connect(ctx context.Context) (*pgx.Conn, error) {
	return pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=%s dbname=%s connect_timeout=2", m.sockDir, m.addr.Port(), pgafMonitorUser, pgafMonitorDB))
}

// pgafDirs makes the XDG and socket directories under dir, owned by the
// server user.
func (c *cluster) pgafDirs(dir string) error {
	for _, d := range []string{"config", "share", "run"} {
		if err := enginekit.MkdirOwned(filepath.Join(dir, d), c.uid, c.gid); err != nil {
			return err
		}
	}
	return nil
}

// pgafEnv points pg_autoctl's files into dir and its server's socket into
// sock; asSuperuser makes it connect to its local server as replab's
// superuser (a keeper; the monitor's superuser is the server user).
func (c *cluster) pgafEnv(cmd *exec.Cmd, dir, sock string, asSuperuser bool) {
	c.asServerUser(cmd)
	cmd.Env = append(cmd.Env,
		"PATH="+c.inst.BinDir+":/usr/sbin:/usr/bin:/bin",
		"PG_CONFIG="+c.inst.bin("pg_config"),
		"HOME="+dir, "TMPDIR="+dir,
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_DATA_HOME="+filepath.Join(dir, "share"),
		"XDG_RUNTIME_DIR="+filepath.Join(dir, "run"),
		"PGHOST="+sock, "PG_REGRESS_SOCK_DIR="+sock,
	)
	if asSuperuser {
		cmd.Env = append(cmd.Env, "PGUSER="+Superuser)
	}
}

// pgautoctl runs one pg_autoctl command to its end in site, its output
// appended to logPath. When ctx ends first, the command and everything it
// started (a supervisor forks its services and a postgres) is stopped.
func (c *cluster) pgautoctl(ctx context.Context, site *lab.Site, dir, sock, logPath string, asSuperuser bool, args ...string) error {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "# replab: pg_autoctl %s\n", strings.Join(args, " "))
	cmd := exec.Command(pgautoctlBin, args...)
	c.pgafEnv(cmd, dir, sock, asSuperuser)
	cmd.Stdout, cmd.Stderr = logf, logf
	p, err := enginekit.StartProc(site, cmd)
	if err != nil {
		return fmt.Errorf("pg_autoctl %s: %w", strings.Join(args[:min(2, len(args))], " "), err)
	}
	select {
	case <-p.Exited():
	case <-ctx.Done():
		stopTree(p, 10*time.Second)
		return fmt.Errorf("pg_autoctl %s: %w (%s)", strings.Join(args[:min(2, len(args))], " "), ctx.Err(), tailFile(logPath, 3))
	}
	if st := p.ExitStatus(); st != "exit status 0" {
		return fmt.Errorf("pg_autoctl %s: %s: %s", strings.Join(args[:min(2, len(args))], " "), st, pgafErrors(logPath))
	}
	return nil
}

// pgafErrors is what a pg_autoctl log says went wrong: its first errors
// (a supervisor restarts a failed service five times, and the later
// attempts fail for other reasons) and its last lines.
func pgafErrors(logPath string) string {
	b, _ := os.ReadFile(logPath)
	var first []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, " ERROR ") || strings.Contains(l, " FATAL ") {
			first = append(first, strings.TrimSpace(l))
			if len(first) == 3 {
				break
			}
		}
	}
	return "first errors: " + strings.Join(first, " | ") + "; last: " + enginekit.LastLines(string(b), 3)
}

// stopTree asks a pg_autoctl supervisor to stop (SIGTERM: it stops its
// services and its postgres) and kills it and every process under it
// after timeout.
func stopTree(p *enginekit.Proc, timeout time.Duration) {
	pid := p.PID()
	if pid == 0 {
		return
	}
	tree := descendants(pid, childrenByParent())
	p.Stop(syscall.SIGTERM, timeout)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = killTree(ctx, tree)
}

// descendants are pid's children, theirs, and so on, each with its start
// time.
func descendants(pid int, children map[int][]int) []proc {
	var out []proc
	for _, k := range children[pid] {
		out = append(out, proc{k, startTime(k)})
		out = append(out, descendants(k, children)...)
	}
	return out
}

// upPgAF builds the cluster under pg_auto_failover: the monitor, the
// primary registered on it, then each standby copied by its keeper, one
// after the other (the monitor takes one new standby at a time).
func (c *cluster) upPgAF(ctx context.Context) error {
	if _, err := os.Stat(pgautoctlBin); err != nil {
		return fmt.Errorf("pg_auto_failover is not installed (%s): run scripts/deps.sh ha, or apt-get install pg-auto-failover-cli postgresql-%d-auto-failover", pgautoctlBin, c.inst.Major)
	}
	if !c.inst.hasExtension("pgautofailover") {
		return fmt.Errorf("pg_auto_failover's extension is not installed for PostgreSQL %d: run scripts/deps.sh ha, or apt-get install postgresql-%d-auto-failover", c.inst.Major, c.inst.Major)
	}
	m := c.plan.manager
	fmt.Fprintf(c.log, "manager %s\n", m.describe())
	if err := c.layoutManaged(); err != nil {
		return err
	}
	for _, n := range c.nodes {
		n.ha.config = "" // pg_autoctl keeps its own under XDG_CONFIG_HOME
		n.ha.logPath = filepath.Join(n.ha.dir, "pg_autoctl.log")
		// The server's output until its logging collector starts; its log
		// proper is in the data directory's log/ (pg_auto_failover's
		// logging_collector).
		n.logPath = filepath.Join(n.dataDir, "startup.log")
		if err := c.pgafDirs(n.ha.dir); err != nil {
			return err
		}
	}
	if err := c.startMonitor(ctx); err != nil {
		return err
	}
	primary := c.byName[c.plan.primaries[0]]
	start := time.Now()
	if err := primary.initdb(ctx); err != nil {
		return fmt.Errorf("node %s: %w", primary.Name, err)
	}
	if err := c.pgafWriteConfig(primary); err != nil {
		return fmt.Errorf("node %s: configure: %w", primary.Name, err)
	}
	if err := c.createPgAFNode(ctx, primary); err != nil {
		return err
	}
	if err := c.startDaemon(primary); err != nil {
		return err
	}
	if err := c.waitRole(ctx, primary, "primary", m.electionBound()+2*time.Minute); err != nil {
		return err
	}
	if err := primary.exec(ctx, "", markerDDL); err != nil {
		return err
	}
	fmt.Fprintf(c.log, "node %s: primary %s in %s, registered on the monitor (%.2f s)\n", primary.Name, c.inst.Version, primary.Site, time.Since(start).Seconds())
	for _, n := range c.nodes {
		if n == primary {
			continue
		}
		t := time.Now()
		if err := c.createPgAFNode(ctx, n); err != nil {
			return err
		}
		if err := c.startDaemon(n); err != nil {
			return err
		}
		if err := c.waitStreaming(ctx, primary, n); err != nil {
			return err
		}
		fmt.Fprintf(c.log, "node %s: standby of %s streaming, copied by pg_autoctl across the link (%.2f s)\n", n.Name, primary.Name, time.Since(t).Seconds())
	}
	if err := c.waitPgAFStates(ctx, primary.Name); err != nil {
		return err
	}
	if m.numberSyncStandbys >= 0 {
		if err := c.monitorExec(ctx, "SELECT pgautofailover.set_formation_number_sync_standbys($1, $2)", pgafFormation, m.numberSyncStandbys); err != nil {
			return fmt.Errorf("pg_auto_failover: number_sync_standbys = %d: %w", m.numberSyncStandbys, err)
		}
		if err := c.waitPgAFStates(ctx, primary.Name); err != nil {
			return err
		}
	}
	var names string
	if err := primary.query1(ctx, "", "SELECT current_setting('synchronous_standby_names')", &names); err != nil {
		return err
	}
	fmt.Fprintf(c.log, "node %s: synchronous_standby_names = '%s' (pg_auto_failover's)\n", primary.Name, names)
	c.startWatch()
	return nil
}

// startMonitor creates the monitor node in its site and runs it.
func (c *cluster) startMonitor(ctx context.Context) error {
	m := c.plan.manager
	site := c.lab.Site(m.monitorSite)
	if site == nil {
		return fmt.Errorf("pg_auto_failover: no site %q for the monitor", m.monitorSite)
	}
	root, err := c.lab.DataDir()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "pgaf-monitor")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := enginekit.MkdirOwned(dir, c.uid, c.gid); err != nil {
		return err
	}
	sockRoot, err := c.lab.SocketDir()
	if err != nil {
		return err
	}
	mon := &pgafMonitor{
		site:    site,
		addr:    netip.AddrPortFrom(site.Address, pgafMonitorPort),
		dir:     dir,
		pgdata:  filepath.Join(dir, "pgdata"),
		sockDir: filepath.Join(sockRoot, "pgaf-monitor"), // short: a socket's path has at most 107 bytes
		logPath: filepath.Join(dir, "pg_autoctl.log"),
	}
	if err := c.pgafDirs(dir); err != nil {
		return err
	}
	if err := enginekit.MkdirOwned(mon.sockDir, c.uid, c.gid); err != nil {
		return err
	}
	_ = os.Chmod(mon.sockDir, 0o755) // replab's watcher connects through it
	c.monitor = mon
	start := time.Now()
	err = c.pgautoctl(ctx, site, dir, mon.sockDir, mon.logPath, false, "create", "monitor",
		"--pgdata", mon.pgdata, "--pgctl", c.inst.bin("pg_ctl"), "--pgport", strconv.Itoa(pgafMonitorPort),
		"--hostname", site.Address.String(), "--auth", "trust", "--no-ssl")
	if err != nil {
		return fmt.Errorf("pg_auto_failover: create the monitor in %s: %w (its server: %s)", m.monitorSite, err, tailFile(filepath.Join(mon.pgdata, "startup.log"), 3))
	}
	// Its health checks and timeouts (milliseconds), and the lab's
	// subnet in its pg_hba.conf.
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	settings := map[string]string{
		"pgautofailover.health_check_period":               ms(m.healthCheckPeriod),
		"pgautofailover.health_check_timeout":              ms(m.healthCheckTimeout),
		"pgautofailover.health_check_max_retries":          strconv.FormatInt(m.healthCheckRetries, 10),
		"pgautofailover.health_check_retry_delay":          ms(m.healthCheckDelay),
		"pgautofailover.node_considered_unhealthy_timeout": ms(m.unhealthyTimeout),
		"pgautofailover.primary_demote_timeout":            ms(m.demoteTimeout),
	}
	if err := c.appendInclude(mon.pgdata, "replab.conf", settings); err != nil {
		return fmt.Errorf("pg_auto_failover: configure the monitor: %w", err)
	}
	if err := c.openSubnet(mon.pgdata); err != nil {
		return err
	}
	logf, err := os.OpenFile(mon.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(pgautoctlBin, "run", "--pgdata", mon.pgdata)
	c.pgafEnv(cmd, dir, mon.sockDir, false)
	cmd.Stdout, cmd.Stderr = logf, logf
	if mon.proc, err = enginekit.StartProc(site, cmd); err != nil {
		return fmt.Errorf("pg_auto_failover: run the monitor: %w", err)
	}
	bound := 2 * time.Minute
	_, err = enginekit.Poll{Interval: 100 * time.Millisecond, Stall: bound}.Until(ctx, func(ctx context.Context) (bool, string, error) {
		if st := mon.proc.ExitStatus(); st != "" {
			return false, "", fmt.Errorf("exited (%s): %s", st, tailFile(mon.logPath, 4))
		}
		conn, err := mon.connect(ctx)
		if err != nil {
			return false, "not answering", nil
		}
		defer conn.Close(context.Background())
		var got string
		if err := conn.QueryRow(ctx, "SELECT setting FROM pg_settings WHERE name = 'pgautofailover.node_considered_unhealthy_timeout'").Scan(&got); err != nil {
			return false, err.Error(), nil
		}
		return got == ms(m.unhealthyTimeout), "unhealthy timeout " + got + " ms", nil
	})
	if err != nil {
		return fmt.Errorf("pg_auto_failover: the monitor in %s: %w", m.monitorSite, err)
	}
	fmt.Fprintf(c.log, "monitor: pg_auto_failover's monitor on %s in %s (%.2f s)\n", mon.addr, m.monitorSite, time.Since(start).Seconds())
	return nil
}

// appendInclude writes settings into file in dataDir and includes it at
// the end of postgresql.conf, after pg_auto_failover's own files (which
// pg_autoctl includes at the top): replab's settings win.
func (c *cluster) appendInclude(dataDir, file string, settings map[string]string) error {
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# written by replab\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = '%s'\n", k, strings.ReplaceAll(settings[k], "'", "''"))
	}
	path := filepath.Join(dataDir, file)
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return err
	}
	if err := os.Chown(path, c.uid, c.gid); err != nil {
		return err
	}
	conf := filepath.Join(dataDir, "postgresql.conf")
	cb, err := os.ReadFile(conf)
	if err != nil {
		return err
	}
	line := "include '" + file + "'"
	if !strings.Contains(string(cb), line) {
		cb = append(cb, "\n# replab\n"+line+"\n"...)
		if err := os.WriteFile(conf, cb, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// openSubnet lets the lab's subnet in (pg_hba.conf), as replab's own
// nodes do.
func (c *cluster) openSubnet(dataDir string) error {
	hba := filepath.Join(dataDir, "pg_hba.conf")
	hb, err := os.ReadFile(hba)
	if err != nil {
		return err
	}
	if strings.Contains(string(hb), "# replab lab subnet") {
		return nil
	}
	sub := c.lab.Spec.Lab.Subnet
	return os.WriteFile(hba, append(hb, fmt.Sprintf("\n# replab lab subnet\nhost all all %s trust\nhost replication all %s trust\n", sub, sub)...), 0o600)
}

// pgafWriteConfig configures the primary's fresh data directory: the
// cluster-wide settings (every standby copies them, and pg_rewind copies
// them again, so nothing of one node's own goes into a file: pg_autoctl
// gives each server its address, port and socket on the command line),
// with pg_auto_failover's logging kept (its collector writes log/ in the
// data directory).
func (c *cluster) pgafWriteConfig(n *node) error {
	s := c.clusterSettings()
	for _, k := range []string{"logging_collector", "synchronous_standby_names"} {
		delete(s, k)
	}
	if d := c.plan.manager.walSenderTimeout; d > 0 {
		s["wal_sender_timeout"] = strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	if err := c.appendInclude(n.dataDir, "replab.conf", s); err != nil {
		return err
	}
	return c.openSubnet(n.dataDir)
}

// createPgAFNode registers n on the monitor with pg_autoctl create
// postgres, run in n's site: the primary's existing data directory, or a
// standby copied from the primary. Then its keeper's timeouts, and the
// name its stream has at the primary.
func (c *cluster) createPgAFNode(ctx context.Context, n *node) error {
	m := c.plan.manager
	quorum := m.inQuorum(n.Name, c.plan.replication == Sync)
	err := c.pgautoctl(ctx, n.site, n.ha.dir, n.sockDir, n.ha.logPath, true, "create", "postgres",
		"--pgdata", n.dataDir, "--pgctl", c.inst.bin("pg_ctl"),
		"--pgport", strconv.Itoa(int(n.addr.Port())), "--listen", n.addr.Addr().String(), "--hostname", n.addr.Addr().String(),
		"--name", n.Name, "--username", Superuser, "--dbname", Database,
		"--monitor", c.monitor.uri(), "--auth", "trust", "--no-ssl",
		"--candidate-priority", strconv.FormatInt(m.candidatePriority(n.Name), 10),
		"--replication-quorum", strconv.FormatBool(quorum))
	if err != nil {
		return fmt.Errorf("node %s: %w (its server: %s)", n.Name, err, tailFile(n.logPath, 3))
	}
	if m.partitionTimeout != pgafPartitionTimeout {
		err := c.pgautoctl(ctx, n.site, n.ha.dir, n.sockDir, n.ha.logPath, true, "config", "set", "--pgdata", n.dataDir,
			"timeout.network_partition_timeout", strconv.Itoa(int(m.partitionTimeout/time.Second)))
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	conn, err := c.monitor.connect(ctx)
	if err != nil {
		return fmt.Errorf("pg_auto_failover: the monitor: %w", err)
	}
	defer conn.Close(context.Background())
	var id int64
	if err := conn.QueryRow(ctx, "SELECT nodeid FROM pgautofailover.node WHERE nodename = $1", n.Name).Scan(&id); err != nil {
		return fmt.Errorf("node %s: its id on the monitor: %w", n.Name, err)
	}
	// pg_autoctl names each standby's stream after its node id.
	n.ha.appName = fmt.Sprintf("pgautofailover_standby_%d", id)
	return nil
}

// monitorExec runs SQL at the monitor.
func (c *cluster) monitorExec(ctx context.Context, sql string, args ...any) error {
	conn, err := c.monitor.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// pgafState is one node's row at the monitor.
type pgafState struct {
	reported, goal string
	health         int
}

// pgafStates reads every node's states at the monitor.
func (c *cluster) pgafStates(ctx context.Context, conn *pgx.Conn) (map[string]pgafState, error) {
	rows, err := conn.Query(ctx, "SELECT nodename, reportedstate::text, goalstate::text, health FROM pgautofailover.node")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]pgafState{}
	for rows.Next() {
		var name string
		var st pgafState
		if err := rows.Scan(&name, &st.reported, &st.goal, &st.health); err != nil {
			return nil, err
		}
		out[name] = st
	}
	return out, rows.Err()
}

// waitPgAFStates waits until the monitor's view has settled: primary
// reported and assigned "primary" (or "wait_primary" with no standby in
// the quorum), every other node "secondary".
func (c *cluster) waitPgAFStates(ctx context.Context, primary string) error {
	bound := c.plan.manager.electionBound() + time.Minute
	_, err := enginekit.Poll{Interval: 200 * time.Millisecond, Stall: bound}.Until(ctx, func(ctx context.Context) (bool, string, error) {
		conn, err := c.monitor.connect(ctx)
		if err != nil {
			return false, "monitor not answering", nil
		}
		defer conn.Close(context.Background())
		states, err := c.pgafStates(ctx, conn)
		if err != nil {
			return false, err.Error(), nil
		}
		var words []string
		ok := true
		for _, n := range c.nodes {
			st := states[n.Name]
			want := []string{"secondary"}
			if n.Name == primary {
				want = []string{"primary", "wait_primary"}
			}
			if st.reported != st.goal || !containsName(want, st.goal) {
				ok = false
			}
			words = append(words, fmt.Sprintf("%s %s/%s", n.Name, st.reported, st.goal))
		}
		return ok, strings.Join(words, ", "), nil
	})
	if err != nil {
		return fmt.Errorf("pg_auto_failover: the monitor's states did not settle: %w", err)
	}
	return nil
}

// pgafRole is a node's role as the monitor sees it: primary when it
// assigned the node a primary's state, streaming when the node is a
// secondary as assigned, down when its health checks fail.
func pgafRole(st pgafState, known bool) string {
	switch {
	case !known:
		return engine.RoleDown
	case containsName(pgafPrimaryStates, st.goal):
		return engine.RolePrimary
	case st.health == 0:
		return engine.RoleDown
	case st.goal == "secondary" && st.reported == "secondary":
		return engine.RoleStreaming
	}
	return engine.RoleReplica
}

// lagGate keeps the lag probe's reader off a node that pg_auto_failover's
// monitor does not count as a secondary (or a primary): pg_autoctl 2.0
// stops the server it runs for crash recovery before a rewind with a
// smart shutdown, which waits for every session to end, and starts
// pg_rewind without waiting for it, so a session held there keeps an old
// primary from rejoining. nil under the other managers.
func (c *cluster) lagGate(node string) func() error {
	if c.plan.manager == nil || c.plan.manager.kind != ManagerPgAF {
		return nil
	}
	return func() error {
		w := c.watch
		if w == nil {
			return nil
		}
		switch role := w.managerRole(node); role {
		case engine.RoleStreaming, engine.RolePrimary:
			return nil
		default:
			return fmt.Errorf("node %s is not a secondary at pg_auto_failover's monitor (%s): not read until it is", node, role)
		}
	}
}

// stopMonitor stops the monitor's pg_autoctl (which stops its server),
// and kills what is left, server included.
func (c *cluster) stopMonitor() {
	mon := c.monitor
	if mon == nil {
		return
	}
	stopTree(mon.proc, 15*time.Second)
	// A server left by a create that failed, or by a killed pg_autoctl.
	if pid := pidFromFile(mon.pgdata, c.inst.bin("postgres")); pid != 0 {
		tree := append([]proc{{pid, startTime(pid)}}, descendants(pid, childrenByParent())...)
		_ = syscall.Kill(pid, syscall.SIGINT)
		deadline := time.Now().Add(10 * time.Second)
		for tree[0].alive() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = killTree(ctx, tree)
		cancel()
	}
}

// monitorProcesses are the monitor's pg_autoctl and server, role
// "monitor".
func (c *cluster) monitorProcesses(children map[int][]int) []engine.Process {
	mon := c.monitor
	if mon == nil {
		return nil
	}
	pid := mon.proc.PID()
	if pid == 0 {
		return nil
	}
	name := "monitor-" + c.plan.manager.monitorSite
	out := []engine.Process{{Node: name, Role: "monitor", PID: pid}}
	for _, p := range descendants(pid, children) {
		out = append(out, engine.Process{Node: name, Role: "monitor", PID: p.pid})
	}
	return out
}

// pidFromFile is the PID in dataDir's postmaster.pid when that process is
// bin running that data directory; 0 otherwise.
func pidFromFile(dataDir, bin string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 || startTime(pid) == "" {
		return 0
	}
	if cl := cmdline(pid); !strings.HasPrefix(cl, bin) || !strings.Contains(cl, dataDir) {
		return 0 // PIDs are reused
	}
	return pid
}
