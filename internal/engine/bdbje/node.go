package bdbje

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/spec"
)

// defaultFreeDisk is the free space JE keeps on a node's file system
// unless the node's settings say otherwise.
const defaultFreeDisk = 64 << 20

// startTimeout bounds a node's start: the JVM, JE's recovery of its log,
// joining the group (an election when the master is gone).
const startTimeout = 90 * time.Second

// node is one JVM in a site.
type node struct {
	spec.Node
	c      *cluster
	site   *lab.Site
	addr   netip.AddrPort // JE's replication port
	client netip.AddrPort // the node program's port
	base   string         // everything of the node lives under base

	proc    atomic.Pointer[enginekit.Proc] // nil before the first start
	started atomic.Bool                    // it ran once: the group knows it
}

func (n *node) envDir() string  { return filepath.Join(n.base, "env") }
func (n *node) logPath() string { return filepath.Join(n.base, "node.log") }

// create makes the node's directories, starts it and waits until it has
// joined the group.
func (n *node) create(ctx context.Context) error {
	for _, d := range []string{n.base, n.envDir()} {
		if err := enginekit.MkdirOwned(d, n.c.uid, n.c.gid); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	if err := n.start(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return nil
}

// args is the JVM's command line.
func (n *node) args() []string {
	p := n.c.plan
	helpers := n.c.helpers()
	if n == n.c.nodes[0] && !n.started.Load() {
		helpers = n.addr.String() // a new group's founder names itself
	}
	nodeType := "ELECTABLE"
	if n.Role == RoleSecondary {
		nodeType = "SECONDARY"
	}
	a := []string{
		fmt.Sprintf("-Xmx%d", p.heapBytes), fmt.Sprintf("-Xms%d", p.heapBytes),
		// One GC thread, no JIT threads beyond the default, no
		// hsperfdata files in /tmp (nothing left behind): many JVMs share
		// two cores.
		"-XX:+UseSerialGC", "-XX:-UsePerfData", "-Xss512k",
	}
	if p.jit == JITQuick {
		a = append(a, "-XX:TieredStopAtLevel=1")
	}
	a = append(a,
		"-cp", n.c.prog.classpath(), "ReplabNode",
		"--name", n.Name, "--group", "replab",
		"--env", n.envDir(),
		"--host", n.addr.Addr().String(),
		"--port", strconv.Itoa(int(n.addr.Port())),
		"--client-port", strconv.Itoa(int(n.client.Port())),
		"--helpers", helpers,
		"--node-type", nodeType,
		"--durability", p.durability(),
		"--ack-timeout-ms", strconv.FormatInt(p.ackTimeout.Milliseconds(), 10),
		"--cache-bytes", strconv.FormatInt(p.cacheBytes, 10),
	)
	if _, set := n.Settings["je.freeDisk"]; !set {
		// JE stops writing when less than je.freeDisk (5 GB by default)
		// is free on the environment's file system: a lab's volumes are
		// smaller than that.
		a = append(a, "--param", fmt.Sprintf("je.freeDisk=%d", defaultFreeDisk))
	}
	for _, k := range slices.Sorted(maps.Keys(n.Settings)) {
		a = append(a, "--param", k+"="+n.Settings[k])
	}
	return a
}

// start runs the node program in the node's site as the servers' user and
// waits until it answers on its client port with a known state.
func (n *node) start(ctx context.Context) error {
	cmd := exec.Command(n.c.prog.java, n.args()...)
	enginekit.AsUser(cmd, n.c.uid, n.c.gid)
	out, err := os.OpenFile(n.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	pr, err := enginekit.StartProc(n.site, cmd)
	if err != nil {
		return fmt.Errorf("start the JVM: %w", err)
	}
	n.proc.Store(pr)
	deadline := time.Now().Add(startTimeout)
	for {
		st, err := n.stateFromSite(ctx, 2*time.Second)
		if err == nil && (st.State == stateMaster || st.State == stateReplica) {
			n.started.Store(true)
			return nil
		}
		if err == nil {
			err = fmt.Errorf("state %s", st.State)
		}
		select {
		case <-pr.Exited():
			return fmt.Errorf("the node program exited during start-up: %s", n.logTail())
		case <-ctx.Done():
			pr.Stop(syscall.SIGKILL, 5*time.Second)
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			pr.Stop(syscall.SIGKILL, 5*time.Second)
			return fmt.Errorf("not in the group within %s (%v): %s", startTimeout, err, n.logTail())
		}
	}
}

// stateFromSite asks the node for its state from its own site (no WAN
// link in the way).
func (n *node) stateFromSite(ctx context.Context, timeout time.Duration) (*nodeState, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := n.dialFromSite(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.state(ctx)
}

// dialFromSite connects to the node's client port from its own site.
func (n *node) dialFromSite(ctx context.Context) (*conn, error) {
	if n.site == nil {
		return nil, errors.New("no site")
	}
	return dial(ctx, n.site.DialContext, n.client.String())
}

// logTail is the end of the node program's output, and JE's own
// complaints (je.info: why a node stays UNKNOWN, for instance).
func (n *node) logTail() string {
	out := "(no log)"
	if b, err := os.ReadFile(n.logPath()); err == nil && len(b) > 0 {
		out = enginekit.LastLines(string(b), 6)
	}
	if b, err := os.ReadFile(filepath.Join(n.envDir(), "je.info.0")); err == nil {
		var bad []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, " SEVERE ") || strings.Contains(l, " WARNING ") {
				bad = append(bad, l)
			}
		}
		if len(bad) > 3 {
			bad = bad[len(bad)-3:]
		}
		if len(bad) > 0 {
			out += "\nje.info: " + strings.Join(bad, "\n")
		}
	}
	return out
}

// pid is the JVM's PID while it runs; 0 when the node is down.
func (n *node) pid() int { return n.proc.Load().PID() }

// stop asks the JVM to close the environment and exit (SIGTERM), killing
// it after timeout.
func (n *node) stop(timeout time.Duration) { n.proc.Load().Stop(syscall.SIGTERM, timeout) }

// Proc implements enginekit.ProcServer.
func (n *node) Proc() *enginekit.Proc { return n.proc.Load() }

// Disconnect implements enginekit.ProcServer: replab's connections are per
// call.
func (n *node) Disconnect() {}

// StartServer implements enginekit.ProcServer.
func (n *node) StartServer(ctx context.Context) error { return n.start(ctx) }

// procNodes is the cluster's node control: a stopped or killed node keeps
// its environment, and Start runs the JVM again on it; it rejoins the
// group (as a replica if another node was elected meanwhile).
func (c *cluster) procNodes() enginekit.ProcNodes {
	return enginekit.ProcNodes{Log: c.log, StopSig: syscall.SIGTERM, Node: func(name string) (enginekit.ProcServer, error) {
		n := c.byName[name]
		if n == nil {
			return nil, enginekit.NoSuchNode(name, c.Nodes())
		}
		return n, nil
	}}
}

// Kill implements engine.NodeControl: SIGKILL; when the node was master,
// the time until the others elect a new one is measured and logged.
func (c *cluster) Kill(ctx context.Context, name string) error {
	return c.downing(name, func() error { return c.ProcNodes.Kill(ctx, name) })
}

// Stop implements engine.NodeControl: a master's clean shutdown also
// leaves the group without a master until an election.
func (c *cluster) Stop(ctx context.Context, name string) error {
	return c.downing(name, func() error { return c.ProcNodes.Stop(ctx, name) })
}

// downing takes node name down with down and, when it was master, watches
// the election that follows.
func (c *cluster) downing(name string, down func() error) error {
	wasMaster := c.master() == name
	start := time.Now()
	if err := down(); err != nil {
		return err
	}
	if wasMaster {
		go c.watchElection(name, start)
	}
	return nil
}

// watchElection logs how long the group ran without a master after old
// went down: until a running node says it is master. It gives up when the
// cluster closes.
func (c *cluster) watchElection(old string, since time.Time) {
	for time.Since(since) < masterWait {
		for _, n := range c.running() {
			if n.Name == old {
				continue
			}
			if st, err := n.stateFromSite(context.Background(), time.Second); err == nil && st.State == stateMaster {
				c.setMaster(n.Name)
				fmt.Fprintf(c.log, "bdbje: %s elected master %.2f s after %s went down\n", n.Name, time.Since(since).Seconds(), old)
				return
			}
		}
		select {
		case <-c.closed:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	fmt.Fprintf(c.log, "bdbje: no master %s after %s went down\n", masterWait, old)
}
