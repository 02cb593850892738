package postgres

import (
	"context"
	"fmt"
	"os"
	"replab/internal/engine"
	"replab/internal/enginekit"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Node control (engine.NodeControl): a stopped or killed node keeps its
// data directory, and Start runs its postmaster again on it (after a kill,
// PostgreSQL recovers from its WAL, as after a crash).

// pid is the postmaster's PID while it runs; 0 when the node is down.
func (n *node) pid() int {
	if n.ha != nil {
		return n.managedPostmasterPID()
	}
	pm := n.proc.Load()
	if pm == nil {
		return 0
	}
	select {
	case <-pm.exited:
		return 0
	default:
		return pm.cmd.Process.Pid
	}
}

func (c *cluster) controlled(name string) (*node, error) {
	n := c.byName[name]
	if n == nil {
		return nil, enginekit.NoSuchNode(name, c.Nodes())
	}
	return n, nil
}

// Stop implements engine.NodeControl: a fast shutdown (SIGINT: clients are
// disconnected, the WAL is flushed), waiting until the postmaster exits.
func (c *cluster) Stop(ctx context.Context, name string) error {
	if c.isSink(name) {
		return c.sinks.Stop(ctx, name)
	}
	n, err := c.controlled(name)
	if err != nil {
		return err
	}
	if n.ha != nil {
		if err := c.daemonAction(ctx, n, "stop"); err != nil {
			return err
		}
		if c.plan.manager.kind == ManagerRepmgr && n.managedPostmasterPID() != 0 {
			// repmgrd leaves the server running: stop it too.
			return c.serverAction(ctx, n, "stop")
		}
		return nil
	}
	pm := n.proc.Load()
	if n.pid() == 0 {
		return fmt.Errorf("node %s is not running", name)
	}
	n.closeAdmin()
	n.signalAll(syscall.SIGCONT) // a paused node would not see the SIGINT
	_ = pm.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-pm.exited:
		fmt.Fprintf(c.log, "node %s: stopped\n", name)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("node %s: not stopped: %w", name, ctx.Err())
	}
}

// Kill implements engine.NodeControl: SIGKILL to the postmaster and every
// one of its children at once, then a wait until all are gone.
func (c *cluster) Kill(ctx context.Context, name string) error {
	if c.isSink(name) {
		return c.sinks.Kill(ctx, name)
	}
	n, err := c.controlled(name)
	if err != nil {
		return err
	}
	if n.ha != nil {
		return c.killManaged(ctx, n)
	}
	pm := n.proc.Load()
	pid := n.pid()
	if pid == 0 {
		return fmt.Errorf("node %s is not running", name)
	}
	n.closeAdmin()
	procs := []proc{{pid, startTime(pid)}}
	for _, k := range childrenByParent()[pid] {
		procs = append(procs, proc{k, startTime(k)})
	}
	for _, p := range procs {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	select {
	case <-pm.exited:
	case <-ctx.Done():
		return fmt.Errorf("node %s: killed postmaster %d did not exit: %w", name, pid, ctx.Err())
	}
	for _, p := range procs {
		for p.alive() {
			select {
			case <-ctx.Done():
				return fmt.Errorf("node %s: killed process %d did not exit: %w", name, p.pid, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	if err := n.releaseIPC(pid); err != nil {
		fmt.Fprintf(c.log, "node %s: warning: %v\n", name, err)
	}
	fmt.Fprintf(c.log, "node %s: killed (%d processes)\n", name, len(procs))
	return nil
}

// Start implements engine.NodeControl. A node failed over from is not
// started: it would be a second primary..
func (c *cluster) Start(ctx context.Context, name string) error {
	if c.isSink(name) {
		return c.sinks.Start(ctx, name)
	}
	n, err := c.controlled(name)
	if err != nil {
		return err
	}
	if n.ha != nil {
		// The manager starts the server, and rejoins it as a standby when
		// another node took over meanwhile.
		if n.ha.proc.PID() != 0 {
			return fmt.Errorf("node %s is already running", name)
		}
		if c.plan.manager.kind == ManagerRepmgr {
			return c.startRepmgrNode(ctx, n)
		}
		return c.daemonAction(ctx, n, "start")
	}
	if n.pid() != 0 {
		return fmt.Errorf("node %s is already running", name)
	}
	c.topo.RLock()
	failed := n.failedOver
	c.topo.RUnlock()
	if failed {
		return fmt.Errorf("node %s: %w: started, it would be a second primary (rejoining it is not built)", name, engine.ErrFailedOver)
	}
	start := time.Now()
	if err := n.start(ctx); err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	fmt.Fprintf(c.log, "node %s: started again (%.2f s)\n", name, time.Since(start).Seconds())
	return nil
}

// Restart implements engine.NodeControl.
func (c *cluster) Restart(ctx context.Context, name string) error {
	if err := c.Stop(ctx, name); err != nil {
		return err
	}
	return c.Start(ctx, name)
}

func (n *node) closeAdmin() {
	if n.admin != nil {
		n.admin.Close()
		n.admin = nil
	}
}

// proc is a process known by PID and start time: PIDs are reused.
type proc struct {
	pid   int
	start string
}

func (p proc) alive() bool {
	s := startTime(p.pid)
	return s != "" && s == p.start
}

// startTime is field 22 of /proc/PID/stat (clock ticks since boot); "" when
// the process is gone.
func startTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	if f[0] == "Z" {
		return "" // a zombie has exited; its parent has not reaped it yet
	}
	return f[19]
}

var _ engine.Pauser = (*cluster)(nil)

// Pause implements engine.Pauser: SIGSTOP to the postmaster and every one
// of its children, a server that hangs with its connections open.
func (c *cluster) Pause(ctx context.Context, name string) error {
	if c.isSink(name) {
		return c.sinks.Pause(ctx, name)
	}
	return c.stopCont(name, syscall.SIGSTOP, "paused")
}

// Resume implements engine.Pauser: SIGCONT to the same processes.
func (c *cluster) Resume(ctx context.Context, name string) error {
	if c.isSink(name) {
		return c.sinks.Resume(ctx, name)
	}
	return c.stopCont(name, syscall.SIGCONT, "resumed")
}

func (c *cluster) stopCont(name string, sig syscall.Signal, what string) error {
	n, err := c.controlled(name)
	if err != nil {
		return err
	}
	if n.ha != nil {
		// The whole node hangs: its manager with its server.
		if err := n.signalTree(sig); err != nil {
			return fmt.Errorf("node %s: %s is not running: %w", name, c.daemonName(), err)
		}
		fmt.Fprintf(c.log, "node %s: %s (%s and its server)\n", name, what, c.daemonName())
		return nil
	}
	if n.pid() == 0 {
		return fmt.Errorf("node %s is not running", name)
	}
	if err := n.signalAll(sig); err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	fmt.Fprintf(c.log, "node %s: %s\n", name, what)
	return nil
}

// signalAll sends sig to the postmaster and its children: children first
// on SIGSTOP, the postmaster first on SIGCONT (a stopped postmaster would
// not notice a child's change meanwhile). An error only if the postmaster
// could not be signalled.
func (n *node) signalAll(sig syscall.Signal) error {
	pid := n.pid()
	if pid == 0 {
		return nil
	}
	pids := append(childrenByParent()[pid], pid)
	if sig == syscall.SIGCONT {
		pids = append([]int{pid}, pids[:len(pids)-1]...)
	}
	var err error
	for _, p := range pids {
		if e := syscall.Kill(p, sig); e != nil && p == pid {
			err = e
		}
	}
	return err
}
