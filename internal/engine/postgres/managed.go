package postgres

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
)

// What every HA manager's node shares (Patroni's, repmgr's,
// pg_auto_failover's): the
// manager's process beside the server, the server found through
// postmaster.pid (the managers start it detached, its parent PID 1), and
// what faults and Close do to both.

// haNode is a managed node's manager side.
type haNode struct {
	dir     string         // owned by the server user: configuration, pgpass, logs
	config  string         // patroni.yml or repmgr.conf
	logPath string         // the manager process's own output (the server's log is n.logPath)
	rest    netip.AddrPort // Patroni's REST API on the site's address (unused under the others)
	// appName is the application_name of the node's stream at its
	// primary: its name, or pg_auto_failover's pgautofailover_standby_ID.
	appName  string
	proc     *enginekit.Proc
	procLock chan struct{} // one start or stop at a time
}

// managed says whether an HA manager runs n.
func (n *node) managed() bool { return n.ha != nil }

// layoutManaged gives every node its manager's directory and REST port.
func (c *cluster) layoutManaged() error {
	ports := map[string]uint16{}
	for _, n := range c.nodes {
		dir := filepath.Join(filepath.Dir(n.dataDir), "ha-"+n.Name)
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := enginekit.MkdirOwned(dir, c.uid, c.gid); err != nil {
			return err
		}
		if ports[n.Site] == 0 {
			ports[n.Site] = patroniRESTPort
		}
		n.ha = &haNode{
			dir:      dir,
			config:   filepath.Join(dir, "patroni.yml"),
			logPath:  filepath.Join(dir, "patroni.log"),
			rest:     netip.AddrPortFrom(n.addr.Addr(), ports[n.Site]),
			appName:  n.Name,
			procLock: make(chan struct{}, 1),
		}
		ports[n.Site]++
		// The server's log: written by the server itself (Patroni starts
		// it), so in a directory the server user owns.
		n.logPath = filepath.Join(dir, "postgresql.log")
		if err := enginekit.MkdirOwned(n.dataDir, c.uid, c.gid); err != nil {
			return err
		}
		if c.plan.manager.kind != ManagerRepmgr {
			// Patroni and pg_autoctl remove, move or rename a node's data
			// directory (a new copy after a failed rewind; pg_autoctl's
			// base backup, made beside it and renamed into place): its
			// parent must be the server user's, not the lab's.
			n.dataDir = filepath.Join(n.dataDir, "pgdata")
			if c.plan.manager.kind == ManagerPatroni {
				if err := enginekit.MkdirOwned(n.dataDir, c.uid, c.gid); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// startDaemon runs n's manager process in its site: Patroni, repmgrd or
// pg_autoctl.
func (c *cluster) startDaemon(n *node) error {
	n.ha.procLock <- struct{}{}
	defer func() { <-n.ha.procLock }()
	name := c.daemonName()
	if n.ha.proc.PID() != 0 {
		return fmt.Errorf("node %s: %s is already running", n.Name, name)
	}
	logf, err := os.OpenFile(n.ha.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	var cmd *exec.Cmd
	switch c.plan.manager.kind {
	case ManagerRepmgr:
		cmd = exec.Command(c.inst.bin("repmgrd"), "-f", n.ha.config, "--daemonize=false")
		c.asServerUser(cmd)
		// Its promote and follow commands write temporary files there.
		cmd.Env = append(cmd.Env, "TMPDIR="+n.ha.dir)
	case ManagerPgAF:
		// A pid file left by a killed pg_autoctl: its PID may be another
		// process's by now, and pg_autoctl would not start.
		_ = filepath.WalkDir(filepath.Join(n.ha.dir, "run"), func(path string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == "pg_autoctl.pid" {
				_ = os.Remove(path)
			}
			return nil
		})
		cmd = exec.Command(pgautoctlBin, "run", "--pgdata", n.dataDir)
		c.pgafEnv(cmd, n.ha.dir, n.sockDir, true)
	default:
		cmd = exec.Command(patroniBin, n.ha.config)
		c.asServerUser(cmd)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	p, err := enginekit.StartProc(n.site, cmd)
	if err != nil {
		return fmt.Errorf("node %s: start %s: %w", n.Name, name, err)
	}
	n.ha.proc = p
	return nil
}

// daemonName is the manager's process on every node, as stages and
// monitors name it.
func (c *cluster) daemonName() string {
	if c.plan.manager != nil {
		switch c.plan.manager.kind {
		case ManagerRepmgr:
			return "repmgrd"
		case ManagerPgAF:
			return "pg_autoctl"
		}
	}
	return "patroni"
}

// waitRole waits until n's server answers over its socket in role
// ("primary": not in recovery).
func (c *cluster) waitRole(ctx context.Context, n *node, role string, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	_, err := enginekit.Poll{Interval: 100 * time.Millisecond, Stall: bound}.Until(ctx, func(ctx context.Context) (bool, string, error) {
		if st := n.ha.proc.ExitStatus(); st != "" {
			return false, "", fmt.Errorf("%s exited (%s): %s", c.daemonName(), st, tailFile(n.ha.logPath, 4))
		}
		var rec bool
		if err := n.query1(ctx, "postgres", "SELECT pg_is_in_recovery()", &rec); err != nil {
			return false, "not answering", nil
		}
		got := "primary"
		if rec {
			got = "standby"
		}
		return got == role, got, nil
	})
	if err != nil {
		return fmt.Errorf("node %s: not %s within %s: %w (%s: %s)", n.Name, role, bound, err, c.daemonName(), tailFile(n.ha.logPath, 3))
	}
	return nil
}

// waitStreaming waits until standby streams from primary, as the
// primary's pg_stat_replication says (Patroni and repmgr name each stream
// after its node, pg_auto_failover after the node's id: appName).
func (c *cluster) waitStreaming(ctx context.Context, primary, standby *node) error {
	bound := 2*time.Minute + 20*c.lab.Spec.WorstRoundTrip()
	var state string
	_, err := enginekit.Poll{Interval: 100 * time.Millisecond, Stall: bound}.Until(ctx, func(ctx context.Context) (bool, string, error) {
		if st := standby.ha.proc.ExitStatus(); st != "" {
			return false, "", fmt.Errorf("%s exited (%s): %s", c.daemonName(), st, tailFile(standby.ha.logPath, 4))
		}
		state = ""
		err := primary.query1(ctx, "", `SELECT coalesce(max(state), '') FROM pg_stat_replication WHERE application_name = $1`, &state, standby.ha.appName)
		if err != nil {
			return false, "", nil
		}
		return state == "streaming", "stream " + state, nil
	})
	if err != nil {
		return fmt.Errorf("node %s: not streaming from %s: %w (%s: %s)", standby.Name, primary.Name, err, c.daemonName(), tailFile(standby.ha.logPath, 3))
	}
	return nil
}

// nodeOfApp is the node whose stream has application_name app at its
// primary (pg_auto_failover names streams after node ids); app itself
// for others.
func (c *cluster) nodeOfApp(app string) string {
	for _, n := range c.nodes {
		if n.ha != nil && n.ha.appName == app {
			return n.Name
		}
	}
	return app
}

// managedPostmasterPID is the PID of n's postmaster (started by its manager), from
// postmaster.pid, when that process runs this data directory; 0 otherwise.
func (n *node) managedPostmasterPID() int {
	return pidFromFile(n.dataDir, n.c.inst.bin("postgres"))
}

// serverTree is the postmaster and its children, each with its start time.
func (n *node) serverTree() []proc {
	pid := n.managedPostmasterPID()
	if pid == 0 {
		return nil
	}
	out := []proc{{pid, startTime(pid)}}
	for _, k := range childrenByParent()[pid] {
		out = append(out, proc{k, startTime(k)})
	}
	return out
}

// killTree SIGKILLs procs and waits until they are gone.
func killTree(ctx context.Context, procs []proc) error {
	for _, p := range procs {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	for _, p := range procs {
		for p.alive() {
			select {
			case <-ctx.Done():
				return fmt.Errorf("killed process %d did not exit: %w", p.pid, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}

// killManaged kills the node: its manager and the server together, a
// crash of its host.
func (c *cluster) killManaged(ctx context.Context, n *node) error {
	n.ha.procLock <- struct{}{}
	defer func() { <-n.ha.procLock }()
	tree := n.serverTree()
	var procs []proc
	if pid := n.ha.proc.PID(); pid != 0 {
		procs = append(procs, proc{pid, startTime(pid)})
		// What the manager started (Patroni's pg_basebackup, pg_rewind or
		// callback; pg_autoctl's services and its server, its grandchild)
		// dies with it.
		procs = append(procs, descendants(pid, childrenByParent())...)
	}
	for _, p := range tree {
		if !slices.Contains(procs, p) {
			procs = append(procs, p)
		}
	}
	if len(procs) == 0 {
		return fmt.Errorf("node %s is not running", n.Name)
	}
	n.closeAdmin()
	if err := killTree(ctx, procs); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if p := n.ha.proc; p != nil {
		select {
		case <-p.Exited():
		case <-ctx.Done():
			return fmt.Errorf("node %s: killed %s did not exit: %w", n.Name, c.daemonName(), ctx.Err())
		}
	}
	if len(tree) > 0 {
		if err := n.releaseIPC(tree[0].pid); err != nil {
			fmt.Fprintf(c.log, "node %s: warning: %v\n", n.Name, err)
		}
	}
	fmt.Fprintf(c.log, "node %s: killed (%s and %d server processes)\n", n.Name, c.daemonName(), len(tree))
	return nil
}

// stopManaged stops the manager (Patroni stops its server with it on
// SIGTERM; SIGINT does not stop it), then the server if it still runs (a
// fast shutdown), and kills whatever is left after timeout.
func (c *cluster) stopManaged(n *node, timeout time.Duration) {
	n.ha.procLock <- struct{}{}
	defer func() { <-n.ha.procLock }()
	n.closeAdmin()
	if p := n.ha.proc; p != nil {
		_ = n.signalTree(syscall.SIGCONT)
		p.Stop(syscall.SIGTERM, timeout)
	}
	if tree := n.serverTree(); len(tree) > 0 {
		// Patroni did not stop it (killed, or out of time): a fast
		// shutdown, then SIGKILL.
		_ = syscall.Kill(tree[0].pid, syscall.SIGINT)
		deadline := time.Now().Add(timeout)
		for proc(tree[0]).alive() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = killTree(ctx, n.serverTree())
		cancel()
		_ = n.releaseIPC(tree[0].pid)
	}
}

// signalTree sends sig to the manager, what it started, and the server's
// processes.
func (n *node) signalTree(sig syscall.Signal) error {
	var err error
	if pid := n.ha.proc.PID(); pid != 0 {
		err = syscall.Kill(pid, sig)
		for _, p := range descendants(pid, childrenByParent()) {
			_ = syscall.Kill(p.pid, sig)
		}
	}
	for _, p := range n.serverTree() {
		_ = syscall.Kill(p.pid, sig)
	}
	return err
}

// managerOnly are the manager's process and the processes it started that
// are not the server's: what a stage fault on the manager acts on.
// Patroni and repmgrd are one process; pg_autoctl is a supervisor and its
// services, the server under one of them.
func (n *node) managerOnly() []proc {
	pid := n.ha.proc.PID()
	if pid == 0 {
		return nil
	}
	out := []proc{{pid, startTime(pid)}}
	if n.c.plan.manager.kind != ManagerPgAF {
		return out
	}
	server := n.serverTree()
	for _, p := range descendants(pid, childrenByParent()) {
		if !slices.Contains(server, p) && strings.HasPrefix(cmdline(p.pid), "pg_autoctl") {
			out = append(out, p)
		}
	}
	return out
}

// managedStage does action to one of a managed node's stages: the manager
// alone ("patroni", "repmgrd") or the server alone ("postgres").
func (c *cluster) managedStage(ctx context.Context, n *node, stage, action string) error {
	switch stage {
	case c.daemonName():
		return c.daemonAction(ctx, n, action)
	case "postgres":
		return c.serverAction(ctx, n, action)
	}
	return fmt.Errorf("node %s has no stage %q; its stages: %s", n.Name, stage, strings.Join(c.plan.managerStages(), ", "))
}

// daemonAction acts on the manager's process alone: the server goes on
// without its manager (killed, neither Patroni nor repmgrd stops it).
func (c *cluster) daemonAction(ctx context.Context, n *node, action string) error {
	switch action {
	case "kill":
		p := n.ha.proc
		if p.PID() == 0 {
			return fmt.Errorf("node %s: %s is not running", n.Name, c.daemonName())
		}
		var rest []proc
		if ps := n.managerOnly(); len(ps) > 1 {
			rest = ps[1:]
		}
		_ = p.Signal(ctx, syscall.SIGKILL)
		// pg_autoctl's services outlive their supervisor: they go too,
		// the server goes on.
		if err := killTree(ctx, rest); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	case "stop":
		p := n.ha.proc
		if p.PID() == 0 {
			return fmt.Errorf("node %s: %s is not running", n.Name, c.daemonName())
		}
		// Patroni stops the server with it.
		if err := p.Signal(ctx, syscall.SIGTERM); err != nil {
			return fmt.Errorf("node %s: %s not stopped: %w", n.Name, c.daemonName(), err)
		}
	case "start":
		if err := c.startDaemon(n); err != nil {
			return err
		}
	case "restart":
		if err := c.daemonAction(ctx, n, "stop"); err != nil {
			return err
		}
		return c.daemonAction(ctx, n, "start")
	case "pause", "resume":
		sig := syscall.SIGSTOP
		if action == "resume" {
			sig = syscall.SIGCONT
		}
		ps := n.managerOnly()
		if len(ps) == 0 || syscall.Kill(ps[0].pid, sig) != nil {
			return fmt.Errorf("node %s: %s is not running", n.Name, c.daemonName())
		}
		for _, p := range ps[1:] {
			_ = syscall.Kill(p.pid, sig)
		}
	default:
		return fmt.Errorf("unknown action %q", action)
	}
	fmt.Fprintf(c.log, "node %s: %s %s\n", n.Name, c.daemonName(), pastTense(action))
	return nil
}

// serverAction acts on the server alone, under a running manager, which
// notices and acts as it does (Patroni starts it again; repmgrd fails
// over when it does not come back).
func (c *cluster) serverAction(ctx context.Context, n *node, action string) error {
	tree := n.serverTree()
	switch action {
	case "kill":
		if len(tree) == 0 {
			return fmt.Errorf("node %s: postgres is not running", n.Name)
		}
		n.closeAdmin()
		if err := killTree(ctx, tree); err != nil {
			return err
		}
		_ = n.releaseIPC(tree[0].pid)
	case "stop":
		if len(tree) == 0 {
			return fmt.Errorf("node %s: postgres is not running", n.Name)
		}
		n.closeAdmin()
		_ = syscall.Kill(tree[0].pid, syscall.SIGINT)
		for proc(tree[0]).alive() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	case "pause", "resume":
		sig := syscall.SIGSTOP
		if action == "resume" {
			sig = syscall.SIGCONT
		}
		if len(tree) == 0 {
			return fmt.Errorf("node %s: postgres is not running", n.Name)
		}
		for _, p := range tree {
			_ = syscall.Kill(p.pid, sig)
		}
	case "start", "restart":
		if c.plan.manager.kind == ManagerRepmgr {
			if action == "restart" && len(tree) > 0 {
				if err := c.serverAction(ctx, n, "stop"); err != nil {
					return err
				}
			}
			return c.pgctlStart(ctx, n)
		}
		return fmt.Errorf("node %s: %s starts its server itself: kill or stop the postgres stage, and %s starts it again", n.Name, c.daemonName(), c.daemonName())
	default:
		return fmt.Errorf("unknown action %q", action)
	}
	fmt.Fprintf(c.log, "node %s: postgres %s (%s runs on)\n", n.Name, pastTense(action), c.daemonName())
	return nil
}

func pastTense(action string) string {
	switch action {
	case "stop":
		return "stopped"
	case "kill":
		return "killed"
	case "pause":
		return "paused"
	case "resume":
		return "resumed"
	case "start":
		return "started"
	case "restart":
		return "restarted"
	}
	return action
}

// closeManaged stops every manager and server, the proxies, the store and
// the monitor.
func (c *cluster) closeManaged() {
	c.stopProxies()
	c.stopWatch()
	_ = enginekit.Each(c.nodes, func(n *node) error {
		if n.ha != nil {
			c.stopManaged(n, 15*time.Second)
		}
		return nil
	})
	c.store.stop()
	c.stopMonitor()
}

// managerProcesses are the managers' processes (role "patroni",
// "repmgrd" or "pg_autoctl"), the proxies' ("haproxy"), the store's
// ("etcd") and the monitor's ("monitor").
func (c *cluster) managerProcesses() []engine.Process {
	var out []engine.Process
	for _, n := range c.nodes {
		if n.ha == nil {
			continue
		}
		for _, p := range n.managerOnly() {
			out = append(out, engine.Process{Node: n.Name, Role: c.daemonName(), PID: p.pid})
		}
	}
	out = append(out, c.proxyProcesses()...)
	out = append(out, c.store.processes()...)
	return append(out, c.monitorProcesses(childrenByParent())...)
}
