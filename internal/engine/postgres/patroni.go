package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
)

// Patroni (Debian's patroni 3.0.2) runs each node: replab starts one
// Patroni per node in the node's site, as the server user, with the store
// (etcd.go) as its DCS. Patroni initialises the primary (the spec's
// primary bootstraps the cluster), copies the standbys, chooses the
// synchronous standby in synchronous_mode, fails over, and rejoins a
// failed primary with pg_rewind. It starts the postmaster detached (its
// parent is PID 1), so replab finds it through postmaster.pid and tracks
// it too: a kill of the node kills both, a close stops both.

// patroniBin is Debian's Patroni (its shebang is Debian's python3, which
// has the DCS modules; a python3 earlier on PATH may not).
const patroniBin = "/usr/bin/patroni"

// patroniRESTPort is the first REST API port in a site.
const patroniRESTPort = 8008

// haNode is a managed node's manager side.
type haNode struct {
	dir      string         // owned by the server user: configuration, pgpass, logs
	config   string         // patroni.yml
	logPath  string         // Patroni's own log (the server's is n.logPath)
	rest     netip.AddrPort // Patroni's REST API on the site's address
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
			procLock: make(chan struct{}, 1),
		}
		ports[n.Site]++
		// The server's log: written by the server itself (Patroni starts
		// it), so in a directory the server user owns.
		n.logPath = filepath.Join(dir, "postgresql.log")
		if err := enginekit.MkdirOwned(n.dataDir, c.uid, c.gid); err != nil {
			return err
		}
	}
	return nil
}

// patroniConfig is node n's Patroni configuration (JSON is YAML).
func (c *cluster) patroniConfig(n *node) map[string]any {
	m := c.plan.manager
	// Every node's settings: Patroni keeps them in the store and passes
	// the ones PostgreSQL needs alike everywhere on the command line.
	global := c.clusterSettings()
	for _, k := range []string{"synchronous_standby_names", "hot_standby"} {
		delete(global, k) // Patroni's own
	}
	global["wal_log_hints"] = "on" // pg_rewind needs it (or data checksums)
	global["logging_collector"] = "on"
	global["log_directory"] = n.ha.dir
	global["log_filename"] = "postgresql.log"
	global["log_file_mode"] = "0644"
	own := map[string]any{
		"unix_socket_directories": n.sockDir,
		// Which node a connection reached, whatever route it took.
		"replab.node":   n.Name,
		"log_directory": n.ha.dir,
	}
	for k, v := range n.Settings {
		own[k] = v
	}
	params := map[string]any{}
	for k, v := range global {
		params[k] = v
	}
	subnet := c.lab.Spec.Lab.Subnet.String()
	tags := map[string]any{}
	if containsName(m.noFailover, n.Name) {
		tags["nofailover"] = true
	}
	if containsName(m.noSync, n.Name) {
		tags["nosync"] = true
	}
	secs := func(d time.Duration) int { return int(d / time.Second) }
	return map[string]any{
		"scope":     "replab-" + c.lab.Spec.Lab.Name,
		"namespace": "/replab/",
		"name":      n.Name,
		"log":       map[string]any{"level": "INFO", "format": "%(asctime)s %(levelname)s: %(message)s"},
		"restapi": map[string]any{
			"listen":          n.ha.rest.String(),
			"connect_address": n.ha.rest.String(),
		},
		"etcd3": map[string]any{"hosts": c.store.endpoints(), "protocol": "http"},
		"bootstrap": map[string]any{
			"dcs": map[string]any{
				"ttl":                     secs(m.ttl),
				"loop_wait":               secs(m.loopWait),
				"retry_timeout":           secs(m.retryTimeout),
				"maximum_lag_on_failover": m.maxLag,
				"synchronous_mode":        m.syncMode,
				"synchronous_mode_strict": m.syncStrict,
				"postgresql": map[string]any{
					"use_pg_rewind": true,
					"use_slots":     true,
					"parameters":    params,
				},
			},
			// As replab's own initdb (node.go): 1 MB WAL segments, no sync.
			"initdb": []any{map[string]any{"encoding": "UTF8"}, map[string]any{"locale": "C"}, map[string]any{"wal-segsize": "1"}, "no-sync"},
		},
		"postgresql": map[string]any{
			"listen":          n.addr.String(),
			"connect_address": n.addr.String(),
			"data_dir":        n.dataDir,
			"bin_dir":         c.inst.BinDir,
			"pgpass":          filepath.Join(n.ha.dir, "pgpass"),
			"authentication": map[string]any{
				"superuser":   map[string]any{"username": Superuser},
				"replication": map[string]any{"username": Superuser},
				"rewind":      map[string]any{"username": Superuser},
			},
			"parameters": own,
			"pg_hba": []string{
				"local all all trust",
				"host all all " + subnet + " trust",
				"host replication all " + subnet + " trust",
			},
			"basebackup": []any{map[string]any{"checkpoint": "fast"}},
		},
		"tags": tags,
	}
}

func containsName(list []string, name string) bool {
	for _, s := range list {
		if s == name {
			return true
		}
	}
	return false
}

// writePatroniConfig writes n's configuration, owned by the server user.
func (c *cluster) writePatroniConfig(n *node) error {
	b, err := json.MarshalIndent(c.patroniConfig(n), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(n.ha.config, b, 0o600); err != nil {
		return err
	}
	return os.Chown(n.ha.config, c.uid, c.gid)
}

// startPatroni runs n's Patroni in its site.
func (c *cluster) startPatroni(n *node) error { return c.startDaemon(n) }

// startDaemon runs n's manager process in its site: Patroni, or repmgrd.
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
	cmd := exec.Command(patroniBin, n.ha.config)
	if c.plan.manager.kind == ManagerRepmgr {
		cmd = exec.Command(c.inst.bin("repmgrd"), "-f", n.ha.config, "--daemonize=false")
	}
	c.asServerUser(cmd)
	if c.plan.manager.kind == ManagerRepmgr {
		// Its promote and follow commands write temporary files there.
		cmd.Env = append(cmd.Env, "TMPDIR="+n.ha.dir)
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
	if c.plan.manager != nil && c.plan.manager.kind == ManagerRepmgr {
		return "repmgrd"
	}
	return "patroni"
}

// upPatroni starts the store, the primary's Patroni (which bootstraps the
// cluster), then every standby's (each copies the primary), and waits
// until every standby streams and, in synchronous mode, one is
// synchronous. On error the caller closes what was started.
func (c *cluster) upPatroni(ctx context.Context) error {
	if _, err := os.Stat(patroniBin); err != nil {
		return fmt.Errorf("patroni is not installed (%s): run scripts/deps.sh ha, or apt-get install patroni python3-etcd etcd-server", patroniBin)
	}
	fmt.Fprintf(c.log, "manager %s\n", c.plan.manager.describe())
	st, err := c.startStore(ctx, c.plan.manager.storeSites)
	if err != nil {
		return err
	}
	c.store = st
	if err := c.layoutManaged(); err != nil {
		return err
	}
	for _, n := range c.nodes {
		if err := c.writePatroniConfig(n); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	primary := c.byName[c.plan.primaries[0]]
	start := time.Now()
	if err := c.startPatroni(primary); err != nil {
		return err
	}
	if err := c.waitRole(ctx, primary, "primary", c.plan.manager.electionBound()+2*time.Minute); err != nil {
		return err
	}
	if err := primary.exec(ctx, "postgres", "CREATE DATABASE "+Database); err != nil {
		return err
	}
	if err := primary.exec(ctx, "", markerDDL); err != nil {
		return err
	}
	fmt.Fprintf(c.log, "node %s: primary %s bootstrapped by patroni in %s (%.2f s)\n", primary.Name, c.inst.Version, primary.Site, time.Since(start).Seconds())
	var standbys []*node
	for _, n := range c.nodes {
		if n != primary {
			standbys = append(standbys, n)
		}
	}
	for _, n := range standbys {
		if err := c.startPatroni(n); err != nil {
			return err
		}
	}
	err = enginekit.Each(standbys, func(n *node) error {
		t := time.Now()
		if err := c.waitStreaming(ctx, primary, n); err != nil {
			return err
		}
		fmt.Fprintf(c.log, "node %s: standby of %s streaming, copied by patroni (%.2f s)\n", n.Name, primary.Name, time.Since(t).Seconds())
		return nil
	})
	if err != nil {
		return err
	}
	if c.plan.manager.syncMode {
		var names string
		_, err := enginekit.Poll{Interval: 100 * time.Millisecond, Stall: c.plan.manager.electionBound()}.Until(ctx, func(ctx context.Context) (bool, string, error) {
			err := primary.query1(ctx, "", `SELECT coalesce(string_agg(application_name, ', '), '') FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')`, &names)
			return err == nil && names != "", "no synchronous standby yet", nil
		})
		if err != nil {
			return fmt.Errorf("patroni chose no synchronous standby: %w", err)
		}
		fmt.Fprintf(c.log, "node %s: synchronous standby %s (patroni's synchronous_mode)\n", primary.Name, names)
	}
	c.startWatch()
	return nil
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
// primary's pg_stat_replication says (Patroni names each stream after its
// member).
func (c *cluster) waitStreaming(ctx context.Context, primary, standby *node) error {
	bound := 2*time.Minute + 20*c.lab.Spec.WorstRoundTrip()
	var state string
	_, err := enginekit.Poll{Interval: 100 * time.Millisecond, Stall: bound}.Until(ctx, func(ctx context.Context) (bool, string, error) {
		if st := standby.ha.proc.ExitStatus(); st != "" {
			return false, "", fmt.Errorf("%s exited (%s): %s", c.daemonName(), st, tailFile(standby.ha.logPath, 4))
		}
		state = ""
		err := primary.query1(ctx, "", `SELECT coalesce(max(state), '') FROM pg_stat_replication WHERE application_name = $1`, &state, standby.Name)
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

// postmasterPID is the PID of the postmaster Patroni started for n, from
// postmaster.pid, when that process runs this data directory; 0 otherwise.
func (n *node) managedPostmasterPID() int {
	b, err := os.ReadFile(filepath.Join(n.dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0
	}
	if startTime(pid) == "" {
		return 0
	}
	cl := cmdline(pid)
	if !strings.HasPrefix(cl, n.c.inst.bin("postgres")) || !strings.Contains(cl, n.dataDir) {
		return 0 // PIDs are reused
	}
	return pid
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

// killManaged kills the node: Patroni and the server together, a crash of
// its host.
func (c *cluster) killManaged(ctx context.Context, n *node) error {
	n.ha.procLock <- struct{}{}
	defer func() { <-n.ha.procLock }()
	tree := n.serverTree()
	var procs []proc
	if pid := n.ha.proc.PID(); pid != 0 {
		procs = append(procs, proc{pid, startTime(pid)})
		// Patroni's own children (a pg_basebackup, a pg_rewind, a
		// callback) die with it.
		for _, k := range childrenByParent()[pid] {
			procs = append(procs, proc{k, startTime(k)})
		}
	}
	procs = append(procs, tree...)
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

// stopManaged stops Patroni, which stops the server (SIGTERM: SIGINT does
// not stop it), and kills whatever is left after timeout.
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

// signalTree sends sig to Patroni and to the server's processes.
func (n *node) signalTree(sig syscall.Signal) error {
	var err error
	if pid := n.ha.proc.PID(); pid != 0 {
		err = syscall.Kill(pid, sig)
	}
	for _, p := range n.serverTree() {
		_ = syscall.Kill(p.pid, sig)
	}
	return err
}

// managedStage does action to one of a managed node's stages: the manager
// alone ("patroni") or the server alone ("postgres").
func (c *cluster) managedStage(ctx context.Context, n *node, stage, action string) error {
	switch stage {
	case c.daemonName():
		return c.patroniAction(ctx, n, action)
	case "postgres":
		return c.serverAction(ctx, n, action)
	}
	return fmt.Errorf("node %s has no stage %q; its stages: %s", n.Name, stage, strings.Join(c.plan.managerStages(), ", "))
}

// patroniAction acts on Patroni alone: the server goes on without its
// manager (killed, Patroni leaves it running).
func (c *cluster) patroniAction(ctx context.Context, n *node, action string) error {
	switch action {
	case "kill":
		p := n.ha.proc
		if p.PID() == 0 {
			return fmt.Errorf("node %s: %s is not running", n.Name, c.daemonName())
		}
		_ = p.Signal(ctx, syscall.SIGKILL)
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
		if err := c.patroniAction(ctx, n, "stop"); err != nil {
			return err
		}
		return c.patroniAction(ctx, n, "start")
	case "pause", "resume":
		sig := syscall.SIGSTOP
		if action == "resume" {
			sig = syscall.SIGCONT
		}
		if pid := n.ha.proc.PID(); pid == 0 || syscall.Kill(pid, sig) != nil {
			return fmt.Errorf("node %s: %s is not running", n.Name, c.daemonName())
		}
	default:
		return fmt.Errorf("unknown action %q", action)
	}
	fmt.Fprintf(c.log, "node %s: %s %s\n", n.Name, c.daemonName(), pastTense(action))
	return nil
}

// serverAction acts on the server alone, under a running Patroni, which
// notices within a loop and acts as it does (starts it again, or fails
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
		return fmt.Errorf("node %s: patroni starts its server itself: kill or stop the postgres stage, and patroni starts it again", n.Name)
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

// closeManaged stops every Patroni (each stops its server) and the store.
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
}

// managerProcesses are Patroni's processes, role "patroni", and the
// store's, role "etcd".
func (c *cluster) managerProcesses() []engine.Process {
	var out []engine.Process
	for _, n := range c.nodes {
		if n.ha == nil {
			continue
		}
		if pid := n.ha.proc.PID(); pid != 0 {
			out = append(out, engine.Process{Node: n.Name, Role: c.daemonName(), PID: pid})
		}
	}
	out = append(out, c.proxyProcesses()...)
	return append(out, c.store.processes()...)
}
