package mariadb

import (
	"context"
	"fmt"
	"replab/internal/engine"
	"syscall"
	"time"
)

// Node control (engine.NodeControl): a stopped or killed node keeps its
// data directory, and Start runs mariadbd again on it (after a kill,
// InnoDB recovers from its redo log; a replica resumes from its GTID
// position by itself).

func (c *cluster) controlled(name string) (*node, error) {
	n := c.byName[name]
	if n == nil {
		return nil, engine.NoSuchNode(name, c.Nodes())
	}
	return n, nil
}

// Stop implements engine.NodeControl: a clean shutdown (SIGTERM), waiting
// until mariadbd exits.
func (c *cluster) Stop(ctx context.Context, name string) error {
	return c.signal(ctx, name, syscall.SIGTERM, "stopped")
}

// Kill implements engine.NodeControl: SIGKILL to mariadbd (one process:
// its roles are threads), waiting until it is gone.
func (c *cluster) Kill(ctx context.Context, name string) error {
	return c.signal(ctx, name, syscall.SIGKILL, "killed")
}

func (c *cluster) signal(ctx context.Context, name string, sig syscall.Signal, what string) error {
	n, err := c.controlled(name)
	if err != nil {
		return err
	}
	if n.pid() == 0 {
		return fmt.Errorf("node %s is not running", name)
	}
	n.closeAdmin()
	if err := n.proc.Load().Signal(ctx, sig); err != nil {
		return fmt.Errorf("node %s: not %s: %w", name, what, err)
	}
	fmt.Fprintf(c.log, "node %s: %s\n", name, what)
	return nil
}

// Start implements engine.NodeControl.
func (c *cluster) Start(ctx context.Context, name string) error {
	n, err := c.controlled(name)
	if err != nil {
		return err
	}
	if n.pid() != 0 {
		return fmt.Errorf("node %s is already running", name)
	}
	start := time.Now()
	var args []string
	if c.plan.replication == Galera {
		pos, err := n.wsrepRecover(ctx)
		if err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		if pos != "" {
			args = append(args, "--wsrep_start_position="+pos)
		}
	}
	if err := n.startWith(ctx, args); err != nil {
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

var _ engine.Pauser = (*cluster)(nil)

// Pause implements engine.Pauser: SIGSTOP to the server (one process: its
// roles are threads), a server that hangs with its connections open.
func (c *cluster) Pause(ctx context.Context, name string) error {
	n, err := c.controlled(name)
	if err != nil {
		return err
	}
	return n.proc.Load().Freeze(c.log, name, true)
}

// Resume implements engine.Pauser.
func (c *cluster) Resume(ctx context.Context, name string) error {
	n, err := c.controlled(name)
	if err != nil {
		return err
	}
	return n.proc.Load().Freeze(c.log, name, false)
}
